// RankSet (Note [Ranks side by side]): the ranks view of session folders, from real captures (the sim
// fixtures' two ranks and an OOM capture). The Chromium side is test/webview/snapshot-ranks.test.mjs.
import assert from 'node:assert/strict';
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
