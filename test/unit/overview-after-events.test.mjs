// Note [Figures after the events in the index] (native/format/capture_index.h): a capture's first view (its index, or
// a pass over its records: Note [Capture first view] in native/addon/src/capture_overview.cpp) reads the REC_STATS
// samples where the full open reads them (Notes [Figures after the events] and [Figures from stats] in
// native/addon/src/model.h): after MARK_EVENTS_OFF a device's buckets, peaks, end state and time range follow the
// samples, and a device with figures only is shown from them; without the marker nothing changes. Captures written
// record by record with the format's own layouts (native/python/gpumem/_format.py); the writer's REC_INDEX by the
// lens writer itself (test/bench/budget/rebudget.cc with no budget: the same records, and the writer's index).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { ALLOCATOR_LIB, captureRecords, eventsBeforeOff, eventsOffCapture, needsAllocator, openModel, pythonInline, root, tmpDir } from './reader-support.mjs';
import { overviewOf } from '../../webview/snapshot/overviewText.ts';

const { openOverviewAsync, captureIndex } = await import('../../src/core/base/model/open.ts');

const MiB = 2 ** 20;
const T0 = 5_000_000_000; // ns
const ms = (x) => T0 + x * 1e6; // ns, x ms after T0
const us = (x) => ms(x) / 1000; // the reader's µs (clock anchors 0: monotonic time)

const dir = tmpDir();
let serial = 0;

// { events, off, stats }: eventsOffCapture's (./reader-support.mjs)
function capture(spec) {
  return eventsOffCapture(path.join(dir, `capture-${serial++}.gpumem`), spec);
}

