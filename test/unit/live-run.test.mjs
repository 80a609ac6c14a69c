// The live run (src/core/views/live, LiveRun): discovering processes in a session folder laid out per the
// contract in native/python/README.md, opening and tailing their captures, and the figures views get.
// The Model is a small scripted stand-in here, but for one test on a real capture (the real reader is tested by
// its own layer; the E2E test runs this code against real captures).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { LiveRun, figuresOf, seriesOf } from '../../src/core/views/live/index.ts';
import { scanSessionFolder } from '../../src/core/base/sessionFolder/processes.ts';

const MiB = 1024 * 1024;

function tmpSession() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpumem-session-'));
  return dir;
}

/** A scripted Model: `events` per poll() call; figures from the current step. */
class FakeModel {
  constructor(capture, steps) {
    this.path = capture;
    this.format = 'gpumem-capture';
    this.steps = steps; // [{allocated, reserved, used?, ooms?, ended?}]
    this.i = 0;
    this.closed = false;
  }
  header() { return { devices: [{ index: 0, name: 'Sim GPU', totalBytes: 8 * 1024 * MiB }] }; }
  devices() { return [0]; }
  problems() { return []; }
  // A capture recorded in full (no compacted ranges, Note [Capture budget]).
  fileInfo() { return { originUs: 1_000_000, lastUs: null, devices: [], recordDevices: [0], end: null, lostEvents: 0, firstLostUs: null, aggregated: [] }; }
  poll() {
    if (this.i >= this.steps.length - 1) return 0;
    this.i++;
    return 5;
  }
  get step() { return this.steps[this.i]; }
  ended() { return !!this.step.ended; }
  endRecord() { return this.step.ended ? { reason: 0, exitCode: 0, message: '' } : null; }
  timeRange() { return { t0Us: 1_000_000, t1Us: 1_000_000 + 1000 * (this.i + 1) }; }
  current() {
    const s = this.step;
    const c = { allocatedBytes: s.allocated, reservedBytes: s.reserved, peakAllocatedBytes: s.allocated, peakReservedBytes: s.reserved, timeUs: 0 };
    // As the reader answers (Note [Device samples of a moment]): the latest sample with its own reserved (`sampled`,
    // reserved now unless given), and device used only where that sample is of now (reserved has not changed since).
    if (s.used !== undefined) {
      const sampled = s.sampled ?? s.reserved;
      c.deviceSample = { timeUs: 0, usedBytes: s.used, reservedBytes: sampled };
      if (sampled === s.reserved) c.deviceUsedBytes = s.used;
      c.deviceTotalBytes = 8 * 1024 * MiB;
    }
    return c;
  }
  timeline(device, t0Us, t1Us, buckets) {
    const a = [], r = [], u = [];
    for (let k = 0; k < buckets; k++) { a.push(k * MiB); r.push(2 * k * MiB); u.push(NaN); }
    return { device, t0Us, t1Us, buckets, allocatedMin: a, allocatedMax: a, reservedMin: r, reservedMax: r, deviceUsedMax: u };
  }
  markers() { return [{ device: 0, timeUs: 1_000_500, kind: 'empty_cache', label: 'empty_cache' }]; }
  ooms() { return this.step.ooms ?? []; }
  stack() { return undefined; }
  close() { this.closed = true; }
}

test('scan: proc files give socket and rank; a capture without a proc file is listed without a socket', () => {
  const dir = tmpSession();
  fs.writeFileSync(path.join(dir, 'proc-200.json'), JSON.stringify({ version: 1, pid: 200, rank: 1, capture: path.join(dir, 'capture-200.gpumem'), socket: '/tmp/gpumem-0/abc-200.sock' }));
  fs.writeFileSync(path.join(dir, 'proc-100.json'), JSON.stringify({ version: 1, pid: 100, rank: 0, capture: path.join(dir, 'capture-100.gpumem'), socket: null }));
  fs.writeFileSync(path.join(dir, 'capture-100.gpumem'), '');
  fs.writeFileSync(path.join(dir, 'capture-300.gpumem'), '');
  fs.writeFileSync(path.join(dir, 'proc-400.json'), '{"pid": 4'); // being written: skipped this time
  fs.writeFileSync(path.join(dir, 'notes.txt'), 'x');
  const procs = scanSessionFolder(dir);
  assert.deepEqual(procs, [
    { pid: 100, rank: 0, capture: path.join(dir, 'capture-100.gpumem') },
    { pid: 200, rank: 1, capture: path.join(dir, 'capture-200.gpumem'), socket: '/tmp/gpumem-0/abc-200.sock' },
    { pid: 300, capture: path.join(dir, 'capture-300.gpumem') },
  ]);
  assert.deepEqual(scanSessionFolder(path.join(dir, 'missing')), []);
});

