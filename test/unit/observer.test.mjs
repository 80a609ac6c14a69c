// The PyTorch-allocator mode's conversion from PyTorch's trace entries to capture records
// (native/allocator/src/observer.cc, the same code the live trace tracker calls), on real PyTorch 2.11
// pickles. Each pickle's device trace goes through gpumem_observe_event into a capture
// (reference/observe_pickle.py convert); the reader opens the capture; the peak and the bytes per line at
// the peak must equal what the pickle's own trace gives, computed independently (observe_pickle.py expect).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { test } from 'node:test';
import { run as summaryCommand } from '../../src/cli/commands/summary.ts';
import { ALLOCATOR_LIB, captureStdout, FIXTURES, needsAllocator, python, root, tmpDir, withModel } from './reader-support.mjs';

const script = path.join(root, 'test/unit/reference/observe_pickle.py');

function py(...args) {
  const r = spawnSync('python3', [script, ...args], { encoding: 'utf8', maxBuffer: 1 << 28 });
  if (r.status !== 0) throw new Error(`observe_pickle.py ${args[0]} failed:\n${r.stderr}`);
  return JSON.parse(r.stdout);
}

/**
 * Feeds `traceSource` (Python defining `trace`, a list of PyTorch trace entries) through the observer's
 * feed_trace into `capture`; {recorded, dropped, info} as the observer reports them.
 */
function feedTrace(traceSource, capture) {
  const r = spawnSync(
    'python3',
    [
      '-c',
      `import sys, json
sys.path.insert(0, ${JSON.stringify(path.join(root, 'native/python'))})
from gpumem import _native, _observer_api
n = _native.Allocator(sys.argv[1]); n.configure({"capture_path": sys.argv[2], "sample_interval_ms": 0})
o = _observer_api.Observer(n); o.start(None, None)
${traceSource}
rec, dropped, _ = _observer_api.feed_trace(o, trace)
info = o.info(); n.shutdown(0)
print(json.dumps({"recorded": rec, "dropped": dropped, "info": info}))`,
      ALLOCATOR_LIB,
      capture,
    ],
    { encoding: 'utf8' },
  );
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout);
}

for (const pickle of FIXTURES) {
  const name = path.basename(pickle, '.pickle');
  test(`observed ${name}: peak and per-line bytes at the peak equal the pickle's own trace`, { skip: needsAllocator }, () => {
    const capture = path.join(tmpDir(), `${name}.gpumem`);
    const conv = py('convert', ALLOCATOR_LIB, pickle, capture);
    const want = py('expect', pickle);
    assert.ok(want.peak > 0, 'the fixture has allocations');
    assert.equal(conv.dropped, 0, 'every free in these traces pairs with an allocation the trace made');
    // Note [Observed block sizes]: the blocks the trace leaves live have PyTorch's own sizes (its final segments),
    // not the requested sizes the trace entries carry
    assert.deepEqual(conv.live, conv.pytorch);
    assert.equal(conv.info.peak_allocated, want.peak, "the observer's own figures");
    withModel(capture, (m) => {
      const h = m.header();
      assert.equal(h.allocatorMode, 'pytorch');
      assert.equal(m.summary().devices[0].peak_allocated_bytes, want.peak);
      const got = {};
      for (const s of m.lineStats(0)) if (s.selfBytesAtPeak > 0 && s.line) got[`${s.file}:${s.line}`] = s.selfBytesAtPeak;
      assert.deepEqual(got, want.lines);
    });
  });
}

