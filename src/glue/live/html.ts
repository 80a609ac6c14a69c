// The live panel's HTML for a real webview: resources through asWebviewUri, a fresh nonce per load.
import * as crypto from 'node:crypto';
import * as vscode from 'vscode';
import { liveHtmlTemplate } from './template';

export function liveHtml(webview: vscode.Webview, extensionUri: vscode.Uri): string {
  return liveHtmlTemplate({
    cspSource: webview.cspSource,
    nonce: crypto.randomBytes(18).toString('base64'),
    resource: (...p) => webview.asWebviewUri(vscode.Uri.joinPath(extensionUri, ...p)).toString(),
  });
}