test('refresh: retries opening until the capture is readable, then tails it and reports each OOM once', () => {
  const dir = tmpSession();
  const capture = path.join(dir, 'capture-7.gpumem');
  fs.writeFileSync(path.join(dir, 'proc-7.json'), JSON.stringify({ pid: 7, rank: 0, capture, socket: path.join(dir, 'ctl-7.sock') }));
  const oom = { device: 0, timeUs: 5, requestedBytes: 64 * MiB, deviceFreeBytes: 0, deviceTotalBytes: 0, reservedBytes: 0, allocatedBytes: 0, largestFreeBlockBytes: 0, verdict: 'shortage', stackId: 0 };
  const model = new FakeModel(capture, [
    { allocated: 0, reserved: 0 },
    { allocated: 10 * MiB, reserved: 20 * MiB, used: 600 * MiB },
    { allocated: 10 * MiB, reserved: 20 * MiB, used: 600 * MiB, ooms: [oom] },
    { allocated: 0, reserved: 0, ooms: [oom], ended: true },
  ]);
  let opens = 0;
  const run = new LiveRun(dir, (p) => {
    opens++;
    if (opens === 1) throw new Error('capture header not written yet');
    assert.equal(p, capture);
    return model;
  });
  let r = run.refresh();
  assert.equal(r.changed, true); // the process appeared
  assert.equal(run.processes[0].openError, 'capture header not written yet');
  assert.match(run.view(10).problems[0], /pid 7: capture header not written yet/);
  r = run.refresh(); // opens, polls step 1
  assert.equal(r.changed, true);
  assert.deepEqual(run.totals(), { allocatedBytes: 10 * MiB, reservedBytes: 20 * MiB, processes: 1 });
  assert.equal(r.newOoms.length, 0);
  r = run.refresh();
  assert.equal(r.newOoms.length, 1);
  assert.equal(r.newOoms[0].oom.requestedBytes, 64 * MiB);
  assert.equal(r.newOoms[0].process.entry.pid, 7);
  r = run.refresh();
  assert.equal(r.newOoms.length, 0, 'an OOM is reported once');
  assert.equal(run.controllable().length, 0, 'an ended capture takes no commands');
  r = run.refresh();
  assert.equal(r.changed, false, 'nothing appended, nothing changed');
  run.close();
  assert.equal(model.closed, true);
});

test('figures: the unattributed remainder is device used − reserved, present only with device samples', () => {
  const m = new FakeModel('/x', [{ allocated: 10 * MiB, reserved: 30 * MiB, used: 530 * MiB }]);
  const f = figuresOf(m, 0);
  assert.equal(f.unattributedBytes, 500 * MiB);
  assert.equal(f.deviceUsedBytes, 530 * MiB);
  const noSamples = figuresOf(new FakeModel('/x', [{ allocated: 1, reserved: 2 }]), 0);
  assert.equal(noSamples.unattributedBytes, undefined);
  assert.equal(noSamples.deviceUsedBytes, undefined);
  assert.equal(noSamples.deviceUsedPending, undefined);
  // the last sample was read before reserved grew past its device used: the remainder is that sample's own (used −
  // its reserved), and device used waits for the next sample rather than read below the reserved beside it
  const before = figuresOf(new FakeModel('/x', [{ allocated: 1, reserved: 100, sampled: 40, used: 50 }]), 0);
  assert.equal(before.unattributedBytes, 10);
  assert.equal(before.deviceUsedBytes, undefined);
  assert.equal(before.deviceUsedPending, true);
});

test('series: one point per bucket in epoch seconds, max values, NaN → null', () => {
  const m = new FakeModel('/x', [{ allocated: 0, reserved: 0 }]); // range 1.000000 s .. 1.001000 s
  const s = seriesOf(m, 0, 4);
  assert.deepEqual(s.t, [1.0, 1.00025, 1.0005, 1.00075]);
  assert.deepEqual(s.allocated, [0, MiB, 2 * MiB, 3 * MiB]);
  assert.deepEqual(s.reserved, [0, 2 * MiB, 4 * MiB, 6 * MiB]);
  assert.deepEqual(s.deviceUsed, [null, null, null, null]);
});

