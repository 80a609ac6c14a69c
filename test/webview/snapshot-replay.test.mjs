// The snapshot panel on a GPU Memory Lens capture made with expandable segments (trim on growth): the
// breakdown names the parts of expandable segments (python3 computes them from the capture's exported twin),
// and the "Allocator what-if" tab replays the trace under each policy on a button press, one row per policy,
// with exactly the engine's numbers. Screenshots land in .test-output/webview/.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { formatBytes } from '../../src/core/base/units/bytes.ts';
import { parseSnapshotWebviewMessage } from '../../src/core/base/protocol/snapshot.ts';
import { openSnapshotPanel } from './snapshot-host.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
process.env.GPUMEM_ADDON ||= path.join(ROOT, 'dist/native/gpumem_addon.node');
const { openModel } = await import('../../src/core/base/model/open.ts');
const { POLICIES } = await import('../../src/core/base/model/whatIf.ts');
const { deviceCapacity } = await import('../../src/core/analyses/replay/index.ts');

const CAPTURE = path.join(ROOT, 'test/fixtures/h200-e2e-train.capture');

describe('lens capture: breakdown per segment kind and the allocator what-if table', () => {
  const dir = path.join(ROOT, '.test-output/webview/replay');
  let model;
  let wv;
  let ref;
  before(async () => {
    fs.mkdirSync(dir, { recursive: true });
    model = openModel(CAPTURE);
    const twin = path.join(dir, 'twin.pickle');
    model.exportPickle(twin);
    ref = JSON.parse(execFileSync('python3', [path.join(ROOT, 'test/unit/snapshot_reference.py'), twin], { encoding: 'utf8' })).devices['0'].breakdown;
    wv = await openSnapshotPanel(model, { fileName: 'h200-e2e-train.capture' });
    await wv.page.waitForSelector('[data-testid=verdict]', { timeout: 20_000 });
  });
  after(async () => {
    await wv?.close();
    model?.close();
  });

  test('the breakdown shows releasable free pages and sub-page remainders, and no split remainders (no fixed segment)', async () => {
    const { page } = wv;
    assert.ok(ref.releasablePageBytes > 0 && ref.fixedSegments === 0);
    for (const part of ['requestedBytes', 'roundingWasteBytes', 'pendingFreeBytes', 'subPageRemainderBytes', 'releasablePageBytes', 'cachedFreeBytes']) {
      assert.equal(Number(await page.locator(`.view-summary [data-part="${part}"]`).getAttribute('data-bytes')), ref[part], part);
    }
    assert.equal(await page.locator('.view-summary [data-part="splitRemainderBytes"]').count(), 0);
    const pages = await page.locator('.view-summary [data-part="releasablePageBytes"]').textContent();
    assert.match(pages, /Releasable free pages.*empty_cache\(\) unmaps them/);
    const verdict = await page.locator('[data-testid=verdict]').textContent();
    assert.doesNotMatch(verdict, /would fail/);
    const w = model.whatIf(0, Infinity);
    assert.match(verdict, new RegExp(`empty_cache\\(\\) would release ${formatBytes(w.emptyCacheReleasesBytes).replace('.', '\\.')}\\.`));
    assert.equal(w.emptyCacheReleasesBytes, ref.cachedFreeBytes + ref.releasablePageBytes);
    await wv.screenshot('snapshot-lens-capture-breakdown');
  });

  test('the what-if tab replays every policy on demand, with the engine\'s peaks and the device capacity', async () => {
    const { page } = wv;
    await page.click('[data-testid=tab-replay]');
    assert.equal(await page.locator('[data-testid=replay-table]').count(), 0, 'nothing is replayed before the button');
    await page.click('[data-testid=replay-run]');
    await page.waitForSelector('[data-testid=replay-table]', { timeout: 60_000 });
    const asked = (await wv.posted()).filter((m) => m.type === 'requestReplay');
    assert.equal(asked.length, 1);
    assert.deepEqual(parseSnapshotWebviewMessage(asked[0]), asked[0], 'the page speaks the validated contract');
    const cap = deviceCapacity(model, 0);
    assert.match(await page.locator('[data-testid=replay-capacity]').textContent(), new RegExp(`Simulated device: ${formatBytes(cap.bytes)}`));
    const rows = page.locator('[data-testid=replay-table] tbody tr');
    assert.equal(await rows.count(), POLICIES.length);
    for (const [i, policy] of POLICIES.entries()) {
      const r = model.replay(0, policy, cap.bytes);
      const row = rows.nth(i);
      assert.equal(await row.getAttribute('data-policy'), policy);
      assert.equal(Number(await row.getAttribute('data-peak-reserved')), r.peakReservedBytes, policy);
      const cells = (await row.locator('td').allTextContents()).map((s) => s.trim());
      assert.equal(cells[0], formatBytes(r.peakReservedBytes), policy);
      assert.equal(cells[1], `×${r.ratio.toFixed(3)}`, policy);
      assert.equal(r.oom, null, `${policy}: a 150 MiB run fits the device`);
      assert.equal(cells[2], 'no', policy);
    }
    assert.equal(await page.locator('[data-testid=replay-table] tr.own-policy').getAttribute('data-policy'), 'lens');
    // Note [Replay check]: the policy that ran, replayed, against the capture's own peak reserved.
    const own = model.replay(0, 'lens', cap.bytes);
    assert.match(
      await page.locator('[data-testid=replay-check]').textContent(),
      new RegExp(`^Self-check: replay of the policy that ran \\(GPU Memory Lens \\(expandable \\+ trim\\)\\): ${formatBytes(own.peakReservedBytes).replace('.', '\\.')} against ${formatBytes(model.current(0).peakReservedBytes).replace('.', '\\.')} recorded`),
    );
    await wv.screenshot('snapshot-lens-capture-replay');
  });
});

