// Note [Capture index] (gpumem_format.h) and Note [Capture first view] (native/addon/src/capture_overview.cpp): a
// capture written by the real writer (the lens allocator on the simulated device) ends with REC_INDEX + REC_END, and
// its first view, read from the index, has the full open's figures; a capture without the index (an older writer),
// and one cut short, still get a first view, from a pass over their records, with the figures of what they hold.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { openModel, root, tmpDir, captureRecords as records } from './reader-support.mjs';

const { openOverviewAsync, openModelFirstView } = await import('../../src/core/base/model/open.ts');
const LIB = path.join(root, 'dist/native/libgpumem_allocator.so');
const REC_INDEX = 49;
const REC_END = 60;

function simCapture(name, steps, ...extra) {
  const out = path.join(tmpDir(), name);
  const r = spawnSync('python3', [path.join(root, 'test/unit/reference/sim_training.py'), LIB, out, String(steps), ...extra], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  return out;
}

/** The overview's figures against the full open of the same file; buckets are an envelope of the full timeline's. */
function assertFiguresOfFullOpen(file, overview) {
  const m = openModel(file);
  try {
    const summary = m.summary();
    assert.deepEqual(overview.devices.map((d) => d.device), summary.devices.filter((d) => d.events > 0).map((d) => d.device));
    for (const d of overview.devices) {
      const s = summary.devices.find((x) => x.device === d.device);
      assert.equal(d.events, s.events, 'events');
      assert.deepEqual({ t0Us: d.rangeT0Us, t1Us: d.rangeT1Us }, m.timeRange(d.device), 'time range');
      assert.equal(d.peakAllocatedBytes, s.peak_allocated_bytes, 'peak allocated');
      assert.equal(d.peakAtTimeUs, s.peak_at_time_us, 'time of the peak');
      const cur = m.current(d.device);
      assert.equal(d.endAllocatedBytes, cur.allocatedBytes, 'allocated at the end');
      assert.equal(d.peakReservedBytes, cur.peakReservedBytes, 'peak reserved');
      assert.equal(d.ooms, m.ooms().filter((o) => o.device === d.device).length, 'OOMs');
      const tl = m.timeline(d.device, d.t0Us, d.t1Us, d.buckets);
      assert.equal(Math.max(...d.allocatedMax), Math.max(...tl.allocatedMax), 'the highest bucket is the peak');
      assert.equal(Math.max(...d.reservedMax), Math.max(...tl.reservedMax));
      assert.equal(Math.min(...d.allocatedMin), Math.min(...tl.allocatedMin));
      // Every bucket of the full open lies within the first view's (one bucket of slack: the edges are cut alike
      // only up to rounding).
      for (let k = 0; k < d.buckets; k++) {
        const near = (a) => a.slice(Math.max(0, k - 1), k + 2);
        assert.ok(tl.allocatedMax[k] <= Math.max(...near(d.allocatedMax)), `bucket ${k}: allocated max ${tl.allocatedMax[k]} within the first view's`);
        assert.ok(tl.allocatedMin[k] >= Math.min(...near(d.allocatedMin)), `bucket ${k}: allocated min within`);
        assert.ok(tl.reservedMax[k] <= Math.max(...near(d.reservedMax)), `bucket ${k}: reserved max within`);
      }
    }
  } finally {
    m.close();
  }
}

test('the writer ends a clean capture with REC_INDEX and an END that names it; the first view reads it and has the full open\'s figures', async () => {
  const file = simCapture('indexed.gpumem', 40, '--leak', String(2 << 20));
  const buf = fs.readFileSync(file);
  assert.ok(buf.readUInt16LE(10) >= 6, 'format minor 6 or newer (the index is minor 6)');
  const recs = records(buf);
  const end = recs.at(-1);
  assert.equal(end.type, REC_END);
  assert.equal(end.payload.length, 24);
  assert.equal(end.at + 32, buf.length, 'the END is the last 32 bytes');
  const index = recs.at(-2);
  assert.equal(index.type, REC_INDEX);
  assert.equal(end.payload.readUInt32LE(20), 8 + index.payload.length, 'index_bytes: the index record ends where the END begins');
  assert.equal(index.payload.readUInt32LE(0), 1, 'one device');
  for (const buckets of [1, 300, 2048]) {
    const o = await openOverviewAsync(file, buckets);
    assert.equal(o.source, 'index');
    assert.equal(o.complete, true);
    assert.equal(o.devices[0].buckets, buckets);
    assertFiguresOfFullOpen(file, o);
  }
  // The leak makes the peak the last step's: 40 × 2 MiB above the first step's.
  const o = await openOverviewAsync(file, 64);
  const m = openModel(file);
  try {
    assert.equal(o.devices[0].peakAllocatedBytes, m.summary().devices[0].peak_allocated_bytes);
    assert.ok(o.devices[0].peakAllocatedBytes >= 80 * 2 ** 20);
  } finally {
    m.close();
  }
});

test('a capture without an index (an older writer) opens: its first view comes from a pass over the records, with the same figures', async () => {
  const file = simCapture('plain.gpumem', 30);
  const buf = fs.readFileSync(file);
  const recs = records(buf);
  const [index, end] = recs.slice(-2);
  assert.equal(index.type, REC_INDEX);
  // As a minor-5 writer wrote it: no REC_INDEX, a 20-byte END.
  const old = Buffer.concat([buf.subarray(0, index.at), Buffer.from([REC_END, 0, 0, 0, 20, 0, 0, 0]), end.payload.subarray(0, 20)]);
  old.writeUInt16LE(5, 10);
  const oldFile = path.join(tmpDir(), 'minor5.gpumem');
  fs.writeFileSync(oldFile, old);
  const fromIndex = await openOverviewAsync(file, 500);
  const fromScan = await openOverviewAsync(oldFile, 500);
  assert.equal(fromIndex.source, 'index');
  assert.equal(fromScan.source, 'scan');
  assert.equal(fromScan.complete, true);
  assert.deepEqual(fromScan.devices, fromIndex.devices, 'the index and the pass give the same view');
  assertFiguresOfFullOpen(oldFile, fromScan);
  // The full open of the old file is the full open of the new one (the index changes nothing else).
  const a = openModel(file);
  const b = openModel(oldFile);
  try {
    assert.deepEqual(b.summary(), a.summary());
  } finally {
    a.close();
    b.close();
  }
});

test('a truncated capture (the process died mid-write) opens up to the damage, its first view of the records it holds', async () => {
  const file = simCapture('cut.gpumem', 30);
  const buf = fs.readFileSync(file);
  const recs = records(buf);
  const mid = recs[Math.floor(recs.length * 0.6)];
  const cut = path.join(tmpDir(), 'cut-mid-record.gpumem');
  fs.writeFileSync(cut, buf.subarray(0, mid.at + 13)); // inside a record
  const o = await openOverviewAsync(cut, 256);
  assert.equal(o.source, 'scan');
  assert.equal(o.complete, false);
  const whole = await openOverviewAsync(file, 256);
  assert.ok(o.devices[0].events < whole.devices[0].events, `fewer events (${o.devices[0].events}) than the whole capture's (${whole.devices[0].events})`);
  assertFiguresOfFullOpen(cut, o);
  // A cut that leaves the index but not the END: the index is not trusted, the pass reads the records.
  const noEnd = path.join(tmpDir(), 'no-end.gpumem');
  fs.writeFileSync(noEnd, buf.subarray(0, recs.at(-1).at));
  const o2 = await openOverviewAsync(noEnd, 256);
  assert.equal(o2.source, 'scan');
  assert.equal(o2.complete, false);
  assert.deepEqual(o2.devices, whole.devices, 'every event is there; only the END is missing');
});

test('openModelFirstView paints a big capture\'s index first, then the model', async () => {
  const file = simCapture('first-view.gpumem', 20);
  const order = [];
  const m = await openModelFirstView(file, (o) => order.push(['overview', o.source, o.devices[0].events]), 0).then((m) => (order.push(['model']), m));
  try {
    const events = m.summary().devices[0].events;
    assert.deepEqual(order, [['overview', 'index', events], ['model']]);
  } finally {
    m.close();
  }
});
