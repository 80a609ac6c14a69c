// The snapshot panel on a session folder (or several): its ranks side by side (Note [Ranks side by side] in
// src/core/views/ranks/rankSet.ts). A plain webview panel (a folder is no custom-editor document) with the snapshot
// page; RankSet answers the page, and a click on a rank opens that capture in its own snapshot editor.
import * as path from 'node:path';
import * as vscode from 'vscode';
import { snapshotWebviewMessages, type SnapshotHostMessage } from '../../core/base/protocol/snapshot';
import { captureFiles } from '../../core/analyses/ranks/index';
import { RankSet } from '../../core/views/ranks/rankSet';
import { receiveMessages } from '../webview/receive';
import { snapshotHtml, webviewOptions } from './html';

export const RANKS_VIEW = 'gpuMemoryLens.ranks';

/**
 * Opens the ranks view of `folders`. The captures are read from now on, while the page loads (on the reader's worker
 * threads, mostly from their indexes: Note [Rank row from the index]); the page's first message gets the view when
 * it is there, as the snapshot panel host starts its read before the page asks.
 */
export function openRanksPanel(extensionUri: vscode.Uri, folders: vscode.Uri[], openFile: (uri: vscode.Uri) => Thenable<unknown>): vscode.WebviewPanel {
  const title = folders.map((f) => path.basename(f.fsPath)).join(', ');
  const panel = vscode.window.createWebviewPanel(RANKS_VIEW, `Ranks: ${title}`, vscode.ViewColumn.Active, webviewOptions(extensionUri));
  panel.webview.html = snapshotHtml(panel.webview, extensionUri, `Ranks: ${title}`);
  let session: RankSet | undefined;
  const opening = (async () => RankSet.open(captureFiles(folders.map((f) => f.fsPath)), { title, displayPath: (f: string) => vscode.workspace.asRelativePath(f, false) }))();
  opening.catch(() => undefined); // reported to the page when it asks
  let disposed = false;
  const post = (messages: SnapshotHostMessage[]) => {
    if (!disposed) messages.forEach((m) => void panel.webview.postMessage(m));
  };
  const failed = (err: unknown) => post([{ type: 'loadFailed', fileName: title, message: err instanceof Error ? err.message : String(err) }]);
  const sub = receiveMessages(panel.webview, snapshotWebviewMessages, (msg) => {
    if (msg.type === 'ready') {
      if (!session) post([{ type: 'loading', fileName: title }]);
      // Read on the reader's worker threads since the panel opened (Note [Ranks off the host thread]); a page shown
      // again asks again and gets the same view.
      opening.then((s) => {
        session = s;
        post(s.handle(msg) ?? []);
      }, failed);
    } else if (msg.type === 'openRank') {
      const file = session?.file(msg.index);
      if (file) void openFile(vscode.Uri.file(file));
    }
  });
  panel.onDidDispose(() => {
    disposed = true;
    sub.dispose();
  });
  return panel;
}