test('a free the observer never saw handed out is dropped and counted, not turned into a made-up allocation', { skip: needsAllocator }, () => {
  const dir = tmpDir();
  const capture = path.join(dir, 'unpaired.gpumem');
  const out = feedTrace(
    `trace = [{"action": "free_requested", "addr": 4096, "size": 512, "frames": []},
         {"action": "alloc", "addr": 8192, "size": 1024, "frames": [{"filename": "/w/a.py", "name": "f", "line": 3}]},
         {"action": "free_completed", "addr": 8192, "size": 1024, "frames": []},
         {"action": "free_requested", "addr": 8192, "size": 1024, "frames": []},
         {"action": "free_completed", "addr": 8192, "size": 1024, "frames": []}]`,
    capture,
  );
  // The first free (unknown block) and the completion before the request are dropped; alloc, request and
  // completion of the known block are recorded.
  assert.deepEqual([out.recorded, out.dropped, out.info.dropped_frees], [3, 2, 2]);
  assert.deepEqual([out.info.allocated, out.info.peak_allocated], [0, 1024]);
  withModel(capture, (m) => {
    assert.equal(m.summary().devices[0].peak_allocated_bytes, 1024);
    const lines = m.lineStats(0).filter((s) => s.allocCount > 0);
    assert.deepEqual(lines.map((s) => [s.file, s.line, s.allocCount, s.totalAllocatedBytes]), [['/w/a.py', 3, 1, 1024]]);
  });
});

test('`gpumem summary` of an observed capture names the allocator and why; a pickle names none', { skip: needsAllocator }, async () => {
  const capture = path.join(tmpDir(), 'observed.gpumem');
  py('convert', ALLOCATOR_LIB, FIXTURES[2], capture);
  const text = await captureStdout(() => summaryCommand([capture]));
  assert.equal(text.code, 0, text.err);
  // The line wraps inside the report's box.
  assert.match(text.out, /Allocator: pytorch \(observed: PyTorch's own caching allocator\) —[\s|]+converted from a snapshot pickle/);
  const json = JSON.parse((await captureStdout(() => summaryCommand([capture, '--json']))).out);
  assert.deepEqual(json.identity.allocator, { mode: 'pytorch', reason: 'converted from a snapshot pickle' });
  const pickleJson = JSON.parse((await captureStdout(() => summaryCommand([FIXTURES[2], '--json']))).out);
  assert.equal(pickleJson.identity.allocator, undefined);
  assert.doesNotMatch((await captureStdout(() => summaryCommand([FIXTURES[2]]))).out, /Allocator:/);
});

test('an address handed out again without its free closes the old block first: never counted twice', { skip: needsAllocator }, () => {
  const capture = path.join(tmpDir(), 'again.gpumem');
  const out = feedTrace(
    `f = lambda line: [{"filename": "/w/g.py", "name": "f", "line": line}]
trace = [{"action": "alloc", "addr": 4096, "size": 2048, "frames": f(1)},
         {"action": "alloc", "addr": 4096, "size": 1024, "frames": f(2)},
         {"action": "alloc", "addr": 8192, "size": 512, "frames": f(3)}]`,
    capture,
  );
  assert.deepEqual([out.recorded, out.dropped], [3, 0]);
  // 2048 live, then replaced by 1024 (not 3072), then +512.
  assert.deepEqual([out.info.allocated, out.info.peak_allocated], [1536, 2048]);
  withModel(capture, (m) => {
    assert.equal(m.summary().devices[0].peak_allocated_bytes, 2048);
    const live = m.lineStats(0).filter((s) => s.allocCount > 0).map((s) => [s.line, s.allocCount, s.totalAllocatedBytes]);
    assert.deepEqual(live.sort((a, b) => a[0] - b[0]), [[1, 1, 2048], [2, 1, 1024], [3, 1, 512]]);
  });
});

test("under roundup_power2_divisions and max_split_size_mb the observer records PyTorch's blocks", { skip: needsAllocator }, () => {
  const cap = path.join(tmpDir(), 'rounding.gpumem');
  const info = python('observed_rounding.py', ALLOCATOR_LIB, cap);
  // the reference sizes each block as CUDACachingAllocator.cpp does; the observer must agree, request by request
  assert.deepEqual(info.recorded, info.rows);
  assert.deepEqual(
    info.rows.map((r) => r.block),
    [1536 * 1024, 10240 * 1024, 100 * 1024 * 1024],
  );
  withModel(cap, (m) => assert.equal(m.current(0).allocatedBytes, info.rows.reduce((a, r) => a + r.block, 0)));
});
