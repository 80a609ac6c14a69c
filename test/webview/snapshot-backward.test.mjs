// Backward in the snapshot panel (Note [Sites by forward line] in src/core/base/protocol/snapshot.ts): the Top sites
// tab's backward column and its toggle between the forward line and the backward() caller's line, in Chromium, fed by
// OpenedCapture over the real native Model of a GPU training capture. Every expected row is the model's own
// lineStats for that grouping.
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { formatBytes } from '../../src/core/base/units/bytes.ts';
import { openSnapshotPanel } from './snapshot-host.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
process.env.GPUMEM_ADDON ||= path.join(ROOT, 'dist/native/gpumem_addon.node');
const { openModel } = await import('../../src/core/base/model/open.ts');

/** A training run recorded on an H200 (the walkthrough's sample script) whose backward() allocated. */
const FILE = path.join(ROOT, 'test/fixtures/h200-e2e-train.capture');
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
