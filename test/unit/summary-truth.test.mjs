// Summaries tell the truth about identity, time, devices, integrity and OOMs. Every expectation is
// read from the same fixture bytes by an independent reader (reference/capture_facts.py, spec-only).
// Fixtures: test/fixtures/sim-captures/ (made by the real writer on the simulated device; see its script).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { makeCapture, openModel, python, pythonInline, root, tmpDir } from './reader-support.mjs';
import { formatBytes } from '../../src/core/base/units/bytes.ts';
import { summaryDocument, summarizeFile } from '../../src/core/analyses/summary/index.ts';
import { makeTimeBase } from '../../src/core/analyses/steps/timebase.ts';
import { verdictOf } from '../../src/core/analyses/verdicts/verdictOf.ts';
import { buildMarkers } from '../../src/core/views/snapshot/summaryView.ts';
import { OpenedCapture } from '../../src/core/views/snapshot/openedCapture.ts';

const SIM = path.join(root, 'test/fixtures/sim-captures');
const fixture = (name) => path.join(SIM, `${name}.capture`);
const facts = (name) => python('capture_facts.py', fixture(name));
const seconds = (us, origin) => Math.round(us - origin) / 1e6;
/** The step by Note [Steps] rule 0 (numbered markers), computed here from the raw markers. */
const stepAt = (markers, us) => {
  let step = null;
  for (const m of markers) {
    const hit = /^step (\d+)$/.exec(m.label);
    if (hit && m.time_us <= us) step = Number(hit[1]);
  }
  return step;
};

function doc(name) {
  const m = openModel(fixture(name));
  try {
    return summaryDocument(m);
  } finally {
    m.close();
  }
}

test('identity: each rank of a 2-rank run names its rank, world size, pid, host and GPU', () => {
  for (const rank of [0, 1]) {
    const f = facts(`rank${rank}`);
    const d = doc(`rank${rank}`);
    assert.deepEqual(
      { rank: d.identity.rank, local_rank: d.identity.local_rank, world_size: d.identity.world_size, pid: d.identity.pid, host: d.identity.host },
      { rank: f.rank, local_rank: f.local_rank, world_size: f.world_size, pid: f.pid, host: f.host },
    );
    assert.equal(f.world_size, 2);
    assert.equal(f.rank, rank);
    assert.deepEqual(
      d.identity.devices,
      f.devices.map((x) => ({ index: x.index, name: x.name, total_bytes: x.totalBytes })),
    );
    assert.equal(d.devices[0].name, 'simulated device');
    const { text } = summarizeFile(fixture(`rank${rank}`));
    assert.match(text, new RegExp(`Process: rank ${rank} of 2 · pid ${f.pid} on sim-host`));
    assert.match(text, new RegExp(`Device cuda:${rank} simulated device \\(${formatBytes(f.devices[rank].totalBytes)}\\)`));
  }
});

test('devices with no events are left out; their markers still give the steps', () => {
  const f = facts('rank1');
  assert.deepEqual(f.event_devices, [1], 'rank 1 allocated on cuda:1 only');
  assert.deepEqual(f.devices.map((x) => x.index), [0, 1], 'both devices were announced (and sampled)');
  const m = openModel(fixture('rank1'));
  try {
    assert.deepEqual(m.devices(), [1]);
    const d = summaryDocument(m);
    assert.deepEqual(d.devices.map((x) => x.device), [1]);
    // The step markers are written on device 0 (not tied to a device): still shown on cuda:1's timeline.
    const labels = buildMarkers(m, 1).markers.filter((k) => k.kind === 'user').map((k) => k.label);
    assert.deepEqual(labels, f.markers.map((k) => k.label));
    assert.equal(d.devices[0].peak_step, stepAt(f.markers, d.devices[0].peak_at_time_us));
    assert.notEqual(d.devices[0].peak_step, null);
  } finally {
    m.close();
  }
  const { text } = summarizeFile(fixture('rank1'));
  assert.doesNotMatch(text, /Device cuda:0/);
});

test('time: seconds since the first allocator event, with the step from step markers; no raw time_us in text', () => {
  const f = facts('oom');
  const d = doc('oom');
  assert.equal(d.time.origin_time_us, f.origin_us);
  assert.equal(d.time.step_source, 'numbered');
  const dev = d.devices[0];
  assert.equal(dev.peak_t_s, seconds(dev.peak_at_time_us, f.origin_us));
  assert.equal(dev.peak_step, stepAt(f.markers, dev.peak_at_time_us));
  const { text } = summarizeFile(fixture('oom'));
  assert.match(text, new RegExp(`Peak allocated memory\\s+${formatBytes(dev.peak_allocated_bytes)}\\s+at ${dev.peak_t_s.toFixed(3)} s \\(step ${dev.peak_step}\\)`));
  assert.doesNotMatch(text, /time_us|\d{16}/);
});

