// Backward in the snapshot panel (Note [Sites by forward line] in src/core/base/protocol/snapshot.ts): the Top sites
// tab's backward column and its toggle between the forward line and the backward() caller's line, in Chromium, fed by
// OpenedCapture over the real native Model of a GPU training capture. Every expected row is the model's own
// lineStats for that grouping.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { formatBytes } from '../../src/core/base/units/bytes.ts';
import { openSnapshotPanel } from './snapshot-host.mjs';
import { OpenedCapture } from '../../src/core/views/snapshot/openedCapture.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
process.env.GPUMEM_ADDON ||= path.join(ROOT, 'dist/native/gpumem_addon.node');
const { openModel } = await import('../../src/core/base/model/open.ts');

/** The GPU capture of a training step whose backward is linked to its forward lines (test/fixtures/backward-*.capture). */
const FILE = path.join(ROOT, 'test/fixtures', fs.readdirSync(path.join(ROOT, 'test/fixtures')).filter((f) => /^backward-.*\.capture$/.test(f)).sort()[0] ?? 'backward-missing.capture');
const STATE = { tab: 'sites', device: 0, sitesSort: { key: 'selfBytesAtPeak', descending: true }, compare: { a: 'peak', b: 'end' } };

/** The grid's rows as the page shows them: [line, self, backward] cells, in order. */
async function shownRows(page) {
  const rows = page.locator('[data-testid=sites-grid] vscode-data-grid-row[data-index]');
  const out = [];
  for (let i = 0; i < (await rows.count()); i++) out.push((await rows.nth(i).locator('vscode-data-grid-cell').allTextContents()).map((s) => s.trim()).slice(0, 3));
  return out;
}

/** The rows the page must show for a grouping: the model's lines, largest self bytes first. */
function expectedRows(model, options) {
  return model
    .lineStats(0, options)
    .slice(0, 500)
    .map((s) => [`${s.file}:${s.line}`, formatBytes(s.selfBytesAtPeak), s.backwardBytesAtPeak > 0 ? formatBytes(s.backwardBytesAtPeak) : '—']);
}

describe('Top sites: backward by forward line, or on the backward() line', () => {
  let model;
  let wv;
  before(async () => {
    model = openModel(FILE);
    wv = await openSnapshotPanel(model, { fileName: path.basename(FILE), state: STATE });
    await wv.page.locator('[data-testid=sites-grid] vscode-data-grid-row[data-index="0"]').waitFor({ timeout: 20_000 });
  });
  after(async () => {
    await wv?.close();
    model?.close();
  });

  test('by default the rows are the forward grouping, with a backward column', async () => {
    const { page } = wv;
    assert.ok(model.lineStats(0).some((s) => s.backwardBytesAtPeak > 0), 'the capture has bytes made during backward at its peak');
    assert.equal((await page.locator('[data-testid=sites-grid] [data-key=backwardBytesAtPeak]').textContent()).trim().replace(/ [▲▼]$/, ''), 'Of it, backward');
    assert.deepEqual(await shownRows(page), expectedRows(model));
    assert.equal(await page.locator('[data-testid=sites-backward]').evaluate((el) => el.value), 'forward');
    await wv.screenshot('snapshot-sites-backward-forward');
  });

  test('the toggle asks for the backward() caller\'s grouping, shows it and keeps it in the state', async () => {
    const { page } = wv;
    await page.click('[data-testid=sites-backward]');
    await page.click('[data-testid=sites-backward] vscode-option[value=caller]');
    await wv.waitForMessage((m) => m.type === 'requestSites' && m.backwardGrouping === 'caller');
    await page.waitForFunction(() => window.__state?.sitesBackward === 'caller');
    const want = expectedRows(model, { backwardOnCaller: true });
    assert.notDeepEqual(want, expectedRows(model), 'the two groupings differ on this capture');
    const deadline = Date.now() + 10_000;
    let rows = await shownRows(page);
    while (JSON.stringify(rows) !== JSON.stringify(want) && Date.now() < deadline) {
      await page.waitForTimeout(50);
      rows = await shownRows(page);
    }
    assert.deepEqual(rows, want);
    assert.match(await page.locator('.view-sites p.muted').first().textContent(), /Backward: bytes made during the backward\(\) this line called, included in Self\./);
    await wv.screenshot('snapshot-sites-backward-caller');
  });
});

