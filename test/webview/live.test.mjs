// The live panel in Chromium (webview harness): the extension's own HTML (strict CSP) and bundle, fed
// the messages the host sends. GIVEN a stream of updates, THEN the figures show the last update's
// numbers in binary units, the charts draw, buttons post actions, and a reloaded panel restores its view.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { openWebview } from './harness/index.mjs';
import { liveHtmlTemplate } from '../../src/glue/live/template.ts';
import { formatBytes } from '../../src/core/format/bytes.ts';

const MiB = 1024 * 1024;
const FILES = {
  '/dist/webview/live.js': 'dist/webview/live.js',
  '/dist/webview/toolkit.min.js': 'dist/webview/toolkit.min.js',
  '/dist/webview/uPlot.min.css': 'dist/webview/uPlot.min.css',
  '/media/live.css': 'media/live.css',
};
const html = (origin) => liveHtmlTemplate({ cspSource: origin, nonce: 'test-nonce', resource: (...p) => `${origin}/${p.join('/')}` });

/** A session view at step k of a run that grows by 8 MiB per step (what LiveSession.view produces). */
function viewAt(k, { running = true, ranks = 2 } = {}) {
  const tracks = [];
  for (let rank = 0; rank < ranks; rank++) {
    const n = k + 1;
    const t = Array.from({ length: n }, (_, i) => 1_795_000_000 + i * 0.1);
    const allocated = t.map((_, i) => (i + 1) * 8 * MiB + rank * MiB);
    const reserved = allocated.map((a) => a + 32 * MiB);
    const deviceUsed = reserved.map((r) => r + 520 * MiB);
    tracks.push({
      key: `${100 + rank}/0`,
      label: `rank ${rank} · cuda:0 NVIDIA H200 · pid ${100 + rank}`,
      pid: 100 + rank,
      rank,
      device: 0,
      running,
      figures: {
        allocatedBytes: allocated[n - 1],
        reservedBytes: reserved[n - 1],
        peakAllocatedBytes: allocated[n - 1],
        peakReservedBytes: reserved[n - 1],
        deviceUsedBytes: deviceUsed[n - 1],
        deviceTotalBytes: 140 * 1024 * MiB,
        unattributedBytes: deviceUsed[n - 1] - reserved[n - 1],
      },
      series: { t, allocated, reserved, deviceUsed },
      markers: k >= 5 ? [{ t: t[5], kind: 'empty_cache', label: 'empty_cache' }] : [],
    });
  }
  return { name: '20261121-230000-train', running, tracks, problems: [] };
}

async function figures(page, key) {
  return page.evaluate((k) => {
    const root = document.querySelector(`.track[data-key="${k}"]`);
    if (!root) return null;
    return Object.fromEntries([...root.querySelectorAll('.figure')].map((f) => [f.dataset.figure, { text: f.querySelector('.figure-value').textContent, bytes: Number(f.dataset.bytes), label: f.querySelector('.figure-label').textContent }]));
  }, key);
}

/** Non-transparent pixels in the chart canvas: the lines were drawn. */
async function inkedPixels(page, key) {
  return page.evaluate((k) => {
    const c = document.querySelector(`.track[data-key="${k}"] canvas`);
    if (!c) return -1;
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++;
    return n;
  }, key);
}

// Chromium asks every page for /favicon.ico, which the harness does not serve; that 404 is the only
// console error allowed (our own files are checked by what they do: styles, script, toolkit buttons).
const pageErrors = (w) => w.errors.filter((e) => !/^Failed to load resource: the server responded with a status of 404/.test(e));

let wv;
before(async () => {
  wv = await openWebview({ html, files: FILES, theme: 'dark' });
});
after(() => wv?.close());

test('the panel announces its chart width and shows the empty state first', async () => {
  const ready = await wv.waitForMessage((m) => m.type === 'ready');
  assert.ok(ready.widthPx >= 200 && ready.widthPx <= 1200, `width ${ready.widthPx}`);
  assert.equal(await wv.page.locator('#empty').isVisible(), true);
});

