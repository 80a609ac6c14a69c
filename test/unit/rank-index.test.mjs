// Note [Rank row from the index] (native/addon/src/capture_overview.cpp), Note [Index sections] (gpumem_format.h): a
// rank's row from its capture's index equals the row of a full open, on the real captures of test/fixtures written
// again through the lens writer (test/bench/budget/rebudget.cc with no budget: the same records, and the writer's
// index at the end), on a capture recorded live with a budget, with two devices, and with the tool's own directory in
// the header; a capture without the index (the committed fixtures: older writers) or with the first minor-6 index (no
// sections) still gets its row, from a full open; so does one whose recorder lost events.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { ALLOCATOR_LIB, needsAllocator, openModel, pythonInline, root, tmpDir, captureRecords as records } from './reader-support.mjs';

const { captureIndex, openCaptureIndexAsync } = await import('../../src/core/base/model/open.ts');
const { rankRow, rankRowOf, rankRowOfIndex, rankTable } = await import('../../src/core/analyses/ranks/index.ts');
const { RankSet } = await import('../../src/core/views/ranks/rankSet.ts');

const skip = needsAllocator || (spawnSync('g++', ['--version']).status === 0 ? false : 'needs g++ for rebudget.cc');
const REC_DEVICE = 44;
const REC_INDEX = 49;
const FIXTURES = [
  ...['h100-leaky-convnet', 'h200-e2e-train'].map((n) => path.join(root, 'test/fixtures', `${n}.capture`)),
  ...['oom', 'killed', 'lost', 'rank0', 'rank1', 'writer-failure'].map((n) => path.join(root, 'test/fixtures/sim-captures', `${n}.capture`)),
];

const dir = skip ? '' : tmpDir();
let tool = '';
function run(cmd, args) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 1 << 26 });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed:\n${r.stderr}`);
  return r.stdout;
}

/** `file` written again through the lens writer (rebudget.cc), so it ends with the writer's index. */
function rewritten(file, name = path.basename(file), budget = 0) {
  if (!tool) {
    tool = path.join(dir, 'rebudget');
    const src = path.join(root, 'native/allocator/src');
    run('g++', ['-std=c++17', '-O1', '-o', tool, path.join(root, 'test/bench/budget/rebudget.cc'), path.join(src, 'writer.cc'), path.join(src, 'compactor.cc'), '-lpthread']);
  }
  const out = path.join(dir, name);
  run(tool, [file, out, String(budget)]);
  return out;
}

function write(name, buf) {
  const out = path.join(dir, name);
  fs.writeFileSync(out, buf);
  return out;
}

/** The full open's row. */
function fullRow(file) {
  const m = openModel(file);
  try {
    return rankRowOf(file, m);
  } finally {
    m.close();
  }
}

/** The index's row equals the full open's, and its lines are the summary's top lines. */
function assertRowOfIndex(file) {
  const o = captureIndex(file, 1);
  assert.equal(o?.source, 'index', `${path.basename(file)}: an index`);
  assert.ok(o.row, `${path.basename(file)}: the index carries the row`);
  const fromIndex = rankRowOfIndex(file, o);
  assert.deepEqual(fromIndex, fullRow(file), path.basename(file));
  const m = openModel(file);
  try {
    const lines = m.summary().top_lines;
    assert.equal(o.row.lines, lines.length, 'how many lines there are');
    assert.deepEqual(
      o.row.topLines.map((l) => ({ file: l.file, line: l.line, bytes_at_peak: l.bytesAtPeak })),
      lines.slice(0, 8),
      `${path.basename(file)}: the lines at the peak, in the summary's order`,
    );
  } finally {
    m.close();
  }
  return fromIndex;
}

