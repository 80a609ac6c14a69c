// The snapshot panel opened on a session folder shows its ranks side by side (Note [Ranks side by
// side]): two ranks' captures written by the lens allocator on the simulated device (sim_training.py with RANK=0/1,
// as torchrun under `gpumem run` leaves them, rank 1 keeping 96 MiB more per step), served by RankSet in
// Chromium. Each rank's figures are checked against what its own capture says (the reader's summary of that file
// alone) and against what the workload did (rank 1 − rank 0 = 3 steps × 96 MiB at the peak); the lanes share one
// time axis, and a click posts openRank for that rank.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { formatBytes } from '../../src/core/base/units/bytes.ts';
import { needsAllocator, openModel, simTraining, tmpDir } from '../unit/reader-support.mjs';
import { openSnapshotPanel } from './snapshot-host.mjs';

const { captureFiles } = await import('../../src/core/analyses/ranks/index.ts');
const { RankSet, RANK_BUCKETS } = await import('../../src/core/views/ranks/rankSet.ts');

const MiB = 1024 * 1024;
const STEPS = 3;
const LEAK = 96 * MiB;

/** What one capture says about itself, read alone (not through the ranks code). */
function own(file) {
  const m = openModel(file);
  try {
    const s = m.summary();
    const d = s.devices.find((x) => x.events > 0);
    const range = m.timeRange(d.device);
    const full = m.timeline(d.device, range.t0Us, range.t1Us, 1);
    return { header: m.header(), device: d, top: s.top_lines[0], range, reservedMax: full.reservedMax[0], ooms: m.ooms().length };
  } finally {
    m.close();
  }
}

