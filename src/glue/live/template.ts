// The live panel's HTML, as a pure function (no vscode import) so the webview test serves exactly what
// the extension does: the shared page builder (src/core/views/page/page.ts, Note [Webview CSP]) with the live
// panel's stylesheets, bundle and static markup.
import { type PageContext, webviewPage } from '../../core/views/page/page';

export type LiveHtmlOptions = PageContext;

/** The live panel's static markup (no data: the bundle fills it in). */
const LIVE_BODY = `<header class="toolbar">
  <div class="title"><span id="run-name">No run</span> <span id="run-state" class="state"></span></div>
  <div class="actions">
    <vscode-checkbox id="toggle-device-used" checked hidden title="Show what the driver reports as used on the whole device. Off: the y-axis fits allocated and reserved.">Device used</vscode-checkbox>
    <vscode-button id="btn-empty-cache" appearance="secondary" title="Return cached, unused segments to the driver (torch.cuda.empty_cache())">Empty Cache</vscode-button>
    <vscode-button id="btn-snapshot" appearance="secondary" title="Write a PyTorch snapshot pickle of this moment and open it">Capture Snapshot</vscode-button>
  </div>
</header>
<div id="problems" class="problems" hidden></div>
<div id="empty" class="empty">Run your Python file with <b>GPU Memory: Run Python File with Memory Tracking</b> to see its memory here.</div>
<main id="tracks"></main>`;

export function liveHtmlTemplate(o: LiveHtmlOptions): string {
  return webviewPage({
    ...o,
    title: 'GPU Memory — Live',
    styles: [
      ['dist', 'webview', 'uPlot.min.css'],
      ['media', 'live.css'],
    ],
    script: ['dist', 'webview', 'live.js'],
    body: LIVE_BODY,
  });
}