// The writer's own index: `file` written again through the lens writer (as test/unit/rank-index.test.mjs does).
const writerSkip = spawnSync('g++', ['--version']).status === 0 ? false : 'needs g++ for rebudget.cc';
let rebudget = '';
function withWriterIndex(file) {
  if (!rebudget) {
    rebudget = path.join(dir, 'rebudget');
    const src = path.join(root, 'native/allocator/src');
    const r = spawnSync('g++', ['-std=c++17', '-O1', '-o', rebudget, path.join(root, 'test/bench/budget/rebudget.cc'), path.join(src, 'writer.cc'), path.join(src, 'compactor.cc'), '-lpthread'], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
  }
  const out = file.replace(/\.gpumem$/, '.indexed.gpumem');
  const r = spawnSync(rebudget, [file, out, '0'], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  return out;
}

/** The REC_INDEX payload named by the file's END, its write time (IndexRec.t_ns) zeroed. */
function indexPayload(file) {
  const buf = fs.readFileSync(file);
  const bytes = buf.readUInt32LE(buf.length - 4); // EndRec.index_bytes: the file's last 4 bytes
  assert.ok(bytes > 0, 'the writer wrote an index');
  const p = Buffer.from(buf.subarray(buf.length - 32 - bytes + 8, buf.length - 32));
  p.fill(0, 8, 16);
  return p;
}

/**
 * The first view's devices against the full open of the same file: the devices it shows, and each one's events, time
 * range, peaks (allocated and its time, reserved), end state; with exact, the buckets too, figure for figure (the
 * captures below put every event and sample well inside a panel bucket); else every panel bucket of the full open lies
 * within the first view's, and the first view's within its neighbours' (the index's buckets are cut at their own
 * edges).
 */
function assertFullOpen(file, o, exact) {
  const m = openModel(file);
  try {
    assert.deepEqual(o.devices.map((d) => d.device), m.devices(), 'the devices shown');
    const summary = m.summary();
    for (const d of o.devices) {
      const s = summary.devices.find((x) => x.device === d.device);
      const cur = m.current(d.device);
      assert.equal(d.events, s.events, 'events');
      assert.deepEqual({ t0Us: d.rangeT0Us, t1Us: d.rangeT1Us }, m.timeRange(d.device), 'time range');
      assert.equal(d.peakAllocatedBytes, s.peak_allocated_bytes, 'peak allocated');
      assert.equal(d.peakAtTimeUs, s.peak_at_time_us, 'time of the peak');
      assert.equal(d.peakReservedBytes, cur.peakReservedBytes, 'peak reserved');
      assert.equal(d.endAllocatedBytes, cur.allocatedBytes, 'allocated at the end');
      const tl = m.timeline(d.device, d.t0Us, d.t1Us, d.buckets);
      const keys = ['allocatedMin', 'allocatedMax', 'reservedMin', 'reservedMax'];
      if (exact) {
        for (const k of keys) assert.deepEqual(d[k], tl[k], `device ${d.device}: ${k}`);
        continue;
      }
      for (let k = 0; k < d.buckets; k++) {
        const near = (a) => a.slice(Math.max(0, k - 1), k + 2);
        assert.ok(tl.allocatedMax[k] <= d.allocatedMax[k] && tl.allocatedMin[k] >= d.allocatedMin[k], `bucket ${k}: allocated within the first view's`);
        assert.ok(tl.reservedMax[k] <= d.reservedMax[k] && tl.reservedMin[k] >= d.reservedMin[k], `bucket ${k}: reserved within`);
        assert.ok(d.allocatedMax[k] <= Math.max(...near(tl.allocatedMax)) && d.allocatedMin[k] >= Math.min(...near(tl.allocatedMin)), `bucket ${k}: the first view's allocated near the full open's`);
        assert.ok(d.reservedMax[k] <= Math.max(...near(tl.reservedMax)) && d.reservedMin[k] >= Math.min(...near(tl.reservedMin)), `bucket ${k}: reserved near`);
      }
    }
  } finally {
    m.close();
  }
}

/** The first view of `file` from a pass over its records and, rewritten by the writer, from its index: the same. */
async function firstViews(file, buckets) {
  const scan = await openOverviewAsync(file, buckets);
  assert.equal(scan.source, 'scan');
  assert.equal(scan.complete, true);
  if (writerSkip) return { scan };
  const indexed = withWriterIndex(file);
  const index = await openOverviewAsync(indexed, buckets);
  assert.equal(index.source, 'index');
  assert.deepEqual(index.devices, scan.devices, 'the writer\'s index and the pass give the same view');
  return { scan, index, indexed };
}

// As test/unit/figures-after-events.test.mjs: device 0: a 64 MiB segment, A 10 MiB, B 20 MiB (the events' peak, 30 MiB
// at 20 ms), B freed, C 5 MiB at 120 ms: 15 MiB when the events stop at 150 ms. Device 1: 8 MiB of a 32 MiB segment.
// Every time is well inside its bucket of the views below (device 0: 5 × 90 ms; device 1: 5 × 39 ms from 5 ms).
const EVENTS = eventsBeforeOff(ms);
const OFF = ms(150);
// PyTorch's figures: one sample before the marker (31 MiB: a reader of it would show it), then samples after it
// rising above the events' peak, the peak reaching 50 MiB between the 250 ms and 340 ms samples.
const STATS = [
  [ms(25), 0, 31 * MiB, 64 * MiB, 31 * MiB, 64 * MiB],
  [ms(200), 0, 35 * MiB, 80 * MiB, 35 * MiB, 80 * MiB],
  [ms(200), 1, 16 * MiB, 32 * MiB, 16 * MiB, 32 * MiB],
  [ms(250), 0, 40 * MiB, 96 * MiB, 40 * MiB, 96 * MiB],
  [ms(340), 0, 20 * MiB, 96 * MiB, 50 * MiB, 96 * MiB],
  [ms(450), 0, 15 * MiB, 96 * MiB, 50 * MiB, 96 * MiB],
];

test('after MARK_EVENTS_OFF the first view (the pass and the writer\'s index) follows the samples, as the full open does', async () => {
  const file = capture({ events: EVENTS, off: OFF, stats: STATS });
  const { scan, indexed } = await firstViews(file, 5);
  const [d0, d1] = scan.devices;
  // The samples' figures: the peak of 50 MiB at the first sample that reported it, 96 MiB reserved, 15 MiB at the
  // end, the range to the last sample (the events alone said 30 MiB at 20 ms, 64 MiB, 15 MiB, 120 ms).
  assert.deepEqual(
    [d0.events, d0.peakAllocatedBytes, d0.peakAtTimeUs, d0.peakReservedBytes, d0.endAllocatedBytes, d0.rangeT0Us, d0.rangeT1Us],
    [5, 50 * MiB, us(340), 96 * MiB, 15 * MiB, us(0), us(450)],
  );
  // Five buckets of 90 ms: the events' up to the marker (the 31 MiB sample before it is not read), the bucket it falls
  // in holding the events' 15 MiB at it, then the samples from the 15 MiB carried in, the peak rise between 250 and
  // 340 ms shown in the bucket of the 340 ms sample; no longer flat at 15 MiB / 64 MiB.
  assert.deepEqual(d0.allocatedMin, [0, 10 * MiB, 15 * MiB, 20 * MiB, 15 * MiB]);
  assert.deepEqual(d0.allocatedMax, [30 * MiB, 15 * MiB, 40 * MiB, 50 * MiB, 20 * MiB]);
  assert.deepEqual(d0.reservedMin, [0, 64 * MiB, 64 * MiB, 96 * MiB, 96 * MiB]);
  assert.deepEqual(d0.reservedMax, [64 * MiB, 64 * MiB, 96 * MiB, 96 * MiB, 96 * MiB]);
  // The marker holds for every device: device 1's sample after it is read (16 MiB above its events' 8 MiB).
  assert.deepEqual(
    [d1.events, d1.peakAllocatedBytes, d1.peakAtTimeUs, d1.endAllocatedBytes, d1.rangeT0Us, d1.rangeT1Us],
    [2, 16 * MiB, us(200), 16 * MiB, us(5), us(200)],
  );
  assert.deepEqual(d1.allocatedMax, [8 * MiB, 8 * MiB, 8 * MiB, 8 * MiB, 16 * MiB]);
  assert.deepEqual(d1.allocatedMin, [0, 8 * MiB, 8 * MiB, 8 * MiB, 8 * MiB]);
  assertFullOpen(file, scan, true);
  if (indexed) assertFullOpen(indexed, await openOverviewAsync(indexed, 5), true);
  // Finer views: the index's buckets are cut at their own edges, so the first view is an envelope of the full open's.
  for (const buckets of [1, 64, 700]) {
    const o = await openOverviewAsync(file, buckets);
    assertFullOpen(file, o, buckets === 1);
    assert.equal(Math.max(...o.devices[0].allocatedMax), 50 * MiB, 'the highest bucket is the peak');
  }
  // The rank row from the writer's index has the samples' peaks too (Note [Rank row from the index]).
  if (indexed) {
    const row = captureIndex(indexed, 1).row;
    assert.deepEqual(row.devices.map((d) => [d.device, d.peakAllocatedBytes, d.peakReservedBytes]), [[0, 50 * MiB, 96 * MiB], [1, 16 * MiB, 32 * MiB]]);
  }
});

test('without the marker the first view is the events\' alone, and the samples change nothing in the index', async () => {
  const file = capture({ events: EVENTS, off: null, stats: STATS });
  const { scan, indexed } = await firstViews(file, 5);
  const [d0] = scan.devices;
  assert.deepEqual(
    [d0.events, d0.peakAllocatedBytes, d0.peakAtTimeUs, d0.peakReservedBytes, d0.endAllocatedBytes, d0.rangeT1Us],
    [5, 30 * MiB, us(20), 64 * MiB, 15 * MiB, us(120)],
  );
  // Five buckets of 24 ms: B freed at 30 ms, C at 120 ms, nothing after (the samples are not read).
  assert.deepEqual(d0.allocatedMax, [30 * MiB, 30 * MiB, 10 * MiB, 10 * MiB, 15 * MiB]);
  assert.deepEqual(d0.reservedMax, [64 * MiB, 64 * MiB, 64 * MiB, 64 * MiB, 64 * MiB]);
  assertFullOpen(file, scan, false);
  if (indexed) {
    // The same capture without its samples: the writer's index is the same, byte for byte (but its write time).
    const bare = withWriterIndex(capture({ events: EVENTS, off: null, stats: [] }));
    assert.ok(indexPayload(indexed).equals(indexPayload(bare)), 'the index of the capture with samples is the one without');
  }
});

test('events read after the marker: in its microsecond they count up to T_off; later, in the figures but not the buckets', async () => {
  // C freed 300 ns after the marker (its microsecond: before it, for the reader); a 1 MiB allocation 2 ms after it
  // (none from the recorder, which drops them: the events, the range and the peaks count it, the buckets do not).
  const events = [...EVENTS, ['free', OFF + 300, 0, 2 ** 30 + 30 * MiB, 5 * MiB], ['alloc', OFF + 2e6, 0, 2 ** 30 + 40 * MiB, MiB]];
  const file = capture({ events, off: OFF, stats: STATS });
  const { scan } = await firstViews(file, 5);
  const [d0] = scan.devices;
  assert.equal(d0.events, 7);
  // Carried in after the marker: 10 MiB (C freed in its microsecond), not the 11 MiB of the later allocation.
  assert.deepEqual(d0.allocatedMin, [0, 10 * MiB, 10 * MiB, 20 * MiB, 15 * MiB]);
  assert.deepEqual(d0.allocatedMax, [30 * MiB, 15 * MiB, 40 * MiB, 50 * MiB, 20 * MiB]);
  assertFullOpen(file, scan, true);
});

test('a sample taken at the marker\'s time but written before it is one of the samples after it, as the full open reads it', async () => {
  // At the same time, the capture above writes the sample first (samples and markers come from different threads).
  const stats = [STATS[0], [OFF, 0, 12 * MiB, 70 * MiB, 40 * MiB, 70 * MiB]];
  const file = capture({ events: EVENTS.filter((e) => e[2] === 0), off: OFF, stats });
  const { scan } = await firstViews(file, 4);
  const [d0] = scan.devices;
  assert.deepEqual(
    [d0.peakAllocatedBytes, d0.peakAtTimeUs, d0.peakReservedBytes, d0.endAllocatedBytes, d0.rangeT1Us],
    [40 * MiB, us(150), 70 * MiB, 12 * MiB, us(150)],
  );
  assertFullOpen(file, scan, true);
});

test('a sample peak equal to the events\' keeps the events\' peak and its time; the samples still make the buckets', async () => {
  const stats = [
    [ms(220), 0, 12 * MiB, 64 * MiB, 30 * MiB, 64 * MiB],
    [ms(280), 0, 14 * MiB, 64 * MiB, 30 * MiB, 64 * MiB],
  ];
  const file = capture({ events: EVENTS.filter((e) => e[2] === 0), off: OFF, stats });
  const { scan } = await firstViews(file, 5);
  const [d0] = scan.devices;
  assert.deepEqual([d0.peakAllocatedBytes, d0.peakAtTimeUs, d0.endAllocatedBytes, d0.rangeT1Us], [30 * MiB, us(20), 14 * MiB, us(280)]);
  // Five buckets of 56 ms: after the marker (in the third) the samples' 12 and 14 MiB, nothing above the events' peak.
  assert.deepEqual(d0.allocatedMin, [0, 10 * MiB, 10 * MiB, 12 * MiB, 12 * MiB]);
  assert.deepEqual(d0.allocatedMax, [30 * MiB, 10 * MiB, 15 * MiB, 15 * MiB, 14 * MiB]);
  assertFullOpen(file, scan, true);
  for (const buckets of [3, 50]) assertFullOpen(file, await openOverviewAsync(file, buckets), false);
});

// Figures only (Note [Figures from stats]): no event, PyTorch's figures. A sample of zeros first (a device the
// process had not used yet), then allocated 1, 3, 2, 2 MiB about 100 ms apart, the peak rising to 9 MiB between the
// last two.
const FIGURES = [
  [ms(-100), 0, 0, 0, 0, 0],
  [ms(10), 0, 1 * MiB, 20 * MiB, 1 * MiB, 20 * MiB],
  [ms(110), 0, 3 * MiB, 20 * MiB, 3 * MiB, 20 * MiB],
  [ms(210), 0, 2 * MiB, 20 * MiB, 3 * MiB, 20 * MiB],
  [ms(290), 0, 2 * MiB, 40 * MiB, 9 * MiB, 40 * MiB],
  [ms(-50), 1, 0, 0, 0, 0], // a device announced and never used: not shown, by either
  [ms(250), 1, 0, 0, 0, 0],
].sort((a, b) => a[0] - b[0]);

test('a capture of figures only: its first view shows the device from its samples, as the full open does', async () => {
  const file = capture({ stats: FIGURES });
  const { scan, indexed } = await firstViews(file, 4);
  assert.equal(scan.devices.length, 1, 'device 0 only (device 1 has nothing to show)');
  const [d0] = scan.devices;
  assert.deepEqual(
    [d0.device, d0.events, d0.peakAllocatedBytes, d0.peakAtTimeUs, d0.peakReservedBytes, d0.endAllocatedBytes, d0.rangeT0Us, d0.rangeT1Us],
    [0, 0, 9 * MiB, us(290), 40 * MiB, 2 * MiB, us(-100), us(290)],
  );
  // 4 buckets of 97.5 ms from -100 ms: 0 before the first sample that says something, each later one with the value
  // carried in, the last one with the peak reached between its two samples.
  assert.deepEqual(d0.allocatedMin, [0, 0, 1 * MiB, 2 * MiB]);
  assert.deepEqual(d0.allocatedMax, [0, 1 * MiB, 3 * MiB, 9 * MiB]);
  assert.deepEqual(d0.reservedMin, [0, 0, 20 * MiB, 20 * MiB]);
  assert.deepEqual(d0.reservedMax, [0, 20 * MiB, 20 * MiB, 40 * MiB]);
  assertFullOpen(file, scan, true);
  for (const buckets of [1, 40, 999]) assertFullOpen(file, await openOverviewAsync(file, buckets), buckets === 1);
  if (indexed) {
    assertFullOpen(indexed, await openOverviewAsync(indexed, 4), true);
    // The rank row's devices list it with 0 events (rankRowOfIndex leaves such a device out, as rankRowOf does).
    assert.deepEqual(captureIndex(indexed, 1).row.devices.map((d) => [d.device, d.events]), [[0, 0]]);
  }
});

// The recorder itself (the real .so in PyTorch-allocator mode, driven as the live tracker and the bootstrap drive it):
// three steps recorded one by one, MARK_EVENTS_OFF, then PyTorch's figures (gpumem_observe_figures) read by the
// sampler every 5 ms, rising to a 60 MiB peak and falling to 12 MiB. The writer's index at the clean close and a pass
// over the same records give the same first view, and it agrees with the full open.
const DRIVER = String.raw`import ctypes as c, json, sys, time
lib = c.CDLL(sys.argv[1])
lib.gpumem_configure.argtypes = [c.c_char_p]
lib.gpumem_observe_start.argtypes = [c.c_void_p, c.c_void_p]
lib.gpumem_observe_device.argtypes = [c.c_int, c.c_char_p, c.c_uint64, c.c_char_p]
ev = lib.gpumem_observe_event
ev.argtypes = [c.c_int, c.c_int, c.c_uint64, c.c_uint64, c.c_uint64, c.c_uint32, c.c_uint64]
lib.gpumem_observe_events_off.argtypes = [c.c_char_p]
lib.gpumem_observe_figures.argtypes = [c.c_int, c.c_uint64, c.c_uint64, c.c_uint64, c.c_uint64, c.c_uint64]
cfg = {"capture_path": sys.argv[2], "trace_entries": 0, "stacks": False, "sample_interval_ms": 5}
assert lib.gpumem_configure(json.dumps(cfg).encode()) == 0
lib.gpumem_observe_start(None, None)
lib.gpumem_observe_device(0, b"sim", 80 << 30, b"")
ALLOC, FREE_REQ, FREE_DONE, SEG_ALLOC = 0, 1, 2, 3
MiB, base = 1 << 20, 1 << 32
ev(0, SEG_ALLOC, base, 64 * MiB, 7, 0, 0)
for step in range(3):
    ev(0, ALLOC, base, 20 * MiB, 7, 0, 0)
    time.sleep(0.01)
    ev(0, FREE_REQ, base, 20 * MiB, 7, 0, 0)
    ev(0, FREE_DONE, base, 20 * MiB, 7, 0, 0)
ev(0, ALLOC, base, 8 * MiB, 7, 0, 0)
time.sleep(0.02)
assert lib.gpumem_observe_events_off(b"recordSteps 3") == 0
for k in range(4):
    lib.gpumem_observe_figures(0, (30 + 10 * k) * MiB, 128 * MiB, (30 + 10 * k) * MiB, 128 * MiB, 0)
    time.sleep(0.03)
lib.gpumem_observe_figures(0, 12 * MiB, 128 * MiB, 60 * MiB, 128 * MiB, 0)
time.sleep(0.1)
lib.gpumem_shutdown(0)
`;

test('the recorder\'s own capture of recorded steps: the writer\'s index has the samples\' figures after the marker', { skip: needsAllocator }, async () => {
  const file = path.join(dir, 'recorded-steps.gpumem');
  pythonInline(DRIVER, ALLOCATOR_LIB, file);
  const buf = fs.readFileSync(file);
  const recs = captureRecords(buf);
  const [index, end] = recs.slice(-2);
  assert.equal(index.type, 49, 'REC_INDEX before the END');
  assert.ok(recs.some((r) => r.type === 41 /* REC_MARKER */ && r.payload.readUInt32LE(12) === 8 /* MARK_EVENTS_OFF */));
  // The same records without the index (as an older writer wrote them): the first view is a pass over them.
  const bare = path.join(dir, 'recorded-steps-bare.gpumem');
  fs.writeFileSync(bare, Buffer.concat([buf.subarray(0, index.at), Buffer.from([60, 0, 0, 0, 20, 0, 0, 0]), end.payload.subarray(0, 20)]));
  for (const buckets of [1, 64, 500]) {
    const o = await openOverviewAsync(file, buckets);
    assert.equal(o.source, 'index');
    const scan = await openOverviewAsync(bare, buckets);
    assert.equal(scan.source, 'scan');
    assert.deepEqual(scan.devices, o.devices, 'the writer\'s index and the pass give the same view');
    assertFullOpen(file, o, buckets === 1);
    const [d0] = o.devices;
    assert.deepEqual([d0.events, d0.peakAllocatedBytes, d0.peakReservedBytes, d0.endAllocatedBytes], [11, 60 * MiB, 128 * MiB, 12 * MiB]);
    assert.equal(Math.max(...d0.allocatedMax), 60 * MiB, 'the samples\' peak is in the buckets');
    if (buckets > 1) assert.deepEqual([d0.allocatedMin.at(-1), d0.allocatedMax.at(-1)], [12 * MiB, 12 * MiB], 'the last bucket is the last samples\'');
  }
});

test('the first view names what it is an overview of: events, or PyTorch figures where none were recorded', () => {
  assert.equal(overviewOf({ events: 55681, device: 0 }), 'Overview of 55,681 events on device 0');
  assert.equal(overviewOf({ events: 0, device: 1 }), "Overview of PyTorch's figures on device 1 (allocations not recorded one by one)");
});