test('a rank row from the index is the full open\'s, on every fixture capture written again by the writer', { skip }, () => {
  let rows = 0;
  for (const f of FIXTURES) {
    const file = rewritten(f);
    if (path.basename(f) === 'lost.capture') continue; // below
    const row = assertRowOfIndex(file);
    assert.ok(row.peak_allocated_bytes > 0 && row.top_line, `${path.basename(f)}: a peak and a top line`);
    rows++;
  }
  assert.equal(rows, FIXTURES.length - 1);
  // The OOM fixture's OOM and the second rank's device come from the index too.
  assert.equal(rankRowOfIndex('x', captureIndex(path.join(dir, 'oom.capture'), 1)).ooms, 1);
  assert.equal(rankRowOfIndex('x', captureIndex(path.join(dir, 'rank1.capture'), 1)).device, 1);
});

test('a capture whose recorder lost events gets its row from the full open (each loss is a problem the index does not carry)', { skip }, () => {
  const file = rewritten(FIXTURES.find((f) => f.endsWith('lost.capture')));
  const o = captureIndex(file, 1);
  assert.ok(o.row.lostRecords > 0 && o.row.lostEvents > 0);
  assert.equal(rankRowOfIndex(file, o), undefined);
  const row = rankRow(file);
  assert.deepEqual(row, fullRow(file));
  assert.match(row.problems[0], /events were dropped by the recorder/);
});

test('captures without the index (older writers) and with the first minor-6 index (no sections) get their row from a full open', { skip }, async () => {
  const old = FIXTURES.filter((f) => !f.endsWith('lost.capture'));
  for (const f of old) {
    assert.equal(captureIndex(f, 1), undefined, `${path.basename(f)} has no index`);
    assert.equal(await openCaptureIndexAsync(f, 8), undefined);
    assert.deepEqual(rankRow(f), fullRow(f));
  }
  // The index as the first minor-6 writers wrote it: its devices and buckets, no sections.
  const file = rewritten(FIXTURES[0], 'sections.capture');
  const buf = fs.readFileSync(file);
  const [index, end] = records(buf).slice(-2);
  assert.equal(index.type, REC_INDEX);
  const p = index.payload;
  const [ndevices, deviceBytes, bucketBytes] = [p.readUInt32LE(0), p.readUInt16LE(4), p.readUInt16LE(6)];
  let pos = 16;
  for (let k = 0; k < ndevices; k++) pos += deviceBytes + p.readUInt32LE(pos + 4) * bucketBytes;
  assert.ok(pos < p.length, 'the writer wrote sections after the devices');
  const head = Buffer.from([REC_INDEX, 0, 0, 0, 0, 0, 0, 0]);
  head.writeUInt32LE(pos, 4);
  const endRec = Buffer.concat([buf.subarray(end.at, end.at + 8), Buffer.from(end.payload)]);
  endRec.writeUInt32LE(8 + pos, 8 + 20);
  const bare = write('no-sections.capture', Buffer.concat([buf.subarray(0, index.at), head, p.subarray(0, pos), endRec]));
  const o = captureIndex(bare, 1);
  assert.equal(o.source, 'index', 'the index itself still reads');
  assert.equal(o.row, undefined);
  assert.equal(rankRowOfIndex(bare, o), undefined);
  assert.deepEqual(rankRow(bare), fullRow(bare));
  // The ranks view over old and new captures alike: the same rows as with every rank opened in full.
  const mixed = [old[0], old[1], path.join(dir, 'rank0.capture'), path.join(dir, 'rank1.capture'), bare];
  const viaIndex = await RankSet.open(mixed, { title: 'mixed' });
  const viaOpen = await RankSet.open(mixed, { title: 'mixed', useIndex: false });
  assert.equal(viaIndex.fromIndex, 2);
  assert.equal(viaOpen.fromIndex, 0);
  const rowOf = ({ allocatedMax: _a, reservedMax: _r, ...r }) => r;
  assert.deepEqual(viaIndex.view().ranks.map(rowOf), viaOpen.view().ranks.map(rowOf));
  assert.deepEqual(viaIndex.view().sentences, viaOpen.view().sentences);
  assert.deepEqual(rankTable(mixed), viaOpen.table);
});