test('a panel restored on the caller grouping asks for it and never draws the other', async () => {
  const model = openModel(FILE);
  const wv = await openSnapshotPanel(model, { fileName: path.basename(FILE), state: { ...STATE, sitesBackward: 'caller' } });
  try {
    await wv.waitForMessage((m) => m.type === 'requestSites' && m.backwardGrouping === 'caller', { timeout: 20_000 });
    await wv.page.locator('[data-testid=sites-grid] vscode-data-grid-row[data-index="0"]').waitFor({ timeout: 20_000 });
    assert.deepEqual(await shownRows(wv.page), expectedRows(model, { backwardOnCaller: true }));
    assert.equal(await wv.page.locator('[data-testid=sites-backward]').evaluate((el) => el.value), 'caller');
  } finally {
    await wv.close();
    model.close();
  }
});


describe('a block made by a forward op\'s backward', () => {
  let model;
  let wv;
  let peak;
  before(async () => {
    model = openModel(FILE);
    peak = model.backwardPeak(0);
    // the segment map at the backward peak, where the linked blocks are live
    wv = await openSnapshotPanel(model, { fileName: path.basename(FILE), state: { ...STATE, tab: 'segments', momentUs: peak.timeUs } });
    await wv.page.locator('[data-testid=segment-count]').waitFor({ timeout: 20_000 });
  });
  after(async () => {
    await wv?.close();
    model?.close();
  });

  test('its stack opens with "backward of <forward line>", the node and the module, and says the recorder\'s frames as words', async () => {
    const { page } = wv;
    const view = new OpenedCapture(model, { fileName: 'x' }).segments(1, 0, peak.timeUs);
    // the page's rows: largest segment first (segmentsTab.ts); the largest linked block among them
    const rows = [...view.segments].sort((a, b) => b.totalSize - a.totalSize || a.address - b.address);
    let best;
    rows.forEach((seg, row) => {
      for (const b of seg.blocks) {
        const st = b.state === 'active_allocated' && b.stackId > 0 ? model.stack(b.stackId) : undefined;
        if (st?.backwardOf && (!best || b.size / seg.totalSize > best.share)) best = { row, seg, b, st, share: b.size / seg.totalSize };
      }
    });
    assert.ok(best, 'a linked block is live at the backward peak');
    const scroller = page.locator('.segments-scroller');
    await scroller.evaluate((el, row) => (el.scrollTop = row * 22), best.row);
    const box = await scroller.boundingBox();
    const { clientWidth, scrollTop } = await scroller.evaluate((el) => ({ clientWidth: el.clientWidth, scrollTop: el.scrollTop }));
    const barW = Math.max(10, clientWidth - 210 - 8);
    const x = box.x + 210 + ((best.b.offset + best.b.size / 2) / best.seg.totalSize) * barW;
    const y = box.y + best.row * 22 - scrollTop + 11;
    await page.mouse.move(x, y);
    const stack = page.locator('.segments-wrap .tooltip pre.stack');
    await page.waitForFunction(() => /backward of|allocated during/.test(document.querySelector('.segments-wrap .tooltip pre.stack')?.textContent ?? ''), null, { timeout: 5000 });
    const lines = (await stack.textContent()).split('\n');
    const b = best.st.backwardOf;
    const site = b.line ?? b.op;
    const parts = site.file.split(/[\\/]/);
    const shown = parts.length > 3 ? `…/${parts.slice(-3).join('/')}` : site.file;
    assert.equal(lines[0], [`backward of ${shown}:${site.line}`, b.node, b.module, b.recomputed ? 'recomputed' : ''].filter(Boolean).join(' · '));
    assert.ok(lines.includes(`  autograd node ${b.node}, run by the backward() called from:`) || best.st.frames.findIndex((f) => f.file === '<backward>') >= 12, lines.join('\n'));
    assert.ok(!lines.some((l) => /— <(backward|module)>:/.test(l)), 'no pseudo-file is shown as a path');
    await wv.screenshot('snapshot-segments-backward-of');
  });
});
