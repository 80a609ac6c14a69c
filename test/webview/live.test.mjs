// The live panel in Chromium (webview harness): the extension's own HTML (strict CSP) and bundle, fed
// the messages the host sends. GIVEN a stream of updates, THEN the figures show the last update's
// numbers in binary units, the charts draw, buttons post actions, and a reloaded panel restores its view.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import { openWebview } from './harness/index.mjs';
import { liveHtmlTemplate } from '../../src/glue/live/template.ts';
import { formatBytes } from '../../src/core/base/units/bytes.ts';
import { liveWebviewMessages } from '../../src/core/base/protocol/live.ts';
import { LiveRun } from '../../src/core/views/live/index.ts';

const MiB = 1024 * 1024;
const FILES = {
  '/dist/webview/live.js': 'dist/webview/live.js',
  '/dist/webview/toolkit.min.js': 'dist/webview/toolkit.min.js',
  '/dist/webview/uPlot.min.css': 'dist/webview/uPlot.min.css',
  '/media/live.css': 'media/live.css',
};
const html = (origin) => liveHtmlTemplate({ cspSource: origin, nonce: 'test-nonce', resource: (...p) => `${origin}/${p.join('/')}` });

/** A live run's view at step k of a run that grows by 8 MiB per step (what LiveRun.view produces). */
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
  for (let k = 0; k < STEPS; k++) await wv.send({ type: 'update', run: viewAt(k) });
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
  assert.equal(await wv.page.locator('#run-state').textContent(), 'running');
  assert.ok((await inkedPixels(wv.page, '100/0')) > 500, 'the chart canvas has drawn lines');
  const renders = Number(await wv.page.evaluate(() => document.body.dataset.updates));
  assert.ok(renders >= 1 && renders < STEPS, `${STEPS} messages were drawn in ${renders} frames`);
  assert.deepEqual((await wv.state()).view, last, 'the last view is kept for a reload');
  await wv.screenshot('live-stream');
  assert.deepEqual(pageErrors(wv), [], 'no page errors (a CSP violation would be one)');
});

test('buttons post actions; busy disables; a finished run disables both', async () => {
  await wv.page.locator('#btn-empty-cache').click();
  assert.deepEqual(await wv.waitForMessage((m) => m.type === 'action'), { type: 'action', action: 'emptyCache' });
  await wv.send({ type: 'busy', action: 'captureSnapshot', busy: true });
  assert.equal(await wv.page.locator('#btn-snapshot').getAttribute('disabled'), '');
  await wv.send({ type: 'busy', action: 'captureSnapshot', busy: false });
  assert.equal(await wv.page.locator('#btn-snapshot').getAttribute('disabled'), null);
  await wv.send({ type: 'update', run: viewAt(3, { running: false }) });
  await wv.page.waitForFunction(() => document.querySelector('#run-state')?.textContent === 'finished');
  assert.equal(await wv.page.locator('#btn-empty-cache').getAttribute('disabled'), '');
  assert.match(await wv.page.locator('.track-label').first().textContent(), /\(exited\)$/);
});

test('a host message outside the contract is dropped with its reason on the console, and draws nothing', async () => {
  await wv.send({ type: 'update', run: viewAt(2) });
  // Rendering runs on the next animation frame: wait for step 2 itself on screen (the previous test left two
  // tracks of step 3, so counting tracks passed before this update drew, and its late draw counted below).
  await wv.page.waitForFunction(() => document.querySelectorAll('.track').length === 2 && document.querySelector('.track')?.getAttribute('data-points') === '3');
  await wv.page.evaluate(() => new Promise((r) => requestAnimationFrame(() => r(undefined))));
  const before = wv.warnings.length;
  await wv.page.evaluate(() => (document.body.dataset.updates = '0'));
  await wv.send({ type: 'update', run: { ...viewAt(4), tracks: 'all of them' } });
  await wv.send({ type: 'busy', action: 'rebootHost', busy: true });
  await wv.send({ type: 'reload', url: 'https://example.com/' });
  await wv.page.waitForFunction((n) => n, true); // one round trip: the listeners above have run
  assert.deepEqual(wv.warnings.slice(before), [
    'GPU Memory Lens: dropped a message: live panel, host → webview: update.run.tracks must be an array, got "all of them"',
    'GPU Memory Lens: dropped a message: live panel, host → webview: busy.action must be one of "emptyCache", "captureSnapshot", got "rebootHost"',
    'GPU Memory Lens: dropped a message: live panel, host → webview: unknown message type "reload" (expected one of update, noRun, busy)',
  ]);
  assert.equal(await wv.page.evaluate(() => document.body.dataset.updates), '0', 'nothing was rendered');
  assert.equal(await wv.page.locator('.track').first().getAttribute('data-points'), '3', 'the last valid update (step 2) is still shown');
  assert.equal(await wv.page.locator('#btn-empty-cache').getAttribute('disabled'), null);
  // every message the page itself posted passes the host's check (src/glue/webview/receive.ts)
  for (const m of await wv.posted()) assert.equal(liveWebviewMessages.check(m).ok, true, JSON.stringify(m));
});