test('the ranks view from the indexes draws what the full opens draw: the same rows, marks, range and peaks', { skip }, async () => {
  const files = ['rank0', 'rank1', 'oom'].map((n) => path.join(dir, `${n}.capture`));
  for (const f of files) if (!fs.existsSync(f)) rewritten(FIXTURES.find((x) => x.endsWith(`${path.basename(f)}`)));
  const a = await RankSet.open(files, { title: 't' });
  const b = await RankSet.open(files, { title: 't', useIndex: false });
  assert.equal(a.fromIndex, 3);
  const va = a.view();
  const vb = b.view();
  assert.deepEqual([va.t0Us, va.t1Us], [vb.t0Us, vb.t1Us]);
  for (const [k, r] of va.ranks.entries()) {
    const s = vb.ranks[k];
    assert.deepEqual(r.marks, s.marks);
    assert.equal(Math.max(...r.allocatedMax), Math.max(...s.allocatedMax), `rank ${r.rank}: the peak is drawn`);
    assert.equal(Math.max(...r.reservedMax), Math.max(...s.reservedMax));
    // The index's buckets are an envelope of the full open's: each drawn bucket within one bucket of the other's.
    for (let i = 0; i < r.allocatedMax.length; i++) {
      const near = (xs) => Math.max(...xs.slice(Math.max(0, i - 1), i + 2));
      assert.ok(s.allocatedMax[i] <= near(r.allocatedMax), `rank ${r.rank} bucket ${i}`);
      assert.ok(r.allocatedMax[i] <= near(s.allocatedMax), `rank ${r.rank} bucket ${i}`);
    }
  }
});

test('a capture recorded live with a budget: the index (of the records as written) gives the compacted file\'s row', { skip }, () => {
  const file = path.join(dir, 'budgeted.gpumem');
  run('python3', [path.join(root, 'test/bench/budget/gen_stream.py'), ALLOCATOR_LIB, file, '200000', String(2 << 20)]);
  const m = openModel(file);
  try {
    assert.ok(m.fileInfo().aggregated.length > 0, 'compacted');
  } finally {
    m.close();
  }
  assertRowOfIndex(file);
});

test('two devices: the lines at each device\'s own peak, summed, as the full open ranks them', { skip }, () => {
  // The H100 fixture's records, with its first half's block and segment events (and its REC_DEVICE) repeated on
  // device 1: device 1 peaks earlier, at its own moment.
  const buf = fs.readFileSync(FIXTURES[0]);
  const recs = records(buf);
  const json = buf.readUInt32LE(12);
  const parts = [buf.subarray(0, 16 + json)];
  const events = recs.filter((r) => r.type >= 10 && r.type <= 16);
  const half = events[Math.floor(events.length / 2)].at;
  for (const r of recs) {
    const whole = buf.subarray(r.at, r.at + 8 + r.payload.length);
    parts.push(whole);
    if ((r.type >= 10 && r.type <= 16 && r.at < half) || r.type === REC_DEVICE) {
      const copy = Buffer.from(whole);
      copy[1] = 1;
      parts.push(copy);
    }
  }
  const file = rewritten(write('two-devices-source.capture', Buffer.concat(parts)), 'two-devices.capture');
  const o = captureIndex(file, 1);
  assert.deepEqual(o.row.devices.filter((d) => d.events > 0).map((d) => d.device), [0, 1]);
  const [d0, d1] = o.row.devices;
  assert.ok(d1.peakAllocatedBytes > 0 && d1.peakAllocatedBytes !== d0.peakAllocatedBytes, 'the devices peak apart');
  assertRowOfIndex(file);
});