test('OOM: listed with its line, request, device free/total, verdict and sentence (text and JSON)', () => {
  const f = facts('oom');
  assert.equal(f.ooms.length, 1);
  const [o] = f.ooms;
  const d = doc('oom');
  assert.equal(d.ooms.length, 1);
  const [row] = d.ooms;
  assert.deepEqual(
    { t_s: row.t_s, step: row.step, device: row.device, requested_bytes: row.requested_bytes, device_free_bytes: row.device_free_bytes, device_total_bytes: row.device_total_bytes, file: row.file, line: row.line },
    { t_s: seconds(o.time_us, f.origin_us), step: stepAt(f.markers, o.time_us), device: o.device, requested_bytes: o.requested_bytes, device_free_bytes: o.device_free_bytes, device_total_bytes: o.device_total_bytes, file: o.file, line: o.line },
  );
  assert.equal(row.step, 3, 'the fixture fails in step 3');
  // The line is the fixture script's `# OOM_LINE`.
  const src = fs.readFileSync(path.join(SIM, 'make_sim_captures.py'), 'utf8').split('\n');
  assert.match(src[row.line - 1], /# OOM_LINE$/);
  // reserved − allocated (the capture's own figures) could not hold the request: a shortage.
  assert.ok(o.reserved - o.allocated < o.requested_bytes);
  assert.equal(row.verdict, 'shortage');
  // The fixture asks for more than the simulated device holds: the request itself is the cause.
  assert.ok(o.requested_bytes > o.device_total_bytes);
  assert.equal(row.sentence, `A ${formatBytes(o.requested_bytes)} request is larger than the whole GPU (${formatBytes(o.device_total_bytes)}): no freeing or setting can make it fit; check the shape and dtype of the tensor being created.`);
  const { text } = summarizeFile(fixture('oom'));
  assert.match(text, /Out-of-memory errors: 1/);
  assert.match(text, new RegExp(`at ${row.t_s.toFixed(3)} s \\(step 3\\) on cuda:0: ${formatBytes(o.requested_bytes)} requested +\\|\\n\\|   by .*make_sim_captures\\.py:${o.line} `));
  assert.match(text, /verdict: shortage/);
});

test('OOM in a PyTorch pickle: the device_traces oom entry, its user line and free memory', () => {
  const file = path.join(root, 'test/fixtures/pytorch-snapshots/mlp-oom.pickle');
  const ref = JSON.parse(
    pythonInline(
      `import pickle,sys,json
d=pickle.load(open(sys.argv[1],'rb'))
out=[]
for dev,t in enumerate(d['device_traces']):
    for e in t:
        if e['action']=='oom':
            f=next(x for x in e['frames'] if 'site-packages' not in x['filename'] and not x['filename'].startswith('<'))
            out.append([dev,e['time_us'],e['size'],e['device_free'],f['filename'],f['line']])
print(json.dumps(out))`,
      file,
    ),
  );
  const { summary, text } = summarizeFile(file);
  assert.deepEqual(
    summary.ooms.map((o) => [o.device, o.time_us, o.requested_bytes, o.device_free_bytes, o.file, o.line]),
    ref,
  );
  const [expected] = python('replay_reference.py', 'ooms', file);
  assert.equal(summary.ooms[0].verdict, expected.verdict);
  assert.match(text, new RegExp(`${formatBytes(ref[0][2])} requested +\\|\\n\\|   by .*train_small\\.py:${ref[0][5]} `));
});

test('integrity: a capture killed with SIGKILL says it ends early, and where', () => {
  const f = facts('killed');
  assert.equal(f.end, null);
  const d = doc('killed');
  assert.equal(d.integrity.ended, 'early');
  assert.equal(d.integrity.endS, seconds(f.last_us, f.origin_us));
  assert.equal(d.integrity.exitCode, null);
  const { text } = summarizeFile(fixture('killed'));
  assert.match(text.replace(/\s*\|\s*\|?\s*/g, ' '), new RegExp(`The capture ends early at ${d.integrity.endS.toFixed(3)} s: the process died or was killed`));
});

test('integrity: lost events are counted, from the moment the loss began', () => {
  const f = facts('lost');
  assert.ok(f.lost_events > 0);
  const d = doc('lost');
  assert.equal(d.integrity.ended, 'clean');
  assert.equal(d.integrity.lostEvents, f.lost_events);
  assert.equal(d.integrity.lostFromS, seconds(f.lost_from_us, f.origin_us));
  const { text, problems } = summarizeFile(fixture('lost'));
  assert.match(text, new RegExp(`${f.lost_events.toLocaleString('en-US')} events lost from ${d.integrity.lostFromS.toFixed(3)} s`));
  assert.ok(!problems.some((p) => /dropped by the recorder/.test(p)), 'said once, in the integrity lines');
});

test('integrity: a REC_END with reason 1 says the capture stopped, where, and the writer\'s message', () => {
  const f = facts('writer-failure');
  assert.equal(f.end.reason, 1);
  const d = doc('writer-failure');
  assert.equal(d.integrity.ended, 'writer-failure');
  assert.equal(d.integrity.message, f.end.message);
  assert.equal(d.integrity.endS, seconds(f.end.time_us, f.origin_us));
  const { text } = summarizeFile(fixture('writer-failure'));
  assert.match(text.replace(/\s*\|\s*\|?\s*/g, ' '), new RegExp(`The capture stopped at ${d.integrity.endS.toFixed(3)} s: cannot write /project/session/capture-4242\\.gpumem: No space left on device`));
});

test('integrity: a clean capture, and an old 16-byte EndRec (minor ≤ 1), read as clean with no sentence', () => {
  const oom = doc('oom');
  assert.equal(oom.integrity.ended, 'clean');
  assert.equal(oom.integrity.exitCode, facts('oom').end.exit_code);
  assert.deepEqual(oom.integrity.sentences, []);
  const { cap } = makeCapture(tmpDir(), 'old-end', '--events', 200);
  const bytes = fs.readFileSync(cap);
  assert.equal(bytes.readUInt32LE(bytes.length - 16 - 4), 16, 'make_capture writes the 16-byte EndRec');
  const m = openModel(cap);
  const d = summaryDocument(m);
  m.close();
  assert.equal(d.integrity.ended, 'clean');
  assert.equal(d.integrity.exitCode, 0);
});

test('the header JSON is parsed, not searched: anchors nested in another object are not the anchors', () => {
  const dir = tmpDir();
  const { cap } = makeCapture(dir, 'nested', '--events', 50);
  const out = path.join(dir, 'nested-anchors.gpumem');
  pythonInline(
    `import json,struct,sys
d=open(sys.argv[1],'rb').read(); n=struct.unpack_from('<I',d,12)[0]; h=json.loads(d[16:16+n])
h['extra']={'mono_anchor_ns':h.pop('mono_anchor_ns'),'wall_anchor_ns':h.pop('wall_anchor_ns')}
j=json.dumps(h).encode(); open(sys.argv[2],'wb').write(d[:12]+struct.pack('<I',len(j))+j+d[16+n:])`,
    cap,
    out,
  );
  const m = openModel(out);
  const problems = m.problems();
  m.close();
  assert.ok(problems.some((p) => p.kind === 'header' && /no clock anchors/.test(p.message)), JSON.stringify(problems));
  const bad = path.join(dir, 'bad-header.gpumem');
  const buf = Buffer.from(fs.readFileSync(cap));
  buf.write('[', 16, 'latin1'); // the JSON object now opens with '[': not a JSON object
  fs.writeFileSync(bad, buf);
  const b = openModel(bad);
  const bp = b.problems();
  const events = b.summary().devices[0].events;
  b.close();
  assert.ok(bp.some((p) => p.kind === 'header' && /not a JSON object/.test(p.message)), JSON.stringify(bp));
  assert.ok(events > 0, 'the records after a bad header are still read');
});

test('Note [Steps]: numbered markers first, else optimizer.step() ranges of one optimizer class; steps count iterations from 1', () => {
  const mk = (timeUs, kind, label) => ({ device: 0, timeUs, kind, label });
  const numbered = makeTimeBase(1000, [mk(900, 'user', 'step 0'), mk(2000, 'range_begin', 'ProfilerStep#7'), mk(3000, 'user', 'Step=12'), mk(3500, 'user', 'epoch 1')]);
  assert.equal(numbered.stepSource, 'numbered');
  assert.deepEqual([800, 900, 1999, 2000, 2999, 5000].map((t) => numbered.stepAt(t)), [undefined, 0, 0, 7, 7, 12]);
  assert.equal(numbered.label(2400), '0.001 s (step 7)');
  const opt = makeTimeBase(0, [
    mk(10, 'range_begin', 'Optimizer.step#AdamW.step'), mk(20, 'range_end', 'Optimizer.step#AdamW.step'),
    mk(25, 'range_end', 'Optimizer.step#SGD.step'),
    mk(30, 'range_begin', 'Optimizer.step#AdamW.step'), mk(40, 'range_end', 'Optimizer.step#AdamW.step'),
  ]);
  assert.equal(opt.stepSource, 'optimizer');
  // the first iteration is step 1 up to its optimizer.step() end; after the last end no step is in progress
  assert.deepEqual([0, 19, 20, 39, 40, 99].map((t) => opt.stepAt(t)), [1, 1, 1, 2, 2, undefined]);
  const none = makeTimeBase(0, [mk(5, 'user', 'warmup done')]);
  assert.equal(none.stepSource, undefined);
  assert.equal(none.label(1_500_000), '1.500 s');
});

test('verdictOf is the one seam: fragmentation when the cache held the request, shortage otherwise', () => {
  const GiB = 2 ** 30;
  const base = { device: 0, timeUs: 0, stackId: 0, file: 'x.py', line: 1, verdict: 'shortage', deviceFreeBytes: 1 * GiB, deviceTotalBytes: 80 * GiB };
  const frag = verdictOf({ ...base, requestedBytes: 4 * GiB, reservedBytes: 70 * GiB, allocatedBytes: 60 * GiB, largestFreeBlockBytes: 2 * GiB }, undefined);
  assert.equal(frag.verdict, 'fragmentation');
  assert.match(frag.sentence, /10\.0 GiB was reserved but unallocated: the largest free block was 2\.00 GiB/);
  const short = verdictOf({ ...base, requestedBytes: 4 * GiB, reservedBytes: 70 * GiB, allocatedBytes: 68 * GiB, largestFreeBlockBytes: 2 * GiB }, undefined);
  assert.equal(short.verdict, 'shortage');
  assert.match(short.sentence, /1\.00 GiB free of 80\.0 GiB and the allocator's cache only 2\.00 GiB unallocated/);
  // A request larger than the whole GPU: the cause is the request, whatever is held or cached.
  const huge = verdictOf({ ...base, requestedBytes: 160 * GiB, reservedBytes: 70 * GiB, allocatedBytes: 68 * GiB, largestFreeBlockBytes: 2 * GiB }, undefined);
  assert.deepEqual(huge, {
    verdict: 'shortage',
    sentence: 'A 160 GiB request is larger than the whole GPU (80.0 GiB): no freeing or setting can make it fit; check the shape and dtype of the tensor being created.',
  });
});

test('the snapshot panel gets identity, integrity and the OOM list, with times from the origin', () => {
  const f = facts('writer-failure');
  const m = openModel(fixture('writer-failure'));
  try {
    const s = new OpenedCapture(m, { fileName: 'writer-failure.capture' });
    const info = s.opened();
    assert.equal(info.originUs, f.origin_us);
    assert.equal(info.identity, `pid ${f.pid} on sim-host`);
    assert.deepEqual(info.deviceNames, { 0: 'simulated device' });
    assert.equal(info.integrity.ended, 'writer-failure');
    assert.equal(info.integrity.sentences.length, 1);
    assert.equal(info.ooms.length, 1);
    assert.equal(info.ooms[0].line, f.ooms[0].line);
    assert.equal(info.ooms[0].requested_bytes, f.ooms[0].requested_bytes);
    // The OOM marker on the timeline names the request and the line.
    const oomMarkers = buildMarkers(m, 0).markers.filter((k) => k.kind === 'oom');
    assert.equal(oomMarkers.length, 1);
    assert.equal(oomMarkers[0].timeUs, f.ooms[0].time_us);
    assert.match(oomMarkers[0].label, new RegExp(`OOM: ${formatBytes(f.ooms[0].requested_bytes)} at make_sim_captures\\.py:${f.ooms[0].line}`));
  } finally {
    m.close();
  }
});

test('`gpumem summary --json` on the fixtures: integrity and OOMs as the summary spells them', () => {
  for (const [name, ended] of [['oom', 'clean'], ['killed', 'early'], ['lost', 'clean'], ['writer-failure', 'writer-failure'], ['rank0', 'clean']]) {
    const r = spawnSync(process.execPath, [path.join(root, 'dist/cli.js'), 'summary', fixture(name), '--json'], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    const d = JSON.parse(r.stdout);
    assert.equal(d.integrity.ended, ended, name);
    for (const k of ['ended', 'lostEvents', 'lostFromS', 'message']) assert.ok(k in d.integrity, `${name}: integrity.${k}`);
    for (const o of d.ooms) {
      assert.deepEqual(Object.keys(o).sort(), ['device', 'device_free_bytes', 'device_total_bytes', 'file', 'line', 'requested_bytes', 'sentence', 'step', 't_s', 'time_us', 'verdict']);
    }
  }
});
