// The snapshot panel on a session folder (or several): its ranks side by side (Note [Ranks side by side] in
// src/core/ranks/session.ts). A plain webview panel (a folder is no custom-editor document) with the snapshot
// page; RanksSession answers the page, and a click on a rank opens that capture in its own snapshot editor.
import * as path from 'node:path';
import * as vscode from 'vscode';
import { snapshotWebviewMessages, type SnapshotHostMessage } from '../../core/protocol/snapshot';
import { captureFiles } from '../../core/ranks/index';
import { RanksSession } from '../../core/ranks/session';
import { receiveMessages } from '../webview/receive';
import { snapshotHtml, webviewOptions } from './html';

export const RANKS_VIEW = 'gpuMemoryLens.ranks';

/** Opens the ranks view of `folders`; the session is built when the page asks (reading every rank's capture). */
export function openRanksPanel(extensionUri: vscode.Uri, folders: vscode.Uri[], openFile: (uri: vscode.Uri) => Thenable<unknown>): vscode.WebviewPanel {
  const title = folders.map((f) => path.basename(f.fsPath)).join(', ');
  const panel = vscode.window.createWebviewPanel(RANKS_VIEW, `Ranks: ${title}`, vscode.ViewColumn.Active, webviewOptions(extensionUri));
  panel.webview.html = snapshotHtml(panel.webview, extensionUri, `Ranks: ${title}`);
  let session: RanksSession | undefined;
  const post = (messages: SnapshotHostMessage[]) => messages.forEach((m) => void panel.webview.postMessage(m));
  const sub = receiveMessages(panel.webview, snapshotWebviewMessages, (msg) => {
    try {
      if (msg.type === 'ready') {
        post([{ type: 'loading', fileName: title }]);
        session ??= new RanksSession(captureFiles(folders.map((f) => f.fsPath)), { title, displayPath: (f) => vscode.workspace.asRelativePath(f, false) });
        post(session.handle(msg) ?? []);
      } else if (msg.type === 'openRank') {
        const file = session?.file(msg.index);
        if (file) void openFile(vscode.Uri.file(file));
      }
    } catch (err) {
      post([{ type: 'loadFailed', fileName: title, message: err instanceof Error ? err.message : String(err) }]);
    }
  });
  panel.onDidDispose(() => sub.dispose());
  return panel;
}
