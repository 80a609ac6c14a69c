// The live panel's HTML, as a pure function (no vscode import) so the webview test serves exactly what
// the extension does. Strict CSP: nothing but our own files (cspSource), inline code only with this
// load's nonce, no remote content.

export interface LiveHtmlOptions {
  /** webview.cspSource */
  cspSource: string;
  nonce: string;
  /** URI of a file in the extension, by path segments (asWebviewUri in the extension) */
  resource: (...pathSegments: string[]) => string;
}

function attr(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;');
}

export function liveHtmlTemplate(o: LiveHtmlOptions): string {
  const n = attr(o.nonce);
  const res = (...p: string[]) => attr(o.resource(...p));
  const csp = [
    "default-src 'none'",
    `script-src 'nonce-${n}'`,
    `style-src ${o.cspSource} 'nonce-${n}'`,
    `img-src ${o.cspSource} data:`,
    `font-src ${o.cspSource}`,
  ].join('; ');
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${attr(csp)}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<!-- The toolkit (FAST) puts this nonce on the <style> it creates to probe :focus-visible support. -->
<meta property="csp-nonce" content="${n}">
<link rel="stylesheet" href="${res('dist', 'webview', 'uPlot.min.css')}" nonce="${n}">
<link rel="stylesheet" href="${res('media', 'live.css')}" nonce="${n}">
<title>GPU Memory — Live</title>
</head>
<body>
<header class="toolbar">
  <div class="title"><span id="session-name">No session</span> <span id="session-state" class="state"></span></div>
  <div class="actions">
    <vscode-checkbox id="toggle-device-used" checked hidden title="Show what the driver reports as used on the whole device. Off: the y-axis fits allocated and reserved.">Device used</vscode-checkbox>
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
