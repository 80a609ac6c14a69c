// `gpumem summary DIR…` (issue 16): one row per rank from real captures written by the allocator (simulated
// device), outliers by Note [Rank outliers].
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { needsAllocator, openModel, root, simTraining, tmpDir } from './reader-support.mjs';

const { captureFiles, rankTable } = await import('../../src/core/analyses/ranks/index.ts');
const { rankTableText } = await import('../../src/core/analyses/ranks/report.ts');

const skip = needsAllocator;
const MiB = 1024 * 1024;

/** A session folder per rank, as torchrun under `gpumem run` leaves them; rank 2 keeps 96 MiB more per step. */
function job(world) {
  const dir = tmpDir();
  for (let rank = 0; rank < world; rank++) {
    const session = path.join(dir, `20261124-1200${String(rank).padStart(2, '0')}-train`);
    fs.mkdirSync(session);
    const extra = rank === 2 ? ['--leak', String(96 * MiB)] : [];
    simTraining(3, extra, {
      capture: path.join(session, `capture-${100 + rank}.gpumem`),
      env: { RANK: String(rank), LOCAL_RANK: String(rank), WORLD_SIZE: String(world) },
    });
  }
  return dir;
}

test('a 4-rank job: one row per rank in rank order, peaks as each capture says, the heavy rank flagged', { skip }, () => {
  const dir = job(4);
  const files = captureFiles([dir]);
  assert.equal(files.length, 4);
  const t = rankTable(files);
  assert.deepEqual(t.ranks.map((r) => [r.rank, r.world_size]), [[0, 4], [1, 4], [2, 4], [3, 4]]);
  for (const r of t.ranks) {
    const m = openModel(r.file);
    try {
      const d = m.summary().devices[0];
      assert.equal(r.peak_allocated_bytes, d.peak_allocated_bytes);
      assert.equal(r.pid, m.header().pid);
      assert.equal(r.device_name, 'simulated device');
      assert.ok(r.peak_reserved_bytes >= r.peak_allocated_bytes);
    } finally {
      m.close();
    }
  }
  // rank 2 holds 3 × 96 MiB more at its peak than the others, which agree with each other
  const others = t.ranks.filter((r) => r.rank !== 2).map((r) => r.peak_allocated_bytes);
  assert.equal(new Set(others).size, 1);
  assert.equal(t.ranks[2].peak_allocated_bytes - others[0], 3 * 96 * MiB);
  assert.equal(t.median_peak_allocated_bytes, others[0]);
  assert.deepEqual(t.ranks.map((r) => r.flag), [null, null, 'high', null]);
  const text = rankTableText(t);
  assert.match(text, /^4 captures; median peak allocated /);
  assert.match(text, /▲ rank 2 peaks at .*: it will run out of memory first\./);
});

test('outliers need both 10 % and 64 MiB; OOMs are counted per rank', () => {
  const sim = path.join(root, 'test/fixtures/sim-captures');
  const t = rankTable([path.join(sim, 'rank0.capture'), path.join(sim, 'rank1.capture'), path.join(sim, 'oom.capture')]);
  // the OOM capture peaks ~3.5× the others, but by less than 64 MiB: not flagged
  assert.ok(Math.max(...t.ranks.map((r) => r.peak_allocated_bytes)) - t.median_peak_allocated_bytes < 64 * MiB);
  assert.deepEqual(t.ranks.map((r) => r.flag), [null, null, null]);
  assert.deepEqual(t.ranks.map((r) => r.ooms).sort(), [0, 0, 1]);
  assert.match(rankTableText(t), /Out of memory on rank 0: gpumem summary FILE shows each OOM with its line\./);
});