describe('a PyTorch run with a setting the replay does not model: its row says which, and gives no figure', () => {
  let model;
  let wv;
  let file;
  before(async () => {
    const dir = path.join(ROOT, '.test-output/webview/replay');
    fs.mkdirSync(dir, { recursive: true });
    // garbage_collection_threshold:0.6 on an H200 (test/fixtures/conformance); its header gets the run's settings as
    // today's bootstrap writes them (replay-conformance.test.mjs does the same).
    const name = 'gc_threshold-auto';
    const truth = JSON.parse(fs.readFileSync(path.join(ROOT, `test/fixtures/conformance/${name}.truth.json`), 'utf8'));
    let bytes = zlib.gunzipSync(fs.readFileSync(path.join(ROOT, `test/fixtures/conformance/${name}.capture.gz`)));
    const n = bytes.readUInt32LE(12);
    const header = JSON.parse(bytes.subarray(16, 16 + n).toString('utf8'));
    if (!header.pytorch_allocator_settings) {
      const json = Buffer.from(JSON.stringify({ ...header, pytorch_allocator_settings: { version: 1, settings: truth.allocator_settings } }));
      const head = Buffer.from(bytes.subarray(0, 16));
      head.writeUInt32LE(json.length, 12);
      bytes = Buffer.concat([head, json, bytes.subarray(16 + n)]);
    }
    file = path.join(dir, `${name}.gpumem`);
    fs.writeFileSync(file, bytes);
    model = openModel(file);
    wv = await openSnapshotPanel(model, { fileName: `${name}.gpumem` });
    await wv.page.waitForSelector('[data-testid=verdict]', { timeout: 20_000 });
  });
  after(async () => {
    await wv?.close();
    model?.close();
  });

  test('the pytorch rows are not modelled, the lens rows keep their figures', async () => {
    const { page } = wv;
    await page.click('[data-testid=tab-replay]');
    await page.click('[data-testid=replay-run]');
    await page.waitForSelector('[data-testid=replay-table]', { timeout: 60_000 });
    for (const policy of ['pytorch', 'pytorch-expandable']) {
      const row = page.locator(`[data-testid=replay-table] tr[data-policy="${policy}"]`);
      assert.equal(await row.getAttribute('data-peak-reserved'), 'not-modelled');
      assert.match(await row.textContent(), /not modelled, no figure: garbage_collection_threshold:0\.6/);
      assert.doesNotMatch(await row.textContent(), /[KMG]iB/);
    }
    const lens = model.replay(0, 'lens');
    assert.equal(Number(await page.locator('[data-testid=replay-table] tr[data-policy="lens"]').getAttribute('data-peak-reserved')), lens.peakReservedBytes);
    assert.match(await page.locator('[data-testid=replay-check]').textContent(), /not modelled, so no figure: garbage_collection_threshold:0\.6/);
    await wv.screenshot('snapshot-pytorch-gc-replay');
  });
});
