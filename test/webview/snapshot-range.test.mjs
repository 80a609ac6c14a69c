// Note [Range-first open] (native/addon/src/range_open.cpp, src/glue/snapshot/panelHost.ts): a pickle opened by
// range shows its overview with a window picker and reads nothing more until the user picks. The user drags across
// the overview, clicks "Load this range", and the panel then holds that window only: its summary figures and the
// timeline it draws must equal what a full open of the same file answers for the same window.
import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { formatBytes } from '../../src/core/base/units/bytes.ts';
import { OpenedCapture } from '../../src/core/views/snapshot/openedCapture.ts';
import { openSnapshotPanel } from './snapshot-host.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
process.env.GPUMEM_ADDON ||= path.join(ROOT, 'dist/native/gpumem_addon.node');
const { openModel, openModelAsync, openOverviewAsync } = await import('../../src/core/base/model/open.ts');
const FILE = path.join(ROOT, 'test/fixtures/pytorch-snapshots/resnet50-bf16-train-python-stacks.pickle');
const STATE = { tab: 'summary', device: 0, sitesSort: { key: 'selfBytesAtPeak', descending: true }, compare: { a: 'peak', b: 'end' } };

test('range-first: select a window on the overview, load only it; its figures equal the full open there', async () => {
  const overview = await openOverviewAsync(FILE, 2048);
  assert.ok(overview?.devices.length, 'the fixture has an overview');
  const d = overview.devices[0];
  const opens = [];
  const wv = await openSnapshotPanel(undefined, {
    fileName: path.basename(FILE),
    state: STATE,
    viewport: { width: 1300, height: 900 },
    rangeFirst: {
      view: { fileName: path.basename(FILE), devices: overview.devices, fileBytes: 5 * 2 ** 20, bySize: false },
      open: (window) => {
        opens.push(window);
        return openModelAsync(FILE, false, window);
      },
    },
  });
  const full = openModel(FILE);
  try {
    const { page } = wv;
    await page.waitForFunction(() => window.__snapshotPanel?.marks.rangeChoicePainted, null, { timeout: 20_000 });
    // The picker: the overview, why, and nothing read yet; the whole run is not a range to load.
    assert.match(await page.locator('[data-testid=range-why]').textContent(), /opens by range, as asked\. Drag across the overview of its 55,681 events on device 0/);
    assert.equal(await page.locator('[data-testid=overview-canvas]').getAttribute('data-painted'), 'overview');
    assert.equal(await page.locator('[data-testid=load-range]').getAttribute('disabled'), '', 'nothing selected yet');
    assert.equal(await page.locator('[data-testid=tab-timeline]').count(), 0);
    assert.deepEqual(opens, [], 'no model is read before the user picks');

    // Drag across the plot from 30 % to 62 % of its width (real input events).
    const box = await page.locator('[data-testid=overview-canvas]').boundingBox();
    const plotLeft = box.x + 72;
    const plotW = box.width - 72 - 12;
    await page.mouse.move(plotLeft + 0.3 * plotW, box.y + box.height / 2);
    await page.mouse.down();
    for (let k = 1; k <= 10; k++) await page.mouse.move(plotLeft + (0.3 + (0.32 * k) / 10) * plotW, box.y + box.height / 2);
    await page.mouse.up();
    const fromS = Number(await page.locator('[data-testid=range-from]').inputValue());
    const toS = Number(await page.locator('[data-testid=range-to]').inputValue());
    const spanS = (d.rangeT1Us - d.rangeT0Us) / 1e6;
    assert.ok(Math.abs(fromS - 0.3 * spanS) < 0.01 * spanS && Math.abs(toS - 0.62 * spanS) < 0.01 * spanS, `the drag selected ${fromS}–${toS} s of ${spanS} s`);
    assert.equal(await page.locator('[data-testid=range-shade]').isVisible(), true, 'the selection is shaded');
    assert.match(await page.locator('[data-testid=range-status]').textContent(), /^3[12]\.\d % of the run$/);
    await wv.screenshot('snapshot-range-choice');

    await page.locator('[data-testid=load-range]').click();
    await page.waitForFunction(() => window.__snapshotPanel?.marks.summary, null, { timeout: 20_000 });
    // The host was asked for exactly the typed window, in the model's µs.
    const origin = d.rangeT0Us;
    const w = { fromUs: Math.floor(origin + fromS * 1e6), toUs: Math.ceil(origin + toS * 1e6) };
    assert.deepEqual(opens, [w], 'one open, of the chosen window');
    const info = await page.evaluate(() => window.__snapshotPanel.info);
    assert.deepEqual(info.window, w);
    assert.equal(info.originUs, origin, 'times read as in the full open (seconds since the file’s first event)');
    assert.match(await page.locator('[data-testid=opened-window]').textContent(), new RegExp(`range ${fromS.toFixed(3)}–${toS.toFixed(3)} s`));
    const part = wv.session.model;
    const eventsOf = (m) => m.summary().devices.find((x) => x.device === 0).events;
    assert.ok(eventsOf(part) < 0.5 * eventsOf(full), `only the window is held (${eventsOf(part)} of ${eventsOf(full)} events)`);

    // The summary the page shows: the window's peak and its end figures, as the full open has them there.
    const fullSession = new OpenedCapture(full, { fileName: path.basename(FILE) });
    const fullTl = full.timeline(0, w.fromUs, w.toUs, 512);
    const atEnd = fullSession.segments(1, 0, w.toUs);
    const summary = await page.evaluate(() => window.__snapshotPanel.summary);
    assert.equal(summary.peakAllocatedBytes, Math.max(...fullTl.allocatedMax), 'peak allocated in the window');
    assert.equal(summary.peakReservedBytes, Math.max(...fullTl.reservedMax), 'peak reserved in the window');
    assert.equal(summary.allocatedBytes, atEnd.breakdown.allocatedBytes, 'allocated at the window’s end');
    assert.equal(summary.reservedBytes, atEnd.breakdown.reservedBytes, 'reserved at the window’s end');
    assert.match(await page.locator('body').textContent(), new RegExp(formatBytes(summary.peakAllocatedBytes).replace('.', '\\.')));

    assert.match(await page.locator('body').textContent(), /At the end of the range.*Over the range/s, 'the summary says its figures are the range’s');

    // The timeline the page draws: the answer to its own request equals the full open's answer to the same request.
    await page.locator('[data-testid=tab-timeline]').click();
    await page.waitForFunction(() => window.__snapshotPanel?.marks.timelinePainted, null, { timeout: 20_000 });
    const drawn = await page.evaluate(() => window.__snapshotPanel.timeline.data);
    assert.ok(drawn.t0Us >= w.fromUs && drawn.t1Us <= w.toUs + 1, `the timeline shows the window (${drawn.t0Us}–${drawn.t1Us})`);
    const want = fullSession.timeline(drawn.requestId, 0, drawn.t0Us, drawn.t1Us, drawn.buckets, 3000);
    for (const k of ['allocatedMin', 'allocatedMax', 'reservedMax']) assert.deepEqual(drawn[k], want[k], `timeline ${k}`);
    // The page's segment map at a moment inside the window: the allocator state of the full open there.
    const mid = Math.round((w.fromUs + w.toUs) / 2);
    const seg = (s) => JSON.parse(JSON.stringify(s.segments(1, 0, mid), (k, v) => (k === 'stackId' ? undefined : v)));
    assert.deepEqual(seg(wv.session), seg(fullSession), 'segments and blocks mid-window');
    assert.deepEqual(wv.rejected, []);
    await wv.screenshot('snapshot-range-loaded');
  } finally {
    await wv.close();
    wv.session?.model.close();
    full.close();
  }
});

