// Empty Cache and Capture Snapshot, sent over the control socket to the focused run's processes.
import * as vscode from 'vscode';
import { emptyCache, snapshot } from '../../core/base/control';
import { formatBytes } from '../../core/base/units/bytes';
import type { RunProcess } from '../../core/views/live';
import { pickRun } from './launcher';
import type { LiveRuns, TrackedRun } from './liveRuns';

function describe(p: RunProcess): string {
  return p.entry.rank !== undefined ? `rank ${p.entry.rank} (pid ${p.entry.pid})` : `pid ${p.entry.pid}`;
}

export class WorkloadActions {
  constructor(private readonly runs: LiveRuns) {}

  /** The focused run if it is running, else ask among the running ones. */
  private async target(title: string): Promise<TrackedRun | undefined> {
    const focused = this.runs.focused;
    if (focused?.run.isLive() && focused.run.controllable().length > 0) return focused;
    const running = this.runs.running().filter((s) => s.run.controllable().length > 0);
    if (running.length === 0) {
      void vscode.window.showWarningMessage(
        'GPU Memory Lens: no running workload to talk to. Start one with "GPU Memory: Run Python File with Memory Tracking" (it must have initialised CUDA).',
      );
      return undefined;
    }
    return running.length === 1 ? running[0] : pickRun(running, title);
  }

  /** Returns the bytes released (summed over the run's processes), or undefined if nothing was sent. */
  async emptyCache(): Promise<number | undefined> {
    const tracked = await this.target('Empty the cache of which workload?');
    if (!tracked) return undefined;
    const procs = tracked.run.controllable();
    const results = await Promise.allSettled(procs.map((p) => emptyCache(p.entry.socket!)));
    let before = 0;
    let after = 0;
    const failures: string[] = [];
    results.forEach((r, i) => {
      if (r.status === 'fulfilled') {
        before += r.value.reserved_before;
        after += r.value.reserved_after;
      } else {
        failures.push(`${describe(procs[i])}: ${(r.reason as Error).message}`);
      }
    });
    if (failures.length === results.length) {
      void vscode.window.showErrorMessage(`GPU Memory Lens: Empty Cache failed. ${failures.join(' ')}`);
      return undefined;
    }
    const released = Math.max(0, before - after);
    const msg = `Empty Cache released ${formatBytes(released)}: reserved ${formatBytes(before)} → ${formatBytes(after)}${procs.length > 1 ? ` over ${procs.length} processes` : ''}.`;
    void vscode.window.showInformationMessage(`GPU Memory Lens: ${msg}`);
    if (failures.length > 0) void vscode.window.showWarningMessage(`GPU Memory Lens: some processes did not answer. ${failures.join(' ')}`);
    return released;
  }

  /** Asks each process of the run for a snapshot pickle and opens the first in the snapshot panel. */
  async captureSnapshot(): Promise<vscode.Uri[]> {
    const tracked = await this.target('Snapshot which workload?');
    if (!tracked) return [];
    const procs = tracked.run.controllable();
    const results = await Promise.allSettled(procs.map((p) => snapshot(p.entry.socket!)));
    const uris: vscode.Uri[] = [];
    const failures: string[] = [];
    results.forEach((r, i) => {
      if (r.status === 'fulfilled') uris.push(vscode.Uri.file(r.value.pickle));
      else failures.push(`${describe(procs[i])}: ${(r.reason as Error).message}`);
    });
    if (failures.length > 0) void vscode.window.showErrorMessage(`GPU Memory Lens: Capture Snapshot failed for ${failures.join(' ')}`);
    if (uris.length > 0) await openSnapshot(uris[0]);
    return uris;
  }
}

/** Opens a pickle in the snapshot panel; reveals it in the explorer if that panel is not available. */
export async function openSnapshot(uri: vscode.Uri): Promise<void> {
  const commands = await vscode.commands.getCommands(true);
  if (commands.includes('gpuMemoryLens.openSnapshot')) {
    await vscode.commands.executeCommand('gpuMemoryLens.openSnapshot', uri);
  } else {
    await vscode.commands.executeCommand('revealInExplorer', uri);
  }
}
