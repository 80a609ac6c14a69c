// The snapshot webview's options and HTML (src/core/views/snapshot/page.ts), with asset URIs from the extension.
import type * as vscode from 'vscode';
import { snapshotPageHtml } from '../../core/views/snapshot/page';
import { pageContext, panelWebviewOptions } from '../webview/page';

export const webviewOptions = panelWebviewOptions;

export function snapshotHtml(webview: vscode.Webview, extensionUri: vscode.Uri, title: string): string {
  return snapshotPageHtml({ ...pageContext(webview, extensionUri), title });
}
