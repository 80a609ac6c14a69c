// RanksSession (Note [Ranks side by side]): the ranks view of session folders, from real captures (the sim
// fixtures' two ranks and an OOM capture). The Chromium side is test/webview/snapshot-ranks.test.mjs.
import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import { openModel, root, tmpDir } from './reader-support.mjs';

const { RanksSession } = await import('../../src/core/ranks/session.ts');
const sim = path.join(root, 'test/fixtures/sim-captures');

test('a folder without captures is an actionable error, not an empty view', () => {
  const dir = tmpDir();
  assert.throws(() => new RanksSession([], { title: path.basename(dir) }), /no captures \(\*\.gpumem\) in it: open a session folder that gpumem run wrote/);
});

test('rows and series per rank on one axis: the axis spans every capture, each series peaks at its capture\'s peak', () => {
  const files = ['rank0.capture', 'rank1.capture', 'oom.capture'].map((f) => path.join(sim, f));
  const s = new RanksSession(files, { title: 'sim', buckets: 64, displayPath: (f) => `shown/${path.basename(f)}` });
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
