// RankSet (Note [Ranks side by side]): the ranks view of session folders, from real captures (the sim
// fixtures' two ranks and an OOM capture). The Chromium side is test/webview/snapshot-ranks.test.mjs.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { test } from 'node:test';
import { openModel, root, tmpDir } from './reader-support.mjs';

const { RankSet } = await import('../../src/core/views/ranks/rankSet.ts');
const sim = path.join(root, 'test/fixtures/sim-captures');

test('a folder without captures is an actionable error, not an empty view', async () => {
  const dir = tmpDir();
  await assert.rejects(RankSet.open([], { title: path.basename(dir) }), /no captures \(\*\.gpumem\) in it: open a session folder that gpumem run wrote/);
});

test('rows and series per rank on one axis: the axis spans every capture, each series peaks at its capture\'s peak', async () => {
  const files = ['rank0.capture', 'rank1.capture', 'oom.capture'].map((f) => path.join(sim, f));
  // Note [Ranks off the host thread]: the event loop turns while the captures are read (a timer ticks in between)
  let ticks = 0;
  const timer = setInterval(() => ticks++, 0);
  const opening = RankSet.open(files, { title: 'sim', buckets: 64, displayPath: (f) => `shown/${path.basename(f)}` });
  const s = await opening.finally(() => clearInterval(timer));
  assert.ok(ticks >= 1, `the event loop ran during the reads (${ticks} timer ticks)`);
  const v = s.view();
  assert.equal(s.view(), v, 'built once');
  assert.equal(v.buckets, 64);
  assert.equal(v.ranks.length, 3);
  const ranges = [];
  for (const r of v.ranks) {
    const file = s.file(r.index);
    assert.equal(path.basename(file), r.fileName);
    const m = openModel(file);
    try {
      const d = m.summary().devices.find((x) => x.device === r.device);
      assert.equal(r.peakAllocatedBytes, d.peak_allocated_bytes);
      assert.equal(r.ooms, m.ooms().length);
      ranges.push(m.timeRange(r.device));
      assert.equal(r.allocatedMax.length, 64);
      assert.equal(Math.max(...r.allocatedMax), d.peak_allocated_bytes, `${r.fileName}: the bucket maximum is the peak`);
      const top = m.summary().top_lines[0];
      assert.deepEqual(r.topLine, { file: top.file, displayFile: `shown/${path.basename(top.file)}`, line: top.line, bytesAtPeak: top.bytes_at_peak });
    } finally {
      m.close();
    }
  }
  assert.equal(v.t0Us, Math.min(...ranges.map((r) => r.t0Us)));
  assert.equal(v.t1Us, Math.max(...ranges.map((r) => r.t1Us)));
  assert.deepEqual(v.sentences.filter((x) => /^Out of memory/.test(x)).length, 1, 'the OOM capture is named');
  assert.deepEqual(s.handle({ type: 'ready' }), [{ type: 'ranks', view: v }]);
  assert.equal(s.handle({ type: 'openRank', index: 0 }), undefined, 'opening a rank is the glue\'s');
});

test('8 ranks read in parallel: the slowest rank and the OOM rank are marked, each with its own peak and top line', async () => {
  const dir = tmpDir();
  const lib = path.join(root, 'dist/native/libgpumem_allocator.so');
  const files = [];
  for (let r = 0; r < 7; r++) {
    const file = path.join(dir, `rank${r}`, `capture-${100 + r}.gpumem`);
    fs.mkdirSync(path.dirname(file), { recursive: true });
    // rank 3 runs the most steps: the slowest; rank 5 keeps 1 MiB more per step
    const steps = r === 3 ? 150 : 8; // ~0.3 s against ~0.02 s, and the OOM fixture's 0.13 s
    const extra = r === 5 ? ['--leak', String(1 << 20)] : [];
    const p = spawnSync('python3', [path.join(root, 'test/unit/reference/sim_training.py'), lib, file, String(steps), ...extra], {
      encoding: 'utf8',
      env: { ...process.env, RANK: String(r), LOCAL_RANK: String(r), WORLD_SIZE: '8' },
    });
    assert.equal(p.status, 0, p.stderr);
    files.push(file);
  }
  files.push(path.join(sim, 'oom.capture'));
  const s = await RankSet.open(files, { title: '8 ranks', buckets: 100 });
  assert.ok(s.readsAtOnceSeen >= 2, `captures were read in parallel (${s.readsAtOnceSeen} at once)`);
  const v = s.view();
  assert.equal(v.ranks.length, 8);
  const marked = (m) => v.ranks.filter((r) => r.marks.includes(m));
  const slow = marked('slowest');
  assert.equal(slow.length, 1);
  assert.equal(path.basename(s.file(slow[0].index)), 'capture-103.gpumem', 'rank 3 ran longest');
  const oom = marked('oom');
  assert.deepEqual(oom.map((r) => r.fileName), ['oom.capture']);
  for (const r of [...slow, ...oom]) {
    const m = openModel(s.file(r.index));
    try {
      const d = m.summary().devices.find((x) => x.device === r.device);
      assert.equal(r.peakAllocatedBytes, d.peak_allocated_bytes, `${r.fileName}: its peak`);
      assert.equal(Math.max(...r.allocatedMax), d.peak_allocated_bytes, `${r.fileName}: its series peaks at its peak`);
      const top = m.summary().top_lines[0];
      assert.deepEqual(r.topLine, { file: top.file, displayFile: top.file, line: top.line, bytesAtPeak: top.bytes_at_peak }, `${r.fileName}: its top line`);
      const own = m.timeRange(r.device);
      assert.deepEqual({ t0Us: r.t0Us, t1Us: r.t1Us }, own);
      assert.equal(r.ooms, m.ooms().length);
    } finally {
      m.close();
    }
  }
  assert.ok(oom[0].ooms >= 1);
  // Every other rank is unmarked, and rank 5's leak makes it the highest peak of the seven sim ranks.
  assert.equal(v.ranks.filter((r) => r.marks.length === 0).length, 6);
  const rank5 = v.ranks.find((r) => r.fileName === 'capture-105.gpumem');
  assert.equal(rank5.flag === 'high' || rank5.peakAllocatedBytes > v.ranks.find((r) => r.fileName === 'capture-100.gpumem').peakAllocatedBytes, true);
  const sentence = v.sentences.find((x) => x.startsWith('Slowest: '));
  assert.match(sentence, new RegExp(`^Slowest: rank 3, [0-9.]+ s from its first to its last event; peak allocated .+; top line at its peak .+:${slow[0].topLine.line}\\.$`));
});
