// The snapshot webview's options and HTML (src/core/snapshot/page.ts), with asset URIs from the extension.
import * as crypto from 'node:crypto';
import * as vscode from 'vscode';
import { snapshotPageHtml } from '../../core/snapshot/page';

export function webviewOptions(extensionUri: vscode.Uri): vscode.WebviewOptions {
  return {
    enableScripts: true,
    localResourceRoots: [vscode.Uri.joinPath(extensionUri, 'dist', 'webview'), vscode.Uri.joinPath(extensionUri, 'media')],
  };
}

export function snapshotHtml(webview: vscode.Webview, extensionUri: vscode.Uri, title: string): string {
  const asset = (...p: string[]) => webview.asWebviewUri(vscode.Uri.joinPath(extensionUri, ...p)).toString();
  return snapshotPageHtml({
    cspSource: webview.cspSource,
    nonce: crypto.randomBytes(16).toString('base64'),
    cssUri: asset('media', 'snapshot.css'),
    toolkitUri: asset('dist', 'webview', 'toolkit.min.js'),
    scriptUri: asset('dist', 'webview', 'snapshot.js'),
    title,
  });
}