test('view: one track per (process, device) with label, figures and markers in seconds', () => {
  const dir = tmpSession();
  for (const [pid, rank] of [[11, 0], [12, 1]]) {
    fs.writeFileSync(path.join(dir, `proc-${pid}.json`), JSON.stringify({ pid, rank, capture: path.join(dir, `capture-${pid}.gpumem`), socket: path.join(dir, `ctl-${pid}.sock`) }));
  }
  const run = new LiveRun(dir, (p) => new FakeModel(p, [{ allocated: MiB, reserved: 2 * MiB }]));
  run.refresh();
  const v = run.view(3);
  assert.equal(v.name, path.basename(dir));
  assert.deepEqual(v.tracks.map((t) => [t.key, t.label]), [
    ['11/0', 'rank 0 · cuda:0 Sim GPU · pid 11'],
    ['12/0', 'rank 1 · cuda:0 Sim GPU · pid 12'],
  ]);
  assert.deepEqual(v.tracks[0].markers, [{ t: 1.0005, kind: 'empty_cache', label: 'empty_cache' }]);
  assert.equal(v.tracks[0].series.t.length, 3);
  assert.equal(v.running, true);
  run.running = false;
  assert.equal(run.view(3).running, false);
  assert.equal(run.view(3).tracks[0].running, false);
});

test('view: the chart origin is the earliest first event over every process and device; none before any event', () => {
  const dir = tmpSession();
  const starts = { 21: 7_250_000, 22: 7_000_000 }; // rank 1 allocated first
  for (const [pid, rank] of [[21, 0], [22, 1]]) {
    fs.writeFileSync(path.join(dir, `proc-${pid}.json`), JSON.stringify({ pid, rank, capture: path.join(dir, `capture-${pid}.gpumem`), socket: null }));
  }
  let empty = true;
  const run = new LiveRun(dir, (p) => {
    const m = new FakeModel(p, [{ allocated: MiB, reserved: 2 * MiB }]);
    const t0 = starts[Number(/capture-(\d+)/.exec(p)[1])];
    // the reader answers 0..0 for a device with no event yet
    m.timeRange = () => (empty ? { t0Us: 0, t1Us: 0 } : { t0Us: t0, t1Us: t0 + 2_000_000 });
    return m;
  });
  run.refresh();
  assert.equal(run.view(3).originS, undefined);
  empty = false;
  assert.equal(run.view(3).originS, 7.0);
});

test('markers: OOMs of the device join the model markers once, in time order', async () => {
  const { markersOf } = await import('../../src/core/views/live/index.ts');
  const oom = (device, timeUs) => ({ device, timeUs, requestedBytes: 1, deviceFreeBytes: 0, deviceTotalBytes: 0, reservedBytes: 0, allocatedBytes: 0, largestFreeBlockBytes: 0, verdict: 'shortage', stackId: 0 });
  const m = new FakeModel('/x', [{ allocated: 0, reserved: 0, ooms: [oom(0, 1_000_200), oom(1, 1_000_300), oom(0, 1_000_900)] }]);
  assert.deepEqual(markersOf(m, 0), [
    { t: 1.0002, kind: 'oom', label: 'OOM' },
    { t: 1.0005, kind: 'empty_cache', label: 'empty_cache' },
    { t: 1.0009, kind: 'oom', label: 'OOM' },
  ]);
  // a reader that already reports the OOM as a marker does not get it twice
  m.markers = () => [{ device: 0, timeUs: 1_000_200, kind: 'oom', label: 'oom' }];
  assert.deepEqual(markersOf(m, 0).map((x) => x.label), ['oom', 'OOM']);
});

test('refresh on a real capture: a device sample alone is a change for the charts but not a new record (Note [Poll counts records])', async () => {
  const { captureRecords, isPeriodicRecord: periodic, openModel, root } = await import('./reader-support.mjs');
  const full = fs.readFileSync(path.join(root, 'test/fixtures/sim-captures/rank0.capture'));
  const recs = captureRecords(full);
  const i = recs.findIndex((r, k) => k > 0 && r.type === 40 /* REC_DEVICE_SAMPLE */ && recs.slice(k + 1).some((x) => !periodic(x)));
  assert.ok(i > 0, 'the fixture has a device sample with an allocator record after it');
  const j = recs.findIndex((r, k) => k > i && !periodic(r)); // the samples and stats i..j-1, then an allocator record
  const dir = tmpSession();
  const capture = path.join(dir, 'capture-9.gpumem');
  fs.writeFileSync(capture, full.subarray(0, recs[i].offset));
  const run = new LiveRun(dir, openModel);
  try {
    run.refresh(); // the process appears and its capture opens
    const p = run.processes[0];
    assert.equal(run.refresh().changed, false, 'nothing appended');
    const records = p.records;
    fs.appendFileSync(capture, full.subarray(recs[i].offset, recs[j].offset));
    assert.equal(run.refresh().changed, true, 'the sample moves the device-used line');
    assert.equal(p.records, records, 'and is no allocator record: the categories are not recomputed for it');
    assert.equal(run.refresh().changed, false);
    fs.appendFileSync(capture, full.subarray(recs[j].offset, recs[j].end));
    assert.equal(run.refresh().changed, true);
    assert.equal(p.records, records + 1);
  } finally {
    run.close();
  }
});
