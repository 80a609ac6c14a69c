// The live panel host: one webview panel following the focused run. Sends at most ~10 updates a
// second, each already reduced to one bucket per chart pixel (Note [Live update shape]); restores
// after a reload through a serializer (the webview keeps its last view in getState).
import * as vscode from 'vscode';
import { liveWebviewMessages, type LiveAction, type LiveHostMessage, type LiveWebviewMessage } from '../../core/base/protocol';
import type { LiveRuns } from '../runs/liveRuns';
import { Throttle } from '../throttle';
import { panelWebviewOptions } from '../webview/page';
import { receiveMessages } from '../webview/receive';
import { liveHtml } from './html';

export const LIVE_VIEW_TYPE = 'gpuMemoryLens.live';

export interface LiveActions {
  run(action: LiveAction): Promise<unknown>;
}

export class LivePanel implements vscode.Disposable {
  private panel: vscode.WebviewPanel | undefined;
  private panelSubs: vscode.Disposable[] = [];
  private widthPx = 600;
  private readonly throttle = new Throttle(100, () => this.push());
  private readonly subs: vscode.Disposable[] = [];

  constructor(
    private readonly extensionUri: vscode.Uri,
    private readonly runs: LiveRuns,
    private readonly actions: LiveActions,
  ) {
    this.subs.push(
      runs.onDidChange(() => this.throttle.trigger()),
      vscode.window.registerWebviewPanelSerializer(LIVE_VIEW_TYPE, {
        deserializeWebviewPanel: async (panel) => this.adopt(panel),
      }),
    );
  }

  private options(): vscode.WebviewOptions & vscode.WebviewPanelOptions {
    return panelWebviewOptions(this.extensionUri);
  }

  /** Opens (or reveals) the panel; a new one beside `script`'s editor where the run came from a visible one. */
  show(preserveFocus = false, script?: vscode.Uri): void {
    if (this.panel) {
      this.panel.reveal(undefined, preserveFocus);
      return;
    }
    const panel = vscode.window.createWebviewPanel(LIVE_VIEW_TYPE, 'GPU Memory — Live', { viewColumn: columnBeside(script), preserveFocus }, this.options());
    this.adopt(panel);
  }

  private adopt(panel: vscode.WebviewPanel): void {
    this.panel?.dispose();
    this.panel = panel;
    panel.webview.options = this.options();
    panel.webview.html = liveHtml(panel.webview, this.extensionUri);
    this.panelSubs = [
      receiveMessages(panel.webview, liveWebviewMessages, (msg) => this.onMessage(msg)),
      panel.onDidChangeViewState(() => panel.visible && this.push()),
      panel.onDidDispose(() => {
        for (const d of this.panelSubs) d.dispose();
        this.panelSubs = [];
        if (this.panel === panel) this.panel = undefined;
      }),
    ];
  }

  private async onMessage(msg: LiveWebviewMessage): Promise<void> {
    switch (msg.type) {
      case 'ready':
      case 'resize':
        this.widthPx = Math.max(50, msg.widthPx);
        this.push();
        break;
      case 'action':
        this.post({ type: 'busy', action: msg.action, busy: true });
        try {
          await this.actions.run(msg.action);
        } finally {
          this.post({ type: 'busy', action: msg.action, busy: false });
          this.push();
        }
        break;
    }
  }

  private post(msg: LiveHostMessage): void {
    // A hidden panel drops messages; it gets a full update when it becomes visible again.
    if (this.panel?.visible) void this.panel.webview.postMessage(msg);
  }

  private push(): void {
    if (!this.panel?.visible) return;
    const focused = this.runs.focused;
    if (!focused) {
      this.post({ type: 'noRun' });
      return;
    }
    this.post({ type: 'update', run: focused.run.view(Math.min(this.widthPx, 2000)) });
  }

  dispose(): void {
    this.throttle.dispose();
    for (const d of [...this.subs, ...this.panelSubs]) d.dispose();
    this.panel?.dispose();
  }
}

/**
 * Note [Live panel beside the script]: ViewColumn.Beside is beside the active group, and a run started from a page
 * that is not the script's editor (the walkthrough's button, a command from another group) made the panel a tab of
 * the script's own group, hiding the lines it annotates. The panel opens in the group right of the script's editor
 * instead, where that editor is visible; otherwise beside the active group.
 */
function columnBeside(script: vscode.Uri | undefined): vscode.ViewColumn {
  const editor = script && vscode.window.visibleTextEditors.find((e) => e.document.uri.toString() === script.toString());
  if (!editor?.viewColumn) return vscode.ViewColumn.Beside;
  return Math.min(editor.viewColumn + 1, vscode.ViewColumn.Nine) as vscode.ViewColumn;
}
