// The snapshot webview's HTML: the shared page builder (src/core/views/page/page.ts, Note [Webview CSP]) with
// the snapshot panel's stylesheet, bundle and mount point. Pure, so the extension and the Chromium tests
// serve the same page.
import { escapeHtml } from '../../base/protocol/escape';
import { type PageContext, webviewPage } from '../page/page';

export interface SnapshotPageOptions extends PageContext {
  /** the file's name: the page title and the header */
  title: string;
}

export function snapshotPageHtml(o: SnapshotPageOptions): string {
  return webviewPage({
    ...o,
    styles: [['media', 'snapshot.css']],
    script: ['dist', 'webview', 'snapshot.js'],
    body: `<div id="app" data-title="${escapeHtml(o.title)}"></div>`,
  });
}
