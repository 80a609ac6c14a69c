// The extension side of the shared page builder: webview options and the page's resources through
// asWebviewUri, with a fresh nonce per load (Note [Webview CSP] in src/core/views/page/page.ts).
import * as crypto from 'node:crypto';
import * as vscode from 'vscode';
import { type PageContext, WEBVIEW_RESOURCE_ROOTS } from '../../core/views/page/page';

/** Scripts on, and only dist/webview and media/ loadable: what every panel needs. */
export function panelWebviewOptions(extensionUri: vscode.Uri): vscode.WebviewOptions {
  return {
    enableScripts: true,
    localResourceRoots: WEBVIEW_RESOURCE_ROOTS.map((p) => vscode.Uri.joinPath(extensionUri, ...p)),
  };
}

/** What a pure page function (liveHtmlTemplate, snapshotPageHtml) needs from a real webview. */
export function pageContext(webview: vscode.Webview, extensionUri: vscode.Uri): PageContext {
  return {
    cspSource: webview.cspSource,
    nonce: crypto.randomBytes(18).toString('base64'),
    resource: (...p) => webview.asWebviewUri(vscode.Uri.joinPath(extensionUri, ...p)).toString(),
  };
}