test('the header\'s own directories are never the top line, in the index as in the full open', { skip }, () => {
  const src = rewritten(FIXTURES[0], 'plain.capture');
  const top = rankRowOfIndex(src, captureIndex(src, 1)).top_line.file;
  // The fixture's script directory named as the tool's own (bootstrap_dir): its lines are no longer the user's.
  const buf = fs.readFileSync(FIXTURES[0]);
  const json = buf.readUInt32LE(12);
  const header = JSON.parse(buf.subarray(16, 16 + json).toString('utf8'));
  header.bootstrap_dir = path.dirname(top);
  const text = Buffer.from(JSON.stringify(header), 'utf8');
  const fh = Buffer.from(buf.subarray(0, 16));
  fh.writeUInt32LE(text.length, 12);
  const file = rewritten(write('own-dir-source.capture', Buffer.concat([fh, text, buf.subarray(16 + json)])), 'own-dir.capture');
  const row = assertRowOfIndex(file);
  assert.notEqual(row.top_line.file, top);
});

// Figures only (Note [Figures from stats] in native/addon/src/model.h): a rank recorded with --figures-only (or under
// the cudaMallocAsync backend) has no event, only REC_STATS samples; its row takes its peaks from them, in the full
// open as from the index, so the ranks table compares such ranks instead of showing 0 for each.
function figuresOnlyCapture(name, rank, samples) {
  const file = path.join(dir, `${name}.raw`);
  pythonInline(
    `import json, sys
sys.path.insert(0, sys.argv[3])
from gpumem import _format as F
spec = json.loads(sys.argv[2])
head = json.dumps({"events": False, "allocator_mode": "pytorch", "rank": spec["rank"], "world_size": 2}).encode()
out = F.FileHeader.pack(F.kMagic, F.kMajor, F.kMinor, len(head)) + head
for t, a, r, pa, pr in spec["samples"]:
    out += F.record(F.REC_STATS, F.StatsRec.pack(t, a, r, a, a, pa, pr, 0, 0))
out += F.record(F.REC_END, F.EndRec.pack(spec["samples"][-1][0] + 1000, 0, 0, 0, 0))
open(sys.argv[1], "wb").write(out)
`,
    file,
    JSON.stringify({ rank, samples }),
    path.join(root, 'native/python'),
  );
  return rewritten(file, `${name}.capture`);
}

test('figures-only ranks get their peaks from their samples, in the index as in the full open, and are compared', { skip }, () => {
  const MiB = 2 ** 20;
  const T = 5_000_000_000;
  // allocated, reserved, peak allocated, peak reserved; rank 1 peaks 2 GiB above rank 0
  const r0 = figuresOnlyCapture('figures-rank0', 0, [[T, 100 * MiB, 512 * MiB, 100 * MiB, 512 * MiB], [T + 1e8, 200 * MiB, 1024 * MiB, 900 * MiB, 1024 * MiB]]);
  const r1 = figuresOnlyCapture('figures-rank1', 1, [[T, 100 * MiB, 512 * MiB, 100 * MiB, 512 * MiB], [T + 1e8, 300 * MiB, 4096 * MiB, 2948 * MiB, 4096 * MiB]]);
  // The writer's index has no row for a capture without events: the row comes from a full open (Note [Rank row from
  // the index]); where an index row exists it must agree.
  const rows = [r0, r1].map((f) => {
    const o = captureIndex(f, 1);
    if (o?.row) assert.deepEqual(rankRowOfIndex(f, o), fullRow(f));
    assert.deepEqual(rankRow(f), fullRow(f));
    return rankRow(f);
  });
  assert.deepEqual(rows.map((r) => [r.rank, r.peak_allocated_bytes, r.peak_reserved_bytes, r.top_line]), [
    [0, 900 * MiB, 1024 * MiB, null],
    [1, 2948 * MiB, 4096 * MiB, null],
  ]);
  const table = rankTable([r0, r1]);
  assert.deepEqual(table.ranks.map((r) => [r.rank, r.flag, r.apart_bytes]), [[0, null, 0], [1, 'high', 2048 * MiB]]);
});
