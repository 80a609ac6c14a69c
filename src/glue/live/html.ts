// The live panel's HTML: a strict CSP (nothing but our own bundle, styles and fonts from the extension,
// inline code only with this load's nonce) and the bundle that draws from messages.
import * as crypto from 'node:crypto';
import * as vscode from 'vscode';

export function nonce(): string {
  return crypto.randomBytes(18).toString('base64');
}

export function liveHtml(webview: vscode.Webview, extensionUri: vscode.Uri): string {
  const n = nonce();
  const res = (...p: string[]) => webview.asWebviewUri(vscode.Uri.joinPath(extensionUri, ...p)).toString();
  const csp = [
    "default-src 'none'",
    `script-src 'nonce-${n}'`,
    `style-src ${webview.cspSource} 'nonce-${n}'`,
    `img-src ${webview.cspSource} data:`,
    `font-src ${webview.cspSource}`,
  ].join('; ');
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link rel="stylesheet" href="${res('dist', 'webview', 'uPlot.min.css')}" nonce="${n}">
<link rel="stylesheet" href="${res('media', 'live.css')}" nonce="${n}">
<title>GPU Memory — Live</title>
</head>
<body>
<header class="toolbar">
  <div class="title"><span id="session-name">No session</span> <span id="session-state" class="state"></span></div>
  <div class="actions">
    <vscode-button id="btn-empty-cache" appearance="secondary" title="Return cached, unused segments to the driver (torch.cuda.empty_cache())">Empty Cache</vscode-button>
    <vscode-button id="btn-snapshot" appearance="secondary" title="Write a PyTorch snapshot pickle of this moment and open it">Capture Snapshot</vscode-button>
  </div>
</header>
<div id="problems" class="problems" hidden></div>
<div id="empty" class="empty">Run a Python file with <b>GPU Memory: Run Python File with Memory Tracking</b> to see its memory here.</div>
<main id="tracks"></main>
<script nonce="${n}" type="module" src="${res('dist', 'webview', 'toolkit.min.js')}"></script>
<script nonce="${n}" src="${res('dist', 'webview', 'live.js')}"></script>
</body>
</html>`;
}