describe('a 2-rank session folder, side by side', { skip: needsAllocator }, () => {
  let dir;
  let wv;
  let files;
  before(async () => {
    dir = tmpDir();
    for (const rank of [0, 1]) {
      const session = path.join(dir, `20261125-1200${rank}0-train`);
      fs.mkdirSync(session);
      simTraining(STEPS, rank === 1 ? ['--leak', String(LEAK)] : [], {
        capture: path.join(session, `capture-${4200 + rank}.gpumem`),
        env: { RANK: String(rank), LOCAL_RANK: String(rank), WORLD_SIZE: '2' },
      });
    }
    files = captureFiles([dir]);
    const session = await RankSet.open(files, { title: path.basename(dir) });
    wv = await openSnapshotPanel(null, { fileName: path.basename(dir), session });
    await wv.page.waitForSelector('[data-testid=rank-row]', { timeout: 20_000 });
  });
  after(async () => {
    await wv?.close();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  test('one row per rank, in rank order, each with its own capture\'s figures', async () => {
    const { page } = wv;
    const rows = page.locator('[data-testid=rank-row]');
    assert.equal(await rows.count(), 2);
    const refs = files.map(own).sort((a, b) => a.header.rank - b.header.rank);
    assert.deepEqual(refs.map((r) => [r.header.rank, r.header.worldSize]), [[0, 2], [1, 2]]);
    for (let i = 0; i < 2; i++) {
      const row = rows.nth(i);
      const ref = refs[i];
      assert.equal(await row.getAttribute('data-rank'), String(i));
      assert.match(await row.locator('[data-figure=rank]').textContent(), new RegExp(`^rank ${i}/2`));
      const peak = row.locator('[data-figure=peakAllocated]');
      assert.equal(Number(await peak.getAttribute('data-bytes')), ref.device.peak_allocated_bytes);
      assert.equal((await peak.textContent()).trim(), formatBytes(ref.device.peak_allocated_bytes));
      assert.equal(Number(await row.locator('[data-figure=peakReserved]').getAttribute('data-bytes')), ref.reservedMax);
      assert.equal(Number(await row.locator('[data-figure=ooms]').getAttribute('data-count')), ref.ooms);
      assert.equal((await row.locator('[data-figure=topLine]').textContent()).trim(), `${ref.top.file}:${ref.top.line} (${formatBytes(ref.top.bytes_at_peak)})`);
    }
    // what the workload did: rank 1 kept one 96 MiB tensor per step, all live at its peak
    const [p0, p1] = await Promise.all([0, 1].map(async (i) => Number(await rows.nth(i).locator('[data-figure=peakAllocated]').getAttribute('data-bytes'))));
    assert.equal(p1 - p0, STEPS * LEAK);
    await wv.screenshot('snapshot-ranks-two');
  });

  test('each rank\'s timeline on one shared time axis, its bucket maximum its own peak', async () => {
    const { page } = wv;
    const refs = files.map(own).sort((a, b) => a.header.rank - b.header.rank);
    const lanes = page.locator('[data-testid=rank-lanes]');
    assert.equal(Number(await lanes.getAttribute('data-t0-us')), Math.min(...refs.map((r) => r.range.t0Us)));
    assert.equal(Number(await lanes.getAttribute('data-t1-us')), Math.max(...refs.map((r) => r.range.t1Us)));
    const canvases = page.locator('[data-testid=rank-timeline]');
    assert.equal(await canvases.count(), 2);
    for (let i = 0; i < 2; i++) {
      const c = canvases.nth(i);
      assert.equal(Number(await c.getAttribute('width')), RANK_BUCKETS);
      assert.equal(Number(await c.getAttribute('data-t0-us')), refs[i].range.t0Us);
      assert.equal(Number(await c.getAttribute('data-t1-us')), refs[i].range.t1Us);
      assert.equal(Number(await c.getAttribute('data-max-allocated-bytes')), refs[i].device.peak_allocated_bytes);
      assert.equal(Number(await c.getAttribute('data-max-reserved-bytes')), refs[i].reservedMax);
      // something was drawn: the allocated area's pixels are not all transparent
      const painted = await c.evaluate((el) => {
        const d = el.getContext('2d').getImageData(0, 0, el.width, el.height).data;
        let n = 0;
        for (let k = 3; k < d.length; k += 4) if (d[k] > 0) n++;
        return n;
      });
      assert.ok(painted > 0, `rank ${i}'s timeline is drawn`);
    }
    // the ranks ran one after the other here: rank 0's lane is empty after its end, rank 1's before its start
    const series = wv.session.view().ranks;
    const t0 = Number(await lanes.getAttribute('data-t0-us'));
    const bucketUs = (Number(await lanes.getAttribute('data-t1-us')) - t0) / RANK_BUCKETS;
    let outside = 0;
    for (const r of series) {
      r.allocatedMax.forEach((b, k) => {
        if (t0 + (k + 1) * bucketUs <= r.t0Us || t0 + k * bucketUs > r.t1Us) {
          outside++;
          assert.equal(b, 0, `rank ${r.rank}, bucket ${k} outside its run`);
        }
      });
    }
    assert.ok(outside > 0, 'the ranks did not overlap entirely (sim_training ran them one after the other)');
    assert.equal(await page.locator('[data-testid=export-pickle], [data-testid=export-png]').count(), 0, 'no file exports on the ranks view');
    // the heavier rank's lane reaches higher on the shared byte scale
    const scale = Number(await lanes.getAttribute('data-scale-bytes'));
    assert.equal(scale, Math.max(...refs.map((r) => r.reservedMax)));
  });

  test('a click on a rank asks the host to open that rank\'s capture', async () => {
    const { page } = wv;
    await page.locator('[data-testid=rank-row]').nth(1).click();
    await page.locator('[data-testid=rank-timeline]').nth(0).click();
    const deadline = Date.now() + 5000;
    while (wv.forEditor.filter((m) => m.type === 'openRank').length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    const opens = wv.forEditor.filter((m) => m.type === 'openRank');
    assert.deepEqual(opens, [{ type: 'openRank', index: 1 }, { type: 'openRank', index: 0 }]);
    assert.equal(wv.session.file(1), files.find((f) => own(f).header.rank === 1));
    assert.deepEqual(wv.rejected, []);
  });
});
