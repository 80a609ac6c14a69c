// The native reader on our capture files (native/format/gpumem_format.h): captures written with
// struct.pack by test/unit/reference/make_capture.py, checked against the twin pickle it writes for the
// same simulated run.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { captureRecords as records, isPeriodicRecord, makeCapture, openModel, python, root, tmpDir } from './reader-support.mjs';

const EVENT_TYPES = new Set([10, 11, 12, 13, 14, 15, 16, 21]);
// One past the format minor this reader knows (gpumem_format.h's kMinor): a capture from a newer writer.
const HEADER_H = fs.readFileSync(new URL('../../native/format/gpumem_format.h', import.meta.url), 'utf8');
const NEWER_MINOR = Number(HEADER_H.match(/kMinor = (\d+);/)[1]) + 1;

const eventsBefore = (recs, offset) => recs.filter((r) => r.end <= offset && EVENT_TYPES.has(r.type)).length;
const events = (m) => m.summary().devices.reduce((a, d) => a + d.events, 0);

test('header, markers and device samples of a capture', () => {
  const { cap } = makeCapture(tmpDir(), 'h', '--events', 500);
  const m = openModel(cap);
  const h = m.header();
  assert.equal(h.pid, 4242);
  assert.equal(h.host, 'testhost');
  assert.deepEqual(h.devices, [{ index: 0, name: 'Simulated GPU', totalBytes: 80 * 2 ** 30 }]);
  assert.equal(m.format, 'gpumem-capture');
  assert.ok(m.ended());
  assert.deepEqual(
    m.markers(0).filter((k) => k.kind === 'user').map((k) => k.label),
    ['halfway'],
  );
  assert.equal(m.current(0).deviceUsedBytes, 3 * 2 ** 30);
  // The one device sample lands in exactly one timeline bucket; the others have none (NaN).
  const { t0Us, t1Us } = m.timeRange(0);
  const used = m.timeline(0, t0Us, t1Us, 50).deviceUsedMax;
  assert.deepEqual(used.filter((v) => !Number.isNaN(v)), [3 * 2 ** 30]);
  m.close();
});

test('state and timeline of a capture replay forward like the twin pickle replays', () => {
  const { cap, twin } = makeCapture(tmpDir(), 's', '--events', 3000, '--seed', 3, '--no-state');
  const m = openModel(cap);
  const { t0Us, t1Us } = m.timeRange(0);
  const times = Array.from({ length: 9 }, (_, k) => Math.round(t0Us + ((t1Us - t0Us) * k) / 8));
  const expected = python('replay_reference.py', 'series', twin, ...times);
  times.forEach((t, k) => {
    const f = m.stateAt(0, t).fragmentation;
    assert.deepEqual([f.allocatedBytes, f.reservedBytes], [expected[k].allocated, expected[k].reserved], `at ${t}`);
  });
  const tl = m.timeline(0, t0Us, t1Us, 30);
  const buckets = python('replay_reference.py', 'buckets', twin, t0Us, t1Us, 30);
  assert.deepEqual(tl.allocatedMax, buckets.allocatedMax);
  assert.deepEqual(tl.allocatedMin, buckets.allocatedMin);
  // Backward stacks: train.py:33 is only reached by the backward stack, so all its bytes are backward.
  const line33 = m.lineStats(0).find((s) => s.line === 33);
  assert.ok(line33.selfBytesAtPeak > 0);
  assert.equal(line33.backwardBytesAtPeak, line33.selfBytesAtPeak);
  assert.equal(m.stack(line33.topStacks[0].stackId).backward, true);
  m.close();
});

test('a capture exports to a pickle whose reference summary is the capture summary', () => {
  const dir = tmpDir();
  const { cap } = makeCapture(dir, 'e', '--events', 2000, '--seed', 5);
  const out = path.join(dir, 'e-export.pickle');
  const m = openModel(cap);
  m.exportPickle(out);
  const summary = m.summary();
  m.close();
  assert.deepEqual({ ...python('snapshot_summary.py', out), format: 'gpumem-capture' }, summary);
  const again = openModel(out);
  assert.deepEqual({ ...again.summary(), format: 'gpumem-capture' }, summary);
  again.close();
});