test('range-first: "Load everything" reads the whole file and shows no window', async () => {
  const overview = await openOverviewAsync(FILE, 2048);
  const opens = [];
  const wv = await openSnapshotPanel(undefined, {
    fileName: path.basename(FILE),
    state: STATE,
    rangeFirst: {
      view: { fileName: path.basename(FILE), devices: overview.devices, fileBytes: 3 * 2 ** 30, bySize: true },
      open: (window) => {
        opens.push(window);
        return openModelAsync(FILE, false, window);
      },
    },
  });
  try {
    const { page } = wv;
    await page.waitForFunction(() => window.__snapshotPanel?.marks.rangeChoicePainted, null, { timeout: 20_000 });
    assert.match(await page.locator('[data-testid=range-why]').textContent(), /is 3\.00 GiB: read whole it would hold about that much memory\./);
    await page.locator('[data-testid=load-whole]').click();
    await page.waitForFunction(() => window.__snapshotPanel?.marks.summary, null, { timeout: 20_000 });
    assert.deepEqual(opens, [undefined]);
    assert.equal(await page.evaluate(() => window.__snapshotPanel.info.window), undefined);
    assert.equal(await page.locator('[data-testid=opened-window]').count(), 0);
  } finally {
    await wv.close();
    wv.session?.model.close();
  }
});