test('a stream of updates: figures equal the last update, charts drawn, frames coalesced', async () => {
  const STEPS = 60;
  await wv.page.evaluate(() => (document.body.dataset.updates = '0'));
  for (let k = 0; k < STEPS; k++) await wv.send({ type: 'update', session: viewAt(k) });
  const last = viewAt(STEPS - 1);
  await wv.page.waitForFunction((n) => document.querySelector('.track[data-key="100/0"]')?.dataset.points === String(n), STEPS);
  for (const track of last.tracks) {
    const f = await figures(wv.page, track.key);
    assert.equal(f.allocated.text, formatBytes(track.figures.allocatedBytes));
    assert.equal(f.allocated.bytes, track.figures.allocatedBytes);
    assert.equal(f.reserved.text, formatBytes(track.figures.reservedBytes));
    assert.equal(f['device-used'].text, formatBytes(track.figures.deviceUsedBytes));
    assert.equal(f.unattributed.text, '520 MiB'); // device used − reserved, by construction above
    assert.equal(f.unattributed.label, 'Not from the allocator');
    assert.equal(f['peak-reserved'].bytes, track.figures.peakReservedBytes);
  }
  assert.equal(await wv.page.locator('.track').count(), 2);
  assert.equal(await wv.page.locator('.track-label').first().textContent(), 'rank 0 · cuda:0 NVIDIA H200 · pid 100');
  assert.equal(await wv.page.locator('#session-state').textContent(), 'running');
  assert.ok((await inkedPixels(wv.page, '100/0')) > 500, 'the chart canvas has drawn lines');
  const renders = Number(await wv.page.evaluate(() => document.body.dataset.updates));
  assert.ok(renders >= 1 && renders < STEPS, `${STEPS} messages were drawn in ${renders} frames`);
  assert.deepEqual((await wv.state()).view, last, 'the last view is kept for a reload');
  await wv.screenshot('live-stream');
  assert.deepEqual(pageErrors(wv), [], 'no page errors (a CSP violation would be one)');
});

test('buttons post actions; busy disables; a finished session disables both', async () => {
  await wv.page.locator('#btn-empty-cache').click();
  assert.deepEqual(await wv.waitForMessage((m) => m.type === 'action'), { type: 'action', action: 'emptyCache' });
  await wv.send({ type: 'busy', action: 'captureSnapshot', busy: true });
  assert.equal(await wv.page.locator('#btn-snapshot').getAttribute('disabled'), '');
  await wv.send({ type: 'busy', action: 'captureSnapshot', busy: false });
  assert.equal(await wv.page.locator('#btn-snapshot').getAttribute('disabled'), null);
  await wv.send({ type: 'update', session: viewAt(3, { running: false }) });
  await wv.page.waitForFunction(() => document.querySelector('#session-state')?.textContent === 'finished');
  assert.equal(await wv.page.locator('#btn-empty-cache').getAttribute('disabled'), '');
  assert.match(await wv.page.locator('.track-label').first().textContent(), /\(exited\)$/);
});

test('ill-formed messages are ignored; noSession clears the tracks', async () => {
  await wv.send({ type: 'update', session: { name: 42 } });
  await wv.send({ type: 'bogus' });
  assert.equal(await wv.page.locator('.track').count(), 2);
  await wv.send({ type: 'noSession' });
  await wv.page.waitForFunction(() => document.querySelectorAll('.track').length === 0);
  assert.equal(await wv.page.locator('#empty').isVisible(), true);
  assert.deepEqual(pageErrors(wv), []);
});

test('a reloaded panel draws its saved view before the host says anything', async () => {
  const saved = viewAt(9, { ranks: 1 });
  const again = await openWebview({ html, files: FILES, state: { view: saved }, theme: 'light' });
  try {
    await again.page.waitForFunction(() => document.querySelectorAll('.track').length === 1);
    const f = await figures(again.page, '100/0');
    assert.equal(f.allocated.text, formatBytes(saved.tracks[0].figures.allocatedBytes)); // 80.0 MiB
    assert.equal(f.allocated.text, '80.0 MiB');
    assert.ok((await inkedPixels(again.page, '100/0')) > 500);
    await again.screenshot('live-restored-light');
    assert.deepEqual(pageErrors(again), []);
  } finally {
    await again.close();
  }
});