test('live tail: a record cut in half waits for the next poll; only new bytes are decoded', () => {
  const dir = tmpDir();
  const { cap, twin } = makeCapture(dir, 'live', '--events', 3000, '--seed', 11);
  const full = fs.readFileSync(cap);
  const recs = records(full);
  const mid = recs[Math.floor(recs.length / 2)];
  const cut = mid.offset + 5; // inside a record header
  const growing = path.join(dir, 'growing.gpumem');
  fs.writeFileSync(growing, full.subarray(0, 10)); // not even the whole file header yet
  const m = openModel(growing);
  assert.equal(events(m), 0);
  assert.deepEqual(m.header().devices, [], 'no header yet');
  fs.appendFileSync(growing, full.subarray(10, cut));
  const first = m.poll();
  assert.equal(m.header().pid, 4242, 'the header arrived with the second write');
  // poll counts records, the header as one, not device samples and stats (Note [Poll counts records]); the cut
  // record is not one yet
  const counted = (rs) => rs.filter((r) => !isPeriodicRecord(r)).length;
  const whole = recs.indexOf(mid);
  assert.equal(first, 1 + counted(recs.slice(0, whole)));
  assert.equal(events(m), eventsBefore(recs, cut));
  assert.match(m.problems().at(-1).message, new RegExp(`incomplete record at byte ${mid.offset} \\(5 bytes\\)`));
  assert.equal(m.ended(), false);
  assert.equal(m.poll(), 0, 'nothing new');
  fs.appendFileSync(growing, full.subarray(cut));
  const second = m.poll();
  assert.equal(second, counted(recs.slice(whole)));
  assert.equal(events(m), recs.filter((r) => EVENT_TYPES.has(r.type)).length);
  assert.equal(m.ended(), true);
  assert.deepEqual(m.problems(), []);
  assert.deepEqual(m.summary(), { ...python('snapshot_summary.py', twin), format: 'gpumem-capture' });
  m.close();
});

test('live tail: markers read before a poll are read again after it (Note [Marker cache]); callers get their own copies', () => {
  const dir = tmpDir();
  const { cap } = makeCapture(dir, 'livemk', '--events', 500);
  const whole = openModel(cap);
  const all = whole.markers(0);
  whole.close();
  assert.deepEqual(
    all.map((k) => k.label),
    ['halfway'],
  );
  const full = fs.readFileSync(cap);
  // Cut right before the user marker 'halfway' (REC_MARKER = 41): the first read has no marker yet.
  const marker = records(full).find((r) => r.type === 41);
  const growing = path.join(dir, 'growing-markers.gpumem');
  fs.writeFileSync(growing, full.subarray(0, marker.offset));
  const m = openModel(growing);
  assert.deepEqual(m.markers(0), []);
  // The marker alone: no event came, and poll still says something did (the live panel pushes on > 0).
  const eventCount = events(m);
  fs.appendFileSync(growing, full.subarray(marker.offset, marker.end));
  assert.equal(m.poll(), 1);
  assert.equal(events(m), eventCount);
  fs.appendFileSync(growing, full.subarray(marker.end));
  assert.ok(m.poll() > 0);
  const after = m.markers(0);
  assert.deepEqual(after, all);
  after[0].label = 'changed by a caller';
  after.push({ ...all[0], label: 'added by a caller' });
  assert.deepEqual(m.markers(0), all, 'a caller changing its markers changes no one else’s');
  m.close();
});

test('live tail: a device sample or stats record alone is not a change; the next allocator record is (Note [Poll counts records])', () => {
  // the sim fixture's rank 0: real allocator records with device samples (40) and stats (43) between them
  const cap = path.join(root, 'test/fixtures/sim-captures/rank0.capture');
  const full = fs.readFileSync(cap);
  const recs = records(full);
  const i = recs.findIndex((r, k) => k > 0 && isPeriodicRecord(r) && recs[k + 1] && !isPeriodicRecord(recs[k + 1]));
  assert.ok(i > 0, 'the fixture has a sample or stats record followed by an allocator record');
  const growing = path.join(tmpDir(), 'growing-samples.gpumem');
  fs.writeFileSync(growing, full.subarray(0, recs[i].offset));
  const m = openModel(growing);
  try {
    fs.appendFileSync(growing, full.subarray(recs[i].offset, recs[i].end));
    assert.equal(m.poll(), 0, `a record of type ${recs[i].type} alone`);
    fs.appendFileSync(growing, full.subarray(recs[i + 1].offset, recs[i + 1].end));
    assert.equal(m.poll(), 1, `the record of type ${recs[i + 1].type} after it`);
  } finally {
    m.close();
  }
});

