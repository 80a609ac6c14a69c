// The summary, to the byte: native reader vs test/unit/reference/snapshot_summary.py on the same files.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { captureStdout, escape, FIXTURES, makeCapture, openModel, python, pythonInline, root, tmpDir } from './reader-support.mjs';
import { formatBytes } from '../../src/core/base/units/bytes.ts';
import { run as summaryCommand } from '../../src/cli/commands/summary.ts';
import { run as exportCommand } from '../../src/cli/commands/export.ts';

for (const file of FIXTURES) {
  test(`summary of ${path.basename(file)} equals the Python reference`, () => {
    const expected = python('snapshot_summary.py', file);
    const model = openModel(file);
    try {
      assert.deepEqual(model.summary(), expected);
    } finally {
      model.close();
    }
  });
}

test('summary of pickles re-dumped with protocols 2, 3 and 5 equals the protocol-4 original', () => {
  const dir = tmpDir();
  const src = FIXTURES[1];
  const expected = python('snapshot_summary.py', src);
  for (const proto of [2, 3, 5]) {
    const out = path.join(dir, `p${proto}.pickle`);
    const r = spawnSync('python3', ['-c', `import pickle,sys; pickle.dump(pickle.load(open(sys.argv[1],'rb')), open(sys.argv[2],'wb'), protocol=${proto})`, src, out]);
    assert.equal(r.status, 0, String(r.stderr));
    const m = openModel(out);
    assert.deepEqual(m.summary(), expected, `protocol ${proto}`);
    m.close();
  }
});

test('older snapshot variants (no requested_size, no block frames, no is_expandable, no compile_context) summarise like the reference', () => {
  const dir = tmpDir();
  const out = path.join(dir, 'old.pickle');
  const code = `
import pickle, sys
d = pickle.load(open(sys.argv[1], 'rb'))
for s in d['segments']:
    s.pop('is_expandable', None); s.pop('requested_size', None); s.pop('segment_pool_id', None)
    for b in s['blocks']:
        b.pop('requested_size', None); b.pop('frames', None)
for t in d['device_traces']:
    for e in t:
        e.pop('compile_context', None); e.pop('user_metadata', None)
del d['allocator_settings']; del d['external_annotations']
pickle.dump(d, open(sys.argv[2], 'wb'), protocol=2)`;
  const r = spawnSync('python3', ['-c', code, FIXTURES[3], out]);
  assert.equal(r.status, 0, String(r.stderr));
  const m = openModel(out);
  assert.deepEqual(m.summary(), python('snapshot_summary.py', out));
  m.close();
});

for (const flags of [[], ['--no-state']]) {
  test(`summary of a capture ${flags.length ? 'without a final state record' : 'with a final state record'} equals the reference for its twin pickle`, () => {
    const dir = tmpDir();
    const { cap, twin } = makeCapture(dir, 'run', '--events', 4000, '--seed', 7, ...flags);
    const expected = { ...python('snapshot_summary.py', twin), format: 'gpumem-capture' };
    const m = openModel(cap);
    assert.deepEqual(m.summary(), expected);
    assert.deepEqual(m.problems(), []);
    m.close();
  });
}

test("frames of the lens bootstrap (the capture header's bootstrap_dir) are not user code: backward lands on the user's line", () => {
  const dir = tmpDir();
  const boot = '/opt/gpumem/native/python';
  const { cap, twin } = makeCapture(dir, 'boot', '--events', 3000, '--seed', 9, '--bootstrap-dir', boot);
  const expected = { ...python('snapshot_summary.py', twin, '--non-user-dir', boot), format: 'gpumem-capture' };
  const m = openModel(cap);
  const got = m.summary();
  m.close();
  assert.deepEqual(got, expected);
  assert.ok(!got.top_lines.some((l) => l.file.startsWith(boot)));
  // Without the header's hint the same frames would be attributed to the bootstrap: the hint matters.
  assert.ok(python('snapshot_summary.py', twin).top_lines.some((l) => l.file.startsWith(boot)));
});

