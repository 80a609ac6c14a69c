// Captures written by the real writer: the lens allocator (dist/native/libgpumem_allocator.so, simulated
// device) driven through ctypes. Its own snapshot pickle of the same moment is the reference.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { openModel, python, root, tmpDir } from './reader-support.mjs';

const LIB = path.join(root, 'dist/native/libgpumem_allocator.so');
const skip = fs.existsSync(LIB) ? false : `needs ${LIB} (make -C native/allocator)`;

function simulate(segments, seed) {
  const dir = tmpDir();
  const cap = path.join(dir, `sim-${segments}.gpumem`);
  const pickle = path.join(dir, `sim-${segments}.pickle`);
  const r = spawnSync('python3', [path.join(root, 'test/unit/reference/sim_workload.py'), LIB, cap, pickle, segments, 3000, seed], {
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stderr);
  return { cap, pickle };
}

for (const segments of ['fixed', 'expandable']) {
  test(`a ${segments}-segment capture from the allocator summarises like the allocator's own snapshot`, { skip }, () => {
    const { cap, pickle } = simulate(segments, 3);
    const m = openModel(cap);
    try {
      assert.deepEqual(m.problems(), []);
      assert.ok(m.ended(), 'REC_END written at shutdown');
      assert.deepEqual(m.summary(), { ...python('snapshot_summary.py', pickle), format: 'gpumem-capture' });
      // The state at the end, block by block, is the allocator's.
      const expected = JSON.parse(
        spawnSync(
          'python3',
          ['-c', `import pickle,sys,json; d=pickle.load(open(sys.argv[1],'rb')); print(json.dumps(sorted([[s['address'], s['total_size'], s['is_expandable'], [[b['address'], b['size'], b['state']] for b in s['blocks']]] for s in d['segments']])))`, pickle],
          { encoding: 'utf8' },
        ).stdout,
      );
      const got = m
        .stateAt(0, Infinity)
        .segments.map((s) => [s.address, s.totalSize, s.expandable, s.blocks.map((b) => [b.address, b.size, b.state])])
        .sort((a, b) => a[0] - b[0]);
      assert.deepEqual(got, expected);
      assert.equal(m.markers(0).filter((k) => k.kind === 'empty_cache').length, 1);
      // Forward replay from the capture's start agrees with the allocator's trace at any moment.
      const { t0Us, t1Us } = m.timeRange(0);
      const times = Array.from({ length: 11 }, (_, k) => Math.round(t0Us + ((t1Us - t0Us) * k) / 10));
      const series = python('replay_reference.py', 'series', pickle, ...times);
      times.forEach((t, k) => {
        const f = m.stateAt(0, t).fragmentation;
        assert.deepEqual([f.allocatedBytes, f.reservedBytes], [series[k].allocated, series[k].reserved], `at ${t}`);
      });
    } finally {
      m.close();
    }
  });
}