test('a damaged record stops decoding with its offset; every event before it is kept', () => {
  const dir = tmpDir();
  const { cap } = makeCapture(dir, 'dmg', '--events', 1000, '--seed', 2);
  const buf = Buffer.from(fs.readFileSync(cap));
  const recs = records(buf);
  const bad = recs[Math.floor(recs.length * 0.6)];
  buf.writeUInt32LE(0xffffffff, bad.offset + 4);
  const file = path.join(dir, 'damaged.gpumem');
  fs.writeFileSync(file, buf);
  const m = openModel(file);
  const [problem] = m.problems();
  assert.equal(problem.offset, bad.offset);
  assert.match(problem.message, new RegExp(`damaged at byte ${bad.offset}.*${buf.length - bad.offset} bytes after it were not read`));
  assert.equal(events(m), eventsBefore(recs, bad.offset));
  assert.equal(m.ended(), false);
  m.close();
});

test('unknown record types (a newer minor version) are skipped by length', () => {
  const dir = tmpDir();
  const { cap, twin } = makeCapture(dir, 'minor', '--events', 800, '--seed', 4);
  const buf = fs.readFileSync(cap);
  const recs = records(buf);
  const at = recs[10].offset;
  const extra = Buffer.alloc(8 + 12);
  extra[0] = 99;
  extra.writeUInt32LE(12, 4);
  const file = path.join(dir, 'newer-minor.gpumem');
  const newer = Buffer.concat([buf.subarray(0, at), extra, buf.subarray(at)]);
  newer.writeUInt16LE(NEWER_MINOR, 10); // written by a newer minor version, which may add record types
  fs.writeFileSync(file, newer);
  const m = openModel(file);
  assert.deepEqual(m.problems(), []);
  assert.deepEqual(m.summary(), { ...python('snapshot_summary.py', twin), format: 'gpumem-capture' });
  m.close();
});

test('an unknown record type in a capture of our own version is damage, named by offset and type (Note [Strict about our own writer])', () => {
  const dir = tmpDir();
  const { cap } = makeCapture(dir, 'strict', '--events', 800, '--seed', 4);
  const buf = fs.readFileSync(cap);
  const recs = records(buf);
  const at = recs[10].offset;
  const extra = Buffer.alloc(8 + 12);
  extra[0] = 99;
  extra.writeUInt32LE(12, 4);
  const file = path.join(dir, 'unknown-type.gpumem');
  const damaged = Buffer.concat([buf.subarray(0, at), extra, buf.subarray(at)]);
  assert.ok(damaged.readUInt16LE(10) <= NEWER_MINOR - 1, 'make_capture writes a minor this reader knows');
  fs.writeFileSync(file, damaged);
  const m = openModel(file);
  const [problem, ...rest] = m.problems();
  assert.deepEqual(rest, []);
  assert.equal(problem.offset, at);
  assert.match(problem.message, new RegExp(`damaged at byte ${at}: record type 99 is not one that format 1\\.1 defines \\(12-byte payload\\).*${damaged.length - at} bytes from there on were not read`));
  // What precedes the damage is still read (the truncated-capture rule).
  assert.equal(events(m), eventsBefore(recs, at));
  assert.equal(m.ended(), false);
  m.close();
});

test('a newer major version and a foreign file are refused with what to do', () => {
  const dir = tmpDir();
  const { cap } = makeCapture(dir, 'major', '--events', 10);
  const buf = Buffer.from(fs.readFileSync(cap));
  buf.writeUInt16LE(2, 8);
  buf.writeUInt16LE(0, 10);
  const newer = path.join(dir, 'newer.gpumem');
  fs.writeFileSync(newer, buf);
  assert.throws(() => openModel(newer), /uses format 2\.0, newer than this version of GPU Memory Lens understands \(1\.x\); update the extension/);
  buf.write('GPUMEMXX', 0, 'latin1');
  const foreign = path.join(dir, 'foreign.gpumem');
  fs.writeFileSync(foreign, buf);
  assert.throws(() => openModel(foreign), /not a GPU Memory Lens capture/);
});
