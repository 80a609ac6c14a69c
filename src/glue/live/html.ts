// The live panel's HTML for a real webview: resources through asWebviewUri, a fresh nonce per load.
import type * as vscode from 'vscode';
import { pageContext } from '../webview/page';
import { liveHtmlTemplate } from './template';

export function liveHtml(webview: vscode.Webview, extensionUri: vscode.Uri): string {
  return liveHtmlTemplate(pageContext(webview, extensionUri));
}
