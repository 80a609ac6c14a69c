// A figures-only capture in the snapshot panel (Chromium): a real H200 run under PyTorch's cudaMallocAsync backend
// (test/fixtures/device-samples/figures_async-auto, with the truth PyTorch measured in that run: kept beside the
// conformance fixtures because its step 3 has no sample inside it, the case the "—" rows are for), fed by OpenedCapture over the real native Model. The end's figures
// are PyTorch's at the last sample, the allocator state is said to be unknown rather than shown as zeros, step rows
// without a sample read "—", and the what-if tab says in one line why nothing is replayed (Notes [Figures at the end],
// [Figures at step ends] in native/addon/src/aggregate.cpp, [What the engine cannot answer] in
// src/core/analyses/replay/unmodelled.ts). Expected figures are read from the capture by python3
// (test/unit/reference/device_samples.py) and the truth PyTorch measured in the run.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import zlib from 'node:zlib';
import { openSnapshotPanel } from './snapshot-host.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
process.env.GPUMEM_ADDON ||= path.join(ROOT, 'dist/native/gpumem_addon.node');
const { openModel } = await import('../../src/core/base/model/open.ts');
const FIXTURE = path.join(ROOT, 'test/fixtures/device-samples/figures_async-auto');

describe('a cudaMallocAsync run (figures only) in the snapshot panel', () => {
  const dir = path.join(ROOT, '.test-output/webview/figures-only');
  const file = path.join(dir, 'figures_async-auto.gpumem');
  let model;
  let wv;
  let facts;
  const truth = JSON.parse(fs.readFileSync(`${FIXTURE}.truth.json`, 'utf8'));
  before(async () => {
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(file, zlib.gunzipSync(fs.readFileSync(`${FIXTURE}.capture.gz`)));
    facts = JSON.parse(execFileSync('python3', [path.join(ROOT, 'test/unit/reference/device_samples.py'), file], { encoding: 'utf8', maxBuffer: 1 << 28 }));
    model = openModel(file);
    wv = await openSnapshotPanel(model, { fileName: 'figures_async-auto.gpumem' });
    await wv.page.waitForSelector('[data-testid=verdict]', { timeout: 20_000 });
  });
  after(async () => {
    await wv?.close();
    model?.close();
  });

  test("summary: PyTorch's figures at the end and its peaks; no allocator state, no what-if verdict", async () => {
    const { page } = wv;
    const bytes = async (key) => Number(await page.locator(`[data-figure="${key}"]`).getAttribute('data-bytes'));
    const last = facts.stats.at(-1);
    assert.equal(await bytes('reserved'), last.reserved);
    assert.equal(await bytes('allocated'), last.allocated);
    assert.equal(await bytes('peakAllocated'), truth.max_allocated);
    assert.equal(await bytes('peakReserved'), truth.max_reserved);
    assert.match(await page.locator('[data-figure="reserved"] .figure-note').innerText(), /^PyTorch's figure at the last sample, \d+\.\d{3} s$/);
    for (const key of ['segments', 'blocks', 'largestFree', 'active', 'requested']) assert.equal(await page.locator(`[data-figure="${key}"]`).count(), 0, key);
    assert.equal(await page.locator('[data-testid=no-allocator-state]').count(), 1);
    const verdict = await page.locator('[data-testid=verdict]').innerText();
    assert.match(verdict, /by PyTorch's figures at the last sample/);
    assert.match(verdict, /cudaMallocAsync backend is not an allocator the what-if engine models/);
    assert.doesNotMatch(verdict, /would release|Nothing is reserved/);
    await wv.screenshot('snapshot-figures-only-summary');
  });

  test('what-if: nothing replayed, and one line that says why', async () => {
    const { page } = wv;
    await page.click('[data-testid=tab-replay]');
    await page.click('[data-testid=replay-run]');
    await page.waitForSelector('[data-testid=replay-none]', { timeout: 30_000 });
    assert.equal(await page.locator('[data-testid=replay-table]').count(), 0);
    assert.match(await page.locator('[data-testid=replay-none]').innerText(), /^No replay: PyTorch's cudaMallocAsync backend is not an allocator/);
  });

  test('categories: step rows are PyTorch\'s figures at the step\'s last sample, "—" where none was read', async () => {
    const { page } = wv;
    await page.click('[data-testid=tab-categories]');
    await page.waitForSelector('[data-testid=step-table]', { timeout: 30_000 });
    const cells = await page.locator('[data-testid=step-table] tbody tr').evaluateAll((trs) => trs.map((tr) => [...tr.querySelectorAll('td')].slice(0, 3).map((td) => td.textContent)));
    assert.equal(cells.length, 4);
    assert.deepEqual(cells[2], ['—', '—', '—'], 'step 3 ended 45 ms after step 2: no sample inside it');
    assert.ok(cells[0][0].startsWith('≤ '), "the peak is PyTorch's peak counter");
    assert.equal(await page.locator('[data-testid=step-table-stats]').count(), 1);
    assert.equal(await page.locator('[data-testid=categories-peak-table]').count(), 0, 'no category is known without events');
  });
});
