// "No anonymous grey": at whole-trace zoom every byte of allocated memory is drawn in its
// owner's colour (Note [No anonymous grey] in webview/snapshot/timelineTab.ts). The real page in Chromium
// over the real native Model of the ResNet-50 training fixture (the largest real snapshot in
// test/fixtures); every expected figure is computed by python3 from the pickle itself.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { formatBytes } from '../../src/core/base/units/bytes.ts';
import { openSnapshotPanel } from './snapshot-host.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const FILE = path.join(ROOT, 'test/fixtures/pytorch-snapshots/resnet50-bf16-train-python-stacks.pickle');
process.env.GPUMEM_ADDON ||= path.join(ROOT, 'dist/native/gpumem_addon.node');
const { openModel } = await import('../../src/core/base/model/open.ts');

// Allocated bytes, and bytes and live allocations per owner line, replayed by python3 from the pickle.
function replay(times) {
  const script = path.join(ROOT, 'test/unit/reference/owners_at.py');
  return JSON.parse(execFileSync('python3', [script, FILE, JSON.stringify(times)], { encoding: 'utf8', maxBuffer: 64 << 20 }));
}

/** Per plot column: the time it shows, what the panel's data says there, and its pixels classified. */
function readColumns(page, columns) {
  return page.evaluate((cols) => {
    const tl = window.__snapshotPanel.timeline;
    const d = tl.data;
    const canvas = document.querySelector('[data-testid=timeline-canvas]');
    const dpr = window.devicePixelRatio || 1;
    const left = Math.round(70 * dpr);
    const top = Math.round(10 * dpr);
    const pw = canvas.width - left - Math.round(12 * dpr);
    const ph = canvas.height - top - Math.round(24 * dpr);
    const img = canvas.getContext('2d').getImageData(left, top, pw, ph).data;
    const G = d.owners.groups;
    return cols.map((frac) => {
      const c = Math.floor(frac * pw);
      const bi = tl.bucketOfColumn(d, pw)(c);
      const t = tl.columnTime(d, pw, c, bi);
      // The area: the opaque run from the plot's bottom (grid lines and markers over empty plot are
      // translucent; the reserved line is above allocated memory).
      let grey = 0;
      let heightPx = 0;
      for (let y = ph - 1; y >= 0; y--, heightPx++) {
        const k = (y * pw + c) * 4;
        if (img[k + 3] !== 255) break;
        const [r, g, b] = [img[k], img[k + 1], img[k + 2]];
        if ((r === 0x80 && g === 0x80 && b === 0x80) || (r === 0x5a && g === 0x5a && b === 0x5a)) grey++;
      }
      return {
        t,
        bucket: bi,
        heightPx,
        grey,
        bytesPerPx: tl.yMax() / ph,
        ownerBytes: d.owners.bytes.slice(bi * G, (bi + 1) * G),
        ownerCounts: d.owners.counts.slice(bi * G, (bi + 1) * G),
        lines: d.owners.lines.map((l) => `${l.file}:${l.line}`),
      };
    });
  }, columns);
}

