// Note [First view] (src/glue/snapshot/panelHost.ts): while a big pickle's model is still being read, the page
// paints the reader's overview (allocated and reserved over the whole run, with the peaks) as its first timeline,
// says full detail is loading, and replaces it in place with the tabs and the full timeline when the model comes.
// The model is held back here until the overview has been painted, so the order is the test's, not a race's.
import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { formatBytes } from '../../src/core/base/units/bytes.ts';
import { openSnapshotPanel } from './snapshot-host.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
process.env.GPUMEM_ADDON ||= path.join(ROOT, 'dist/native/gpumem_addon.node');
const { openModelAsync, openOverviewAsync } = await import('../../src/core/base/model/open.ts');
const FILE = path.join(ROOT, 'test/fixtures/pytorch-snapshots/resnet50-bf16-train-python-stacks.pickle');
const STATE = { tab: 'timeline', device: 0, sitesSort: { key: 'selfBytesAtPeak', descending: true }, compare: { a: 'peak', b: 'end' } };

test('the page paints the overview first, then replaces it with the full timeline', async () => {
  const overview = await openOverviewAsync(FILE, 2048);
  assert.ok(overview, 'the fixture has an overview');
  const d = overview.devices[0];
  let release;
  const gate = new Promise((r) => (release = r));
  const opening = gate.then(() => openModelAsync(FILE));
  const wv = await openSnapshotPanel(opening, { fileName: path.basename(FILE), state: STATE, overview: Promise.resolve(overview), viewport: { width: 1300, height: 900 } });
  try {
    const { page } = wv;
    await page.waitForFunction(() => window.__snapshotPanel?.marks.overviewPainted, null, { timeout: 20_000 });
    // The overview: drawn, with its figures, and the loading line; no tabs and no full timeline yet.
    assert.equal(await page.locator('[data-testid=overview-canvas]').getAttribute('data-painted'), 'overview');
    const figures = await page.locator('[data-testid=overview-figures]').textContent();
    assert.match(figures, new RegExp(`Peak allocated ${formatBytes(d.peakAllocatedBytes)} at \\d+\\.\\d{3} s`));
    assert.match(figures, new RegExp(`peak reserved ${formatBytes(d.peakReservedBytes)}`));
    assert.match(await page.locator('[data-testid=overview-loading]').textContent(), /Overview of 55,681 events on device 0; reading full detail/);
    assert.equal(await page.locator('[data-testid=tab-timeline]').count(), 0);
    // Something was drawn in the plot area (the allocated band's colour, not only the axes' text).
    const inked = await page.evaluate(() => {
      const c = document.querySelector('[data-testid=overview-canvas]');
      const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
      let n = 0;
      for (let i = 3; i < px.length; i += 4) if (px[i] > 0) n++;
      return n / (c.width * c.height);
    });
    assert.ok(inked > 0.05, `the overview covers part of its canvas (${(inked * 100).toFixed(1)} %)`);
    await wv.screenshot('snapshot-first-view-overview');

    release();
    await page.waitForFunction(() => window.__snapshotPanel?.marks.timelinePainted, null, { timeout: 20_000 });
    const marks = await page.evaluate(() => window.__snapshotPanel.marks);
    assert.ok(marks.overviewPainted < marks.timelinePainted, 'the overview came first');
    // Replaced in place: the overview is gone, the tabs and the full timeline are there, on the same range.
    assert.equal(await page.locator('[data-testid=overview]').count(), 0);
    assert.equal(await page.locator('[data-testid=tab-timeline]').count(), 1);
    const info = await page.evaluate(() => window.__snapshotPanel.info);
    assert.deepEqual(info.timeRanges[0], { t0Us: d.rangeT0Us, t1Us: d.rangeT1Us });
    assert.deepEqual(wv.rejected, []);
    await wv.screenshot('snapshot-first-view-full');
  } finally {
    release();
    await wv.close();
    (await opening).close();
  }
});
