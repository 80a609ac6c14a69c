// Drives the snapshot webview in Chromium as the extension host would: serves the real page
// (src/core/views/snapshot/page.ts) and bundle, and answers every query the page posts with OpenedCapture over
// a real Model — the same code path as src/glue/snapshot/panelHost.ts minus the editor.
import { snapshotWebviewMessages } from '../../src/core/base/protocol/snapshot.ts';
import { snapshotPageHtml } from '../../src/core/views/snapshot/page.ts';
import { OpenedCapture } from '../../src/core/views/snapshot/openedCapture.ts';
import { openWebview } from './harness/index.mjs';

/**
 * @param {import('../../src/core/base/model/types.ts').Model | Promise<import('../../src/core/base/model/types.ts').Model>} modelOrOpening
 *   a Model, or the promise of one (openModelAsync): then, as src/glue/snapshot/panelHost.ts does since the
 *   open became asynchronous, the page's first message gets `loading` (and the overview, when one was read) even
 *   when the model is already there, and the page is answered once the model is there and prepared.
 * @param {{ fileName: string, state?: unknown, viewport?: {width:number,height:number}, theme?: 'dark'|'light', session?: { handle(m: unknown): unknown[] | undefined } }} o
 *   session: answer with this instead of a OpenedCapture over the model (the ranks view: RankSet, model null);
 *   makeSession(opened): with a promise, the session made of what it resolves to (the ranks view read as the panel
 *   reads it, from the panel's creation: makeSession = (set) => set over RankSet.open's promise)
 * @param {Promise<import('../../src/core/base/model/types.ts').PickleOverview | undefined> | undefined} [o.overview]
 *   Note [First view]: the reader's overview (openOverviewAsync); posted after `loading` while the model is not
 *   there yet, as src/glue/snapshot/panelHost.ts posts it
 * @param {{ view: import('../../src/core/base/protocol/snapshot.ts').RangeChoiceView, open(window?: {fromUs:number,toUs:number}): Promise<import('../../src/core/base/model/types.ts').Model> } | undefined} [o.rangeFirst]
 *   Note [Range-first open]: instead of a model, the overview with a window picker (`chooseRange` after `loading`);
 *   the page's `loadRange` / `loadWhole` opens the model (open(window)) and the session answers from then on, with
 *   the window and the file's time origin, as src/glue/snapshot/panelHost.ts does
 * @param {() => void} [o.onOverviewPainted] Note [Full open after the first paint]: called at the page's
 *   `overviewPainted`, which src/glue/snapshot/panelHost.ts handles itself (the session never sees it)
 */
export async function openSnapshotPanel(modelOrOpening, o) {
  let session;
  const opening = typeof modelOrOpening?.then === 'function' ? modelOrOpening : undefined;
  if (!opening && !o.rangeFirst) session = o.session ?? new OpenedCapture(modelOrOpening, { fileName: o.fileName });
  let overview;
  void o.overview?.then((v) => (overview = v));
  const wv = await openWebview({
    html: (origin) =>
      snapshotPageHtml({ cspSource: origin, nonce: 'test-nonce', resource: (...p) => `${origin}/${p.join('/')}`, title: o.fileName }),
    files: {
      '/dist/webview/snapshot.js': 'dist/webview/snapshot.js',
      '/dist/webview/toolkit.min.js': 'dist/webview/toolkit.min.js',
      '/media/snapshot.css': 'media/snapshot.css',
    },
    state: o.state,
    viewport: o.viewport ?? { width: 1300, height: 900 },
    theme: o.theme ?? 'dark',
    browser: o.browser,
    isolated: o.isolated,
  });
  /** messages for the editor (goToSource, exports…) that the session does not answer */
  const forEditor = [];
  /** why posted messages were dropped (as src/glue/webview/receive.ts logs them) */
  const rejected = [];
  let seen = 0;
  let stopped = false;
  let toldLoading = false;
  let toldOverview = false;
  let toldChoice = false;
  let picked = false;
  let paintedTold = false;
  // The pump: poll what the page posted and answer in order, like webview.onDidReceiveMessage.
  const pump = (async () => {
    while (!stopped) {
      const posted = await wv.page.evaluate(() => window.__posted).catch(() => []);
      if (posted.length > seen && opening && !toldLoading) {
        // As SnapshotPanelHost.openCapture, which runs at the page's first message whether or not the read has
        // finished: `loading`, the overview when one was read (below), then the session, once the model is there and
        // its first answers are prepared on a worker (Note [First answers]), answers the page's messages in order.
        toldLoading = true;
        await wv.send({ type: 'loading', fileName: o.fileName });
        void opening.then(async (model) => {
          const s = o.session ?? o.makeSession?.(model) ?? new OpenedCapture(model, { fileName: o.fileName });
          await s.prepare?.().catch(() => undefined);
          session = s;
        });
      } else if (posted.length > seen && !session && !toldLoading) {
        toldLoading = true; // what SnapshotPanelHost.createSessionFolder posts first
        await wv.send({ type: 'loading', fileName: o.fileName });
      }
      if (toldLoading && !session && overview?.devices.length && !toldOverview) {
        toldOverview = true;
        await wv.send({ type: 'overview', view: { fileName: o.fileName, devices: overview.devices } });
      }
      if (o.rangeFirst && toldLoading && !session && !toldChoice) {
        toldChoice = true;
        await wv.send({ type: 'chooseRange', view: o.rangeFirst.view });
      }
      if (o.rangeFirst && toldChoice && !picked) {
        const pick = posted.map((m) => snapshotWebviewMessages.parse(m)).find((m) => m?.type === 'loadRange' || m?.type === 'loadWhole');
        if (pick) {
          picked = true;
          const window = pick.type === 'loadRange' ? { fromUs: pick.fromUs, toUs: pick.toUs } : undefined;
          const originUs = window ? Math.min(...o.rangeFirst.view.devices.map((d) => d.rangeT0Us)) : undefined;
          await wv.send({ type: 'loading', fileName: o.fileName });
          void o.rangeFirst.open(window).then((model) => (session = new OpenedCapture(model, { fileName: o.fileName, window, originUs })));
        }
      }
      if (!paintedTold && posted.some((m) => m?.type === 'overviewPainted')) {
        paintedTold = true;
        o.onOverviewPainted?.();
      }
      for (; session && seen < posted.length; seen++) {
        if (posted[seen]?.type === 'overviewPainted') continue; // the host's, as in panelHost.onMessage
        // Checked as SnapshotPanelHost checks them (receiveMessages): the session sees only valid messages.
        const checked = snapshotWebviewMessages.check(posted[seen]);
        if (!checked.ok) {
          rejected.push(checked.reason);
          continue;
        }
        const answer = session.handle(checked.message);
        if (answer) for (const m of answer) await wv.send(m);
        else forEditor.push(checked.message);
      }
      await new Promise((r) => setTimeout(r, 10));
    }
  })();
  return {
    ...wv,
    get session() {
      return session;
    },
    forEditor,
    rejected,
    async close() {
      stopped = true;
      await pump;
      await wv.close();
    },
  };
}