describe('timeline owners at whole-trace zoom (ResNet-50 training snapshot)', () => {
  let model;
  let wv;
  let peakUs;
  before(async () => {
    model = openModel(FILE);
    peakUs = model.summary().devices[0].peak_at_time_us;
    wv = await openSnapshotPanel(model, { fileName: path.basename(FILE), state: { tab: 'timeline', device: 0 } });
    await wv.page.waitForFunction(() => document.querySelector('[data-testid=timeline-canvas]')?.dataset.painted, null, { timeout: 20_000 });
  });
  after(async () => {
    await wv?.close();
    model?.close();
  });

  test('the coloured area is allocated memory at every sampled column, with no grey', async () => {
    const { page } = wv;
    const fractions = [0.03, 0.15, 0.3, 0.45, 0.6, 0.75, 0.9, 0.97];
    const cols = await readColumns(page, fractions);
    const truth = replay(cols.map((c) => c.t));
    let nonEmpty = 0;
    cols.forEach((c, k) => {
      const where = `column at ${fractions[k]} (t = ${c.t})`;
      const sum = c.ownerBytes.reduce((a, b) => a + b, 0);
      // The owner groups sum to python's allocated bytes at that time, to the byte…
      assert.equal(sum, truth[k].allocated, where);
      // …and so does the painted height, to the pixel (each band boundary rounds to a pixel).
      assert.ok(Math.abs(c.heightPx - Math.round(truth[k].allocated / c.bytesPerPx)) <= 1, `${where}: ${c.heightPx} px painted for ${formatBytes(truth[k].allocated)} (${c.bytesPerPx} B/px)`);
      assert.equal(c.grey, 0, `${where}: grey pixels`);
      if (truth[k].allocated > 0) nonEmpty++;
      // Each named owner's bytes and live allocations are python's for that line.
      c.lines.forEach((line, g) => {
        const want = truth[k].owners[line] ?? { bytes: 0, count: 0 };
        assert.equal(c.ownerBytes[g], want.bytes, `${where}: ${line}`);
        assert.equal(c.ownerCounts[g], want.count, `${where}: ${line} count`);
      });
    });
    assert.ok(nonEmpty >= 6, `only ${nonEmpty} sampled columns hold memory`);
    await wv.screenshot('timeline-owners-whole-trace');
  });

  test("the top owner at the peak is the sites table's first row; hover names it with python's figures, click filters to it", async () => {
    const { page } = wv;
    // The column holding the peak's time.
    const frac = await page.evaluate((peak) => {
      const tl = window.__snapshotPanel.timeline;
      return (peak - tl.v0) / (tl.v1 - tl.v0);
    }, peakUs);
    const [col] = await readColumns(page, [frac]);
    const [truth] = replay([col.t]);
    const top = col.ownerBytes.slice(0, col.lines.length).reduce((best, b, g) => (b > col.ownerBytes[best] ? g : best), 0);
    // The sites table's first row (its default order: bytes at the peak), and its swatch.
    await page.click('[data-testid=tab-sites]');
    const row0 = page.locator('[data-testid=sites-grid] vscode-data-grid-row[data-index="0"]');
    await row0.waitFor({ timeout: 10_000 });
    const siteRow = (await row0.getAttribute('title')).split('\n')[0];
    const swatch = await row0.locator('.swatch').getAttribute('data-swatch');
    await page.click('[data-testid=tab-timeline]');
    await page.waitForTimeout(300);
    assert.equal(col.lines[top], siteRow);
    // Same colour in the table and on the timeline.
    assert.equal(swatch, await page.locator(`[data-testid=timeline-legend] [data-group="${top}"] .swatch`).getAttribute('data-swatch'));
    const pyTop = Object.entries(truth.owners).sort((a, b) => b[1].bytes - a[1].bytes)[0];
    assert.equal(pyTop[0], siteRow, 'python finds the same top line at that moment');

    // Hover a pixel of that owner's aggregate band in that column.
    const target = await page.evaluate(
      ({ frac, top }) => {
        const tl = window.__snapshotPanel.timeline;
        const d = tl.data;
        const canvas = document.querySelector('[data-testid=timeline-canvas]');
        const pw = canvas.width - 82;
        const ph = canvas.height - 34;
        const c = Math.floor(frac * pw);
        const bi = tl.bucketOfColumn(d, pw)(c);
        const r = canvas.getBoundingClientRect();
        for (let y = ph - 1; y >= 0; y--) {
          const hit = tl.hit({ offsetX: 70 + c + 0.5, offsetY: 10 + y + 0.5 });
          if (hit && hit.group === top && hit.bucket === bi) return { x: r.left + 70 + c + 0.5, y: r.top + 10 + y + 0.5 };
        }
        return undefined;
      },
      { frac, top },
    );
    assert.ok(target, "no pixel of the top owner's aggregate band in the peak column");
    await page.mouse.move(target.x, target.y);
    const tip = page.locator('.timeline-wrap .tooltip');
    await tip.waitFor({ state: 'visible', timeout: 5000 });
    const display = await page.evaluate((g) => window.__snapshotPanel.timeline.data.owners.lines[g].displayFile, top);
    assert.equal(await tip.locator('[data-testid=timeline-owner-title]').textContent(), `${display}:${siteRow.split(':').pop()}`);
    const want = truth.owners[siteRow];
    assert.match(await tip.locator('[data-testid=timeline-owner-figures]').textContent(), new RegExp(`^${formatBytes(want.bytes).replace('.', '\\.')} in ${want.count.toLocaleString('en-US')} allocations at `));
    await wv.screenshot('timeline-owners-hover');

    // Click: only that owner is drawn; the refetched bands are all its own, and the column's height is its bytes.
    await page.mouse.click(target.x, target.y);
    await page.waitForFunction((g) => {
      const d = window.__snapshotPanel.timeline.data;
      return d && d.spans.owner.length > 0 && d.spans.owner.every((o) => o === g);
    }, top);
    await page.waitForFunction((g) => document.querySelector(`[data-testid=timeline-legend] [data-group="${g}"]`)?.getAttribute('aria-pressed') === 'true', top);
    await page.waitForTimeout(100);
    const [only] = await readColumns(page, [frac]);
    assert.ok(Math.abs(only.heightPx - Math.round(only.ownerBytes[top] / only.bytesPerPx)) <= 1, `${only.heightPx} px for ${formatBytes(only.ownerBytes[top])}`);
    assert.match(await page.locator('[data-testid=timeline-status]').textContent(), /only /);
    await wv.screenshot('timeline-owners-filtered');
    await page.keyboard.press('Escape');
  });
});
