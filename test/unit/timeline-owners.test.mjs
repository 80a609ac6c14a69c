// The timeline's owner groups (Note [Owner bands] in native/addon/src/aggregate.cpp) against python3's
// replay of the same pickles (test/unit/reference/owners_at.py): at every sampled bucket centre the
// groups sum to allocated memory and each named line holds exactly its live bytes and allocations.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { test } from 'node:test';
import { FIXTURES, openModel, root } from './reader-support.mjs';
import { OpenedCapture } from '../../src/core/views/snapshot/openedCapture.ts';

const ownersAt = (file, times) =>
  JSON.parse(execFileSync('python3', [path.join(root, 'test/unit/reference/owners_at.py'), file, JSON.stringify(times)], { encoding: 'utf8', maxBuffer: 64 << 20 }));

for (const file of FIXTURES) {
  test(`owner groups of ${path.basename(file)} equal python's replay at every bucket centre`, () => {
    const m = openModel(file);
    try {
      const { t0Us, t1Us } = m.timeRange(0);
      const n = 97;
      const tl = m.timeline(0, t0Us - 1, t1Us + 1, n, true);
      const G = tl.owners.groups;
      assert.equal(G, tl.owners.lines.length + 2);
      const times = Array.from({ length: n }, (_, k) => tl.t0Us + ((k + 0.5) * (tl.t1Us - tl.t0Us)) / n);
      const want = ownersAt(file, times);
      const names = tl.owners.lines.map((l) => `${l.file}:${l.line}`);
      let named = 0;
      for (let k = 0; k < n; k++) {
        const row = tl.owners.bytes.slice(k * G, (k + 1) * G);
        assert.equal(row.reduce((a, b) => a + b, 0), want[k].allocated, `bucket ${k}`);
        names.forEach((name, g) => {
          const w = want[k].owners[name] ?? { bytes: 0, count: 0 };
          assert.equal(row[g], w.bytes, `bucket ${k} ${name}`);
          assert.equal(tl.owners.counts[k * G + g], w.count, `bucket ${k} ${name} count`);
          named += w.bytes > 0;
        });
        // Python's lines outside the top ones are "other lines".
        const other = Object.entries(want[k].owners).filter(([o]) => !names.includes(o)).reduce((a, [, w]) => a + w.bytes, 0);
        assert.equal(row[G - 2], other, `bucket ${k} other lines`);
      }
      assert.ok(named > 0, 'no named owner held memory');
      // Without asking, a timeline has no owners (the live view polls it on every append).
      assert.equal(m.timeline(0, t0Us, t1Us, 10).owners, undefined);
      // The sites table names the same lines in the same order, with their group.
      const sites = m.lineStats(0).filter((s) => s.ownerGroup >= 0 && s.ownerGroup < names.length);
      assert.deepEqual(sites.map((s) => `${s.file}:${s.line}`), names);
      sites.forEach((s, g) => assert.equal(s.ownerGroup, g));
    } finally {
      m.close();
    }
  });
}

test("filtering the timeline to an owner sends that owner's largest allocations only", () => {
  const file = FIXTURES.find((f) => f.includes('resnet50'));
  const m = openModel(file);
  try {
    const session = new OpenedCapture(m, { fileName: 'r' });
    const { t0Us, t1Us } = m.timeRange(0);
    const all = session.timeline(1, 0, t0Us, t1Us, 200, 100000);
    assert.equal(all.spansTruncated, false);
    const G = all.owners.groups;
    for (let g = 0; g < G; g++) {
      const mine = all.spans.owner.map((o, i) => [o, all.spans.size[i]]).filter(([o]) => o === g).map(([, z]) => z).sort((a, b) => b - a);
      const only = session.timeline(2, 0, t0Us, t1Us, 200, 50, g);
      assert.ok(only.spans.owner.every((o) => o === g), `group ${g}`);
      assert.deepEqual([...only.spans.size].sort((a, b) => b - a), mine.slice(0, 50), `group ${g}`);
    }
  } finally {
    m.close();
  }
});