test('`gpumem summary --json` prints the summary document and the text report shows the same figures', async () => {
  const file = FIXTURES[3];
  const expected = python('snapshot_summary.py', file);
  const json = await captureStdout(() => summaryCommand([file, '--json']));
  assert.equal(json.code, 0);
  // The reference document, exactly, plus what the reader adds (identity, time, integrity, OOMs; per device the
  // name and the peak in seconds since the first allocation).
  const doc = JSON.parse(json.out);
  const { identity, time, integrity, ooms, steps, categories, snapshot, ...figures } = doc;
  // what_if is the engine's answer (checked in what-if-engine.test.mjs), replay_check the replay's self-check
  // (replay-conformance.test.mjs): here, PyTorch's own pickle replays to its own peak reserved.
  const added = ['name', 'total_bytes', 'pci_bus_id', 'peak_t_s', 'peak_step', 'what_if', 'replay_check', 'backward_peak_bytes', 'backward_by_forward_line'];
  // a pickle says nothing of backward: no backward peak (Note [Backward peak in the summary])
  assert.deepEqual([figures.devices[0].backward_peak_bytes, figures.devices[0].backward_by_forward_line], [null, []]);
  const check = figures.devices[0].replay_check;
  assert.deepEqual([check.policy, check.modelled, check.settings_source], ['pytorch', true, 'pickle-settings']);
  assert.ok(check.recorded_bytes > 0 && check.deviation <= 0.02, JSON.stringify(check));
  const devices = figures.devices.map((dev) => Object.fromEntries(Object.entries(dev).filter(([k]) => !added.includes(k))));
  assert.deepEqual({ ...figures, devices }, expected);
  assert.deepEqual(identity, { devices: [] }, 'a pickle names no process or device');
  assert.equal(integrity.ended, 'clean');
  assert.deepEqual(ooms, []);
  // The snapshot section (its figures: snapshot-extras.test.mjs): this 2.11 pickle has no pools, host memory or unknown keys.
  assert.deepEqual([snapshot.host, snapshot.unknown_keys, snapshot.devices[0].pools], [null, [], []]);
  // Note [Steps]: a pickle has no step facts; PyTorch's Optimizer.step#… ranges (its annotations) end the steps.
  const ends = JSON.parse(
    pythonInline(
      "import pickle,sys,json; d=pickle.load(open(sys.argv[1],'rb')); a=[x for x in d.get('external_annotations',[]) if x['stage']=='END' and x['name'].startswith('Optimizer.step#')]; print(json.dumps([x['time_us'] for x in a if x['name']==a[0]['name']]))",
      file,
    ),
  );
  assert.ok(ends.length > 1, 'the fixture recorded optimizer steps');
  assert.deepEqual(
    steps.map((s) => [s.source, s.steps.map((r) => r.end_us)]),
    [['optimizer', ends]],
  );
  const t0 = Math.min(...python('replay_reference.py', 'first_times', file));
  assert.equal(time.origin_time_us, t0);
  const d = expected.devices[0];
  const peakS = Math.round(d.peak_at_time_us - t0) / 1e6;
  assert.equal(doc.devices[0].peak_t_s, peakS);
  // A pickle has no tags or phases: every byte at the peak is "other", or allocated before its trace.
  const peak = categories[0].peak;
  assert.equal(peak.allocated_bytes, expected.devices[0].peak_allocated_bytes);
  assert.equal(peak.bytes.other + peak.untraced_bytes, peak.allocated_bytes);
  assert.deepEqual([categories[0].has_tags, categories[0].has_phases], [false, false]);
  const text = await captureStdout(() => summaryCommand([file]));
  assert.equal(text.code, 0);
  assert.doesNotMatch(text.out, /time_us/, 'no raw epoch microseconds in text');
  assert.match(text.out, new RegExp(`GPU reserved memory\\s+${escape(formatBytes(d.reserved_bytes))}\\s+${d.segments} segments`));
  assert.match(text.out, new RegExp(`Allocated memory\\s+${escape(formatBytes(d.allocated_bytes))}\\s+${d.allocated_blocks} blocks of ${d.blocks}`));
  assert.match(text.out, new RegExp(`Peak allocated memory\\s+${escape(formatBytes(d.peak_allocated_bytes))}\\s+at ${escape(peakS.toFixed(3))} s`));
  const top = expected.top_lines[0];
  assert.match(text.out, new RegExp(`${escape(formatBytes(top.bytes_at_peak))}.*${escape(path.basename(top.file))}:${top.line}`));
});

test('`gpumem summary` on a missing file says so and exits 1', async () => {
  const r = await captureStdout(() => summaryCommand([path.join(root, 'no-such-file.pickle')]));
  assert.equal(r.code, 1);
  assert.match(r.err, /no-such-file\.pickle does not exist; pass a \.gpumem capture, a snapshot \.pickle or a session folder/);
});

test('`gpumem export FILE --pickle OUT --at T` writes the state at T; bad arguments say what is needed', async () => {
  const dir = tmpDir();
  const { cap, twin } = makeCapture(dir, 'cli', '--events', 1500, '--seed', 12);
  const m = openModel(cap);
  const { t0Us, t1Us } = m.timeRange(0);
  const at = Math.round((t0Us + t1Us) / 2);
  const mid = m.stateAt(0, at).fragmentation;
  m.close();
  const out = path.join(dir, 'mid.pickle');
  const r = await captureStdout(() => exportCommand([cap, '--pickle', out, '--at', String(at)]));
  assert.equal(r.code, 0, r.err);
  assert.match(r.out, /^wrote .*mid\.pickle \(.*, state at time_us \d+\); open it at pytorch\.org\/memory_viz/);
  const exported = python('snapshot_summary.py', out).devices[0];
  const [series] = python('replay_reference.py', 'series', twin, at);
  assert.deepEqual([exported.allocated_bytes, exported.reserved_bytes], [series.allocated, series.reserved]);
  assert.deepEqual([mid.allocatedBytes, mid.reservedBytes], [series.allocated, series.reserved]);
  await assert.rejects(() => exportCommand([cap]), /needs --pickle OUT/);
  await assert.rejects(() => exportCommand([cap, '--pickle', out, '--at', 'noon']), /--at takes a time in microseconds since the epoch/);
  const same = await captureStdout(() => exportCommand([cap, '--pickle', cap]));
  assert.equal(same.code, 1);
  assert.match(same.err, /OUT is the input file/);
});


void fs;
