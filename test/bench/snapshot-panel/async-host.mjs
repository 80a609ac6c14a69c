// The snapshot page driven as src/glue/snapshot/panelHost.ts drives it since the open became asynchronous:
// the model is read on the reader's worker thread (openModelAsync) while the page loads; the page's first
// message gets `loading` until the model is there, then every query is answered by SnapshotSession.
// (test/webview/snapshot-host.mjs is the same pump over a model that is already open.)
import { snapshotPageHtml } from '../../../src/core/snapshot/page.ts';
import { SnapshotSession } from '../../../src/core/snapshot/session.ts';
import { openWebview } from '../../webview/harness/index.mjs';

/**
 * @param {Promise<import('../../../src/core/model/types.ts').Model>} modelPromise
 * @param {{ fileName: string, state?: unknown, viewport?: {width:number,height:number} }} o
 */
export async function openSnapshotPanelAsync(modelPromise, o) {
  let session;
  void modelPromise.then((m) => (session = new SnapshotSession(m, { fileName: o.fileName })));
  const wv = await openWebview({
    html: (origin) =>
      snapshotPageHtml({
        cspSource: origin,
        nonce: 'test-nonce',
        cssUri: `${origin}/snapshot.css`,
        toolkitUri: `${origin}/toolkit.min.js`,
        scriptUri: `${origin}/snapshot.js`,
        title: o.fileName,
      }),
    files: { '/snapshot.js': 'dist/webview/snapshot.js', '/toolkit.min.js': 'dist/webview/toolkit.min.js', '/snapshot.css': 'media/snapshot.css' },
    state: o.state,
    viewport: o.viewport ?? { width: 1300, height: 900 },
    theme: 'dark',
  });
  let seen = 0;
  let stopped = false;
  let toldLoading = false;
  const pump = (async () => {
    while (!stopped) {
      const posted = await wv.page.evaluate(() => window.__posted).catch(() => []);
      if (posted.length > seen && !session && !toldLoading) {
        toldLoading = true; // what SnapshotPanelHost.createSession posts first
        await wv.send({ type: 'loading', fileName: o.fileName });
      }
      if (session) {
        for (; seen < posted.length; seen++) {
          const answer = session.handle(posted[seen]);
          if (answer) for (const m of answer) await wv.send(m);
        }
      }
      await new Promise((r) => setTimeout(r, 10));
    }
  })();
  return {
    ...wv,
    async close() {
      stopped = true;
      await pump;
      await wv.close();
    },
  };
}
