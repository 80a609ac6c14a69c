// The snapshot panel's "What to do" tab in Chromium, over real captures: a training loop the lens
// allocator wrote on the simulated device with a repeated block and a leak (test/unit/reference/sim_training.py),
// and a PyTorch pickle with nothing to advise. Every figure shown is the advice computed on the same model;
// the host's showTab (the OOM notification's "Open Advice") opens the tab and computes it.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { formatBytes } from '../../src/core/base/units/bytes.ts';
import { parseSnapshotWebviewMessage } from '../../src/core/base/protocol/snapshot.ts';
import { openSnapshotPanel } from './snapshot-host.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
process.env.GPUMEM_ADDON ||= path.join(ROOT, 'dist/native/gpumem_addon.node');
const { openModel, simTraining, needsAllocator, fixturesDir } = await import('../unit/reader-support.mjs');
const { advise } = await import('../../src/core/analyses/advice/index.ts');

describe('What to do: a training capture with a repeated block and a leak', { skip: needsAllocator }, () => {
  let model;
  let wv;
  let expected;
  before(async () => {
    fs.mkdirSync(path.join(ROOT, '.test-output/webview/advice'), { recursive: true });
    const { cap } = simTraining(6, ['--blocks', '4', '--leak', String(512 * 1024)]);
    model = openModel(cap);
    expected = advise(model, 0, { file: 'train.gpumem' });
    wv = await openSnapshotPanel(model, { fileName: 'train.gpumem' });
    await wv.page.waitForSelector('[data-testid=tab-advice]', { timeout: 20_000 });
  });
  after(async () => {
    await wv?.close();
    model?.close();
  });

  test('showTab opens "What to do" and computes it: one section per item, with its prediction, evidence and assumptions', async () => {
    const { page } = wv;
    assert.equal((await wv.posted()).filter((m) => m.type === 'requestAdvice').length, 0, 'nothing is computed before the tab is shown');
    await wv.send({ type: 'showTab', tab: 'advice' });
    await page.waitForSelector('[data-testid=advice-item-0]', { timeout: 60_000 });
    const asked = (await wv.posted()).filter((m) => m.type === 'requestAdvice');
    assert.equal(asked.length, 1);
    assert.deepEqual(parseSnapshotWebviewMessage(asked[0]), asked[0], 'the page speaks the validated contract');
    assert.ok(expected.items.some((i) => i.kind === 'checkpoint') && expected.items.some((i) => i.kind === 'leak'));
    const sections = page.locator('.advice-item');
    assert.equal(await sections.count(), expected.items.length);
    for (const [i, item] of expected.items.entries()) {
      const s = sections.nth(i);
      assert.equal(await s.getAttribute('data-kind'), item.kind);
      assert.equal(await s.getAttribute('data-confidence'), item.confidence);
      assert.equal((await s.locator('h3').textContent()).trim(), `${i + 1}. ${item.title}`);
      assert.deepEqual((await s.locator('[data-testid=advice-evidence] li').allTextContents()).map((t) => t.trim()), item.evidence);
      assert.deepEqual((await s.locator('[data-testid=advice-assumptions] li').allTextContents()).map((t) => t.trim()), item.assumptions);
      const predicted = (await s.locator('[data-testid=advice-predicted]').allTextContents()).map((t) => t.trim());
      if (item.kind === 'checkpoint') {
        assert.deepEqual(predicted, [`Predicted peak allocated ${formatBytes(item.predicted.peakAllocatedBytes)} (now ${formatBytes(model.current(0).peakAllocatedBytes)})`]);
      }
      if (item.predicted === null) assert.deepEqual(predicted, []);
    }
    assert.deepEqual((await page.locator('[data-testid=advice-not-offered] li').allTextContents()).map((t) => t.trim()), expected.notOffered);
    await wv.screenshot('snapshot-advice');
  });

  test('a leak item links to its line: the click asks the editor to open it', async () => {
    const { page } = wv;
    const leak = expected.items.find((i) => i.kind === 'leak');
    await page.locator(`.advice-item[data-kind=leak] [data-testid=advice-line]`).first().click();
    await page.waitForTimeout(200);
    const go = wv.forEditor.filter((m) => m.type === 'goToSource').pop();
    assert.deepEqual(go, { type: 'goToSource', file: leak.apply.file, line: leak.apply.line });
  });
});

describe('What to do: nothing the data shows', () => {
  let model;
  let wv;
  before(async () => {
    model = openModel(path.join(fixturesDir, 'mlp-record-stream-pending.pickle'));
    wv = await openSnapshotPanel(model, { fileName: 'mlp-record-stream-pending.pickle' });
    await wv.page.waitForSelector('[data-testid=tab-advice]', { timeout: 20_000 });
  });
  after(async () => {
    await wv?.close();
    model?.close();
  });

  test('the tab says so, and lists why each kind of advice was not offered', async () => {
    const { page } = wv;
    const expected = advise(model, model.devices()[0], {});
    assert.equal(expected.items.length, 0);
    await page.click('[data-testid=tab-advice]');
    await page.waitForSelector('[data-testid=advice-none]', { timeout: 60_000 });
    assert.equal(await page.locator('.advice-item').count(), 0);
    assert.deepEqual((await page.locator('[data-testid=advice-not-offered] li').allTextContents()).map((t) => t.trim()), expected.notOffered);
  });
});
