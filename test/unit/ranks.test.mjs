// `gpumem summary DIR…`: one row per rank from real captures written by the allocator (simulated
// device), outliers by Note [Rank flags].
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { formatBytes } from '../../src/core/base/units/bytes.ts';
import { escape, needsAllocator, openModel, root, simTraining, tmpDir } from './reader-support.mjs';

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

/**
 * Real captures of a job, one per rank (sim_training.py on the simulated device, 4 steps); a rank listed in `heavy`
 * keeps one 128 MiB tensor per step, so it peaks 4 × 128 MiB = 512 MiB above the others.
 */
function ranksJob(world, heavy) {
  const dir = tmpDir();
  return Array.from({ length: world }, (_, rank) =>
    simTraining(4, heavy.includes(rank) ? ['--leak', String(128 * MiB)] : [], {
      capture: path.join(dir, `capture-${200 + rank}.gpumem`),
      env: { RANK: String(rank), LOCAL_RANK: String(rank), WORLD_SIZE: String(world) },
    }).cap,
  );
}

// Note [Rank flags] for small N.
test('two ranks 512 MiB apart: only the higher one is flagged, with how far it is above the other', { skip }, () => {
  const t = rankTable(ranksJob(2, [1]));
  const [p0, p1] = t.ranks.map((r) => r.peak_allocated_bytes);
  assert.equal(p1 - p0, 512 * MiB, 'what the workload did');
  assert.deepEqual(t.ranks.map((r) => r.flag), [null, 'high']);
  assert.deepEqual(t.ranks.map((r) => r.apart_bytes), [0, 512 * MiB]);
  assert.equal(t.reference_peak_allocated_bytes, p0);
  assert.equal(t.reference_rank, 0);
  assert.equal(t.median_peak_allocated_bytes, (p0 + p1) / 2, 'the caption keeps the usual median');
  const text = rankTableText(t);
  const share = Math.round((512 * MiB / p0) * 100);
  assert.match(text, new RegExp(`\\n▲ rank 1 peaks at ${escape(formatBytes(p1))}, 512 MiB \\(${share} %\\) above rank 0: it will run out of memory first\\.`));
  assert.doesNotMatch(text, /▼/);
});

test('three ranks, one apart from the two that agree: only that rank is flagged, high or low', { skip }, () => {
  const low = rankTable(ranksJob(3, [0, 2])); // rank 1 peaks 512 MiB below ranks 0 and 2
  assert.deepEqual(low.ranks.map((r) => r.flag), [null, 'low', null]);
  assert.equal(low.ranks[1].apart_bytes, -512 * MiB);
  assert.match(rankTableText(low), /\n▼ rank 1 peaks at [^,]+, 512 MiB \(\d+ %\) below the median rank's [^:]+: uneven sharding/);
  const high = rankTable(ranksJob(3, [2]));
  assert.deepEqual(high.ranks.map((r) => r.flag), [null, null, 'high']);
  assert.equal(high.ranks[2].apart_bytes, 512 * MiB);
});

test('four ranks split in two halves: the upper half is flagged, not every rank', { skip }, () => {
  const t = rankTable(ranksJob(4, [1, 3]));
  assert.deepEqual(t.ranks.map((r) => r.flag), [null, 'high', null, 'high']);
  assert.equal(t.reference_peak_allocated_bytes, t.ranks[0].peak_allocated_bytes, 'the lower median: a real rank\'s peak');
});

test('ranks that peak alike: none is flagged', { skip }, () => {
  for (const world of [2, 3]) {
    const t = rankTable(ranksJob(world, []));
    assert.equal(new Set(t.ranks.map((r) => r.peak_allocated_bytes)).size, 1);
    assert.deepEqual(t.ranks.map((r) => r.flag), Array(world).fill(null));
    assert.doesNotMatch(rankTableText(t), /▲|▼/);
  }
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