test('ill-formed messages are ignored; noRun clears the tracks', async () => {
  await wv.send({ type: 'update', run: { name: 42 } });
  await wv.send({ type: 'bogus' });
  assert.equal(await wv.page.locator('.track').count(), 2);
  await wv.send({ type: 'noRun' });
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

// ---- the chart's axes, from a real run: the capture our allocator recorded on an H200 ----------------
// (test/fixtures/h200-e2e-train.capture) read by the real reader through LiveRun, as the host does.
// Its device used (1.45 GiB: CUDA context, cuBLAS) dwarfs reserved (144 MiB at the peak): the case the
// Device used checkbox exists for (Note [Device used toggle]).
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
process.env.GPUMEM_ADDON ||= path.join(ROOT, 'dist/native/gpumem_addon.node');
const { openModel } = await import('../../src/core/base/model/open.ts');
const CAPTURE = path.join(ROOT, 'test/fixtures/h200-e2e-train.capture');
// python's own decode of the capture, for the run's length
const durationS = JSON.parse(execFileSync('python3', [path.join(ROOT, 'test/e2e/replay/expected_lines.py'), CAPTURE], { encoding: 'utf8' })).duration_s;

function realView() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpumem-live-webview-'));
  fs.copyFileSync(CAPTURE, path.join(dir, 'capture-531.gpumem'));
  const run = new LiveRun(dir, openModel);
  try {
    run.refresh();
    run.running = false;
    return run.view(600);
  } finally {
    run.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

async function axes(page) {
  return page.evaluate(() => {
    const d = document.querySelector('.track')?.dataset ?? {};
    return { x: JSON.parse(d.xTicks ?? '[]'), y: JSON.parse(d.yTicks ?? '[]'), yMax: Number(d.yMax) };
  });
}

const maxOf = (a) => Math.max(...a.filter((v) => v != null));

test('a real run: the x-axis is seconds since its first event, not dates; Device used off fits y to allocated and reserved', async (t) => {
  const view = realView();
  const [track] = view.tracks;
  assert.equal(view.originS, track.series.t[0], 'one process: the origin is its first event');
  const usedMax = maxOf(track.series.deviceUsed);
  const reservedMax = maxOf(track.series.reserved);
  assert.equal(reservedMax, track.figures.peakReservedBytes, 'the bucket maxima keep the reserved peak');
  assert.ok(usedMax > 8 * reservedMax, `device used ${formatBytes(usedMax)} dwarfs reserved ${formatBytes(reservedMax)}`);

  const w = await openWebview({ html, files: FILES, theme: 'dark' });
  try {
    await w.send({ type: 'update', run: view });
    await w.page.waitForFunction(() => document.querySelector('.track')?.dataset.xTicks);
    const toggle = w.page.locator('#toggle-device-used');
    await toggle.waitFor({ state: 'visible' });
    assert.equal(await toggle.getAttribute('aria-checked'), 'true', 'device used is shown at first');

    // x: "0 s", "1 s", … or "0.0 s", "0.5 s", …: evenly spaced from 0 to the end of the run
    const shown = await axes(w.page);
    t.diagnostic(`x ticks ${JSON.stringify(shown.x)}; y ticks ${JSON.stringify(shown.y)}; y max ${formatBytes(shown.yMax)}`);
    assert.ok(shown.x.length >= 3, `${shown.x.length} x ticks`);
    for (const label of shown.x) assert.match(label, /^\d+(\.\d+)? s$/, 'seconds, no calendar date or clock time');
    const xs = shown.x.map((l) => Number(l.slice(0, -2)));
    assert.equal(xs[0], 0, 'the axis starts at the run\'s first event');
    const stepS = xs[1] - xs[0];
    for (let i = 1; i < xs.length; i++) assert.ok(Math.abs(xs[i] - xs[i - 1] - stepS) < 1e-9, `evenly spaced: ${shown.x}`);
    assert.ok(xs.at(-1) <= durationS + 1e-6 && xs.at(-1) + stepS > durationS - 0.05, `the ticks reach the run's end (${durationS.toFixed(3)} s by python)`);

    // y with device used: from 0 to the highest series (+5% headroom), in GiB
    assert.ok(Math.abs(shown.yMax - usedMax * 1.05) <= 1, `y max ${shown.yMax} = 1.05 × device used ${usedMax}`);
    assert.ok(shown.y.some((l) => l.endsWith('GiB')), `GiB ticks with device used: ${shown.y}`);

    // Device used off: y fits allocated and reserved; the choice is kept for a reload
    await toggle.click();
    await w.page.waitForFunction((m) => Number(document.querySelector('.track').dataset.yMax) < m, usedMax);
    const hidden = await axes(w.page);
    t.diagnostic(`without device used: y ticks ${JSON.stringify(hidden.y)}; y max ${formatBytes(hidden.yMax)}`);
    assert.ok(Math.abs(hidden.yMax - reservedMax * 1.05) <= 1, `y max ${hidden.yMax} = 1.05 × reserved peak ${reservedMax}`);
    assert.ok(hidden.y.length >= 3 && hidden.y.every((l) => /^\d+(\.\d+)? (B|MiB)$/.test(l)), `MiB ticks: ${hidden.y}`);
    assert.equal(hidden.y.at(-1), formatBytes(Number(hidden.y.at(-1).split(' ')[0]) * MiB), 'ticks are whole binary units');
    assert.deepEqual(hidden.x, shown.x, 'the time axis is unchanged');
    assert.equal((await w.state()).showDeviceUsed, false);
    assert.deepEqual((await w.state()).view, view);
    await w.screenshot('live-real-device-used-off');

    // The cursor's time in the legend is elapsed too.
    const box = await w.page.locator('.track .u-over').boundingBox();
    await w.page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
    const legendX = (await w.page.locator('.track .u-legend .u-series').first().locator('.u-value').textContent()).trim();
    assert.match(legendX, /^\d\.\d{3} s$/);
    assert.ok(Math.abs(Number(legendX.slice(0, -2)) - durationS / 2) < durationS * 0.1, `mid-chart is about half the run: ${legendX}`);

    // The legend's own toggle is the same choice: clicking "device used" there shows it again.
    await w.page.locator('.track .u-legend .u-series', { hasText: 'device used' }).first().locator('.u-label').click();
    await w.page.waitForFunction((m) => Number(document.querySelector('.track').dataset.yMax) > m, usedMax);
    await w.page.waitForFunction(() => document.querySelector('#toggle-device-used').getAttribute('aria-checked') === 'true', null, { timeout: 5000 });
    assert.equal((await w.state()).showDeviceUsed, true);
    assert.deepEqual(pageErrors(w), []);
  } finally {
    await w.close();
  }

  // A reloaded panel comes back with device used hidden when that was the choice.
  const again = await openWebview({ html, files: FILES, state: { view, showDeviceUsed: false }, theme: 'light' });
  try {
    await again.page.waitForFunction(() => document.querySelector('.track')?.dataset.yMax);
    const restored = await axes(again.page);
    assert.ok(Math.abs(restored.yMax - reservedMax * 1.05) <= 1, `restored y max ${restored.yMax}`);
    await again.page.locator('#toggle-device-used').waitFor({ state: 'visible' });
    assert.equal(await again.page.locator('#toggle-device-used').getAttribute('aria-checked'), 'false');
    assert.deepEqual(pageErrors(again), []);
  } finally {
    await again.close();
  }
});

test('a run without device samples has no Device used checkbox; its x-axis starts at 0 s', async () => {
  const v = viewAt(30, { ranks: 1 });
  for (const tr of v.tracks) {
    delete tr.figures.deviceUsedBytes;
    delete tr.figures.unattributedBytes;
    tr.series.deviceUsed = tr.series.t.map(() => null);
  }
  await wv.send({ type: 'update', run: v });
  await wv.page.waitForFunction(() => document.querySelectorAll('.track').length === 1 && document.querySelector('.track').dataset.points === '31');
  assert.equal(await wv.page.locator('#toggle-device-used').isVisible(), false);
  const a = await axes(wv.page);
  assert.match(a.x[0], /^0\.0+ s$/); // 3 s in 0.1 s points (viewAt): sub-second ticks
  assert.match(a.x.at(-1), /^[23]\.\d+ s$/);
});
