// One status bar item: the focused run's allocated / reserved (summed over its processes and
// devices); click opens the live panel. Hidden when no run exists.
import * as vscode from 'vscode';
import { formatBytes } from '../../core/base/units/bytes';
import type { LiveRuns } from './liveRuns';
import { Throttle } from '../throttle';

export class MemoryStatusBar implements vscode.Disposable {
  private readonly item = vscode.window.createStatusBarItem('gpuMemoryLens.status', vscode.StatusBarAlignment.Left, 50);
  private readonly throttle = new Throttle(250, () => this.update());
  private readonly sub: vscode.Disposable;

  constructor(private readonly runs: LiveRuns) {
    this.item.name = 'GPU Memory';
    this.item.command = 'gpuMemoryLens.showLivePanel';
    this.sub = runs.onDidChange(() => this.throttle.trigger());
  }

  private update(): void {
    const focused = this.runs.focused;
    if (!focused) {
      this.item.hide();
      return;
    }
    const t = focused.run.totals();
    const live = focused.run.isLive();
    const icon = live ? '$(pulse)' : '$(history)';
    // The allocator mode is said only when PyTorch's own allocator was observed (the lens is the default).
    const modes = focused.run.allocatorModes();
    const mode = modes.includes('pytorch') ? ' · pytorch allocator' : '';
    this.item.text = `${icon} ${formatBytes(t.allocatedBytes)} / ${formatBytes(t.reservedBytes)}${mode}`;
    const modeLine = modes.length
      ? `\n\nallocator: ${modes.map((m) => (m === 'pytorch' ? "pytorch (observed: PyTorch's own caching allocator)" : 'lens (the lens allocator)')).join(', ')}`
      : '';
    this.item.tooltip = new vscode.MarkdownString(
      `**GPU memory — ${focused.label}** (${live ? 'running' : 'finished'})\n\n` +
        `allocated ${formatBytes(t.allocatedBytes)} · reserved ${formatBytes(t.reservedBytes)} · ${t.processes} process${t.processes === 1 ? '' : 'es'}${modeLine}\n\nClick to open the live panel.`,
    );
    this.item.show();
  }

  dispose(): void {
    this.throttle.dispose();
    this.sub.dispose();
    this.item.dispose();
  }
}
