// Note [First view] (native/addon/src/overview.cpp): the overview of a pickle, read by a first pass before the
// model, must equal what the full model gives for the same buckets (min/max of allocated and reserved), with the
// same peaks and time range; otherwise the panel's first paint would change when the full timeline replaces it.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { FIXTURES, openModel, root, tmpDir } from './reader-support.mjs';

const { openOverviewAsync, openModelFirstView, OVERVIEW_MIN_BYTES } = await import('../../src/core/base/model/open.ts');
const RESNET = FIXTURES.find((f) => f.includes('resnet50'));
const CAPTURE = path.join(root, 'test/fixtures/h200-e2e-train.capture');

/** Every device of the overview against the full model: buckets, range, peaks, event count. */
function assertOverviewMatches(file, overview) {
  const m = openModel(file);
  try {
    const summary = m.summary();
    const withEvents = summary.devices.filter((d) => d.events > 0).map((d) => d.device);
    assert.deepEqual(
      overview.devices.map((d) => d.device),
      withEvents,
      'one overview device per device with a trace',
    );
    for (const d of overview.devices) {
      const tl = m.timeline(d.device, d.t0Us, d.t1Us, d.buckets);
      for (const k of ['allocatedMin', 'allocatedMax', 'reservedMin', 'reservedMax']) {
        assert.equal(d[k].length, d.buckets);
        assert.deepEqual(d[k], tl[k], `${path.basename(file)} device ${d.device}: ${k}`);
      }
      assert.deepEqual({ t0Us: d.rangeT0Us, t1Us: d.rangeT1Us }, m.timeRange(d.device), 'time range');
      const s = summary.devices.find((x) => x.device === d.device);
      assert.equal(d.events, s.events);
      assert.equal(d.peakAllocatedBytes, s.peak_allocated_bytes);
      assert.equal(d.peakAtTimeUs, s.peak_at_time_us);
      const end = m.current(d.device);
      assert.equal(d.endAllocatedBytes, end.allocatedBytes);
      assert.equal(d.peakReservedBytes, end.peakReservedBytes);
    }
  } finally {
    m.close();
  }
}

for (const file of FIXTURES) {
  for (const buckets of [1, 7, 2048]) {
    test(`overview of ${path.basename(file)} at ${buckets} buckets equals the full model's timeline`, async () => {
      const overview = await openOverviewAsync(file, buckets);
      assert.ok(overview, 'the fixture has an overview');
      assert.ok(overview.devices.length > 0);
      assertOverviewMatches(file, overview);
    });
  }
}

// A bigger pickle as the benchmark makes them (the trace repeated, shifted in time and address; frames shared),
// here ×4 in protocols 2 and 4: the shaped fast path reads most entries, the general path the first copy's.
// fresh: every entry with its own frames list and frame dicts, as PyTorch dumps them (Note [Fresh frames lists]).
for (const [proto, fresh] of [[2, false], [4, false], [4, true]]) {
  test(`overview of the ResNet-50 fixture ×4 (protocol ${proto}${fresh ? ', fresh frames lists' : ''}) equals the full model's timeline`, async () => {
    const out = path.join(tmpDir(), `x4-p${proto}${fresh ? '-fresh' : ''}.pickle`);
    const code = `import pickle, sys
d = pickle.load(open(sys.argv[1], 'rb'))
for dev, trace in enumerate(d['device_traces']):
    body = [e for e in trace if e['action'] != 'snapshot']
    start = min(e['time_us'] for e in trace)
    span = max(e['time_us'] for e in trace) - start + 1000
    out = []
    for k in range(4):
        for e in body:
            ne = dict(e)
            if ${fresh ? 'True' : 'False'}:
                ne['frames'] = [dict(f) for f in e.get('frames', [])]
            ne['time_us'] = e['time_us'] + k * span
            if e.get('addr') and e['action'] != 'oom':
                ne['addr'] = e['addr'] - (3 - k) * (1 << 36)
            out.append(ne)
    d['device_traces'][dev] = out + [dict(e, time_us=e['time_us'] + 3 * span) for e in trace if e['action'] == 'snapshot']
pickle.dump(d, open(sys.argv[2], 'wb'), protocol=${proto})`;
    const r = spawnSync('python3', ['-c', code, RESNET, out]);
    assert.equal(r.status, 0, String(r.stderr));
    const overview = await openOverviewAsync(out, 1500);
    assert.ok(overview);
    assertOverviewMatches(out, overview);
  });
}

test('overview of pickles our exporter writes equals the full model timeline', async () => {
  for (const file of FIXTURES) {
    const out = path.join(tmpDir(), `export-${path.basename(file)}`);
    const m = openModel(file);
    m.exportPickle(out);
    m.close();
    const overview = await openOverviewAsync(out, 300);
    assert.ok(overview, path.basename(file));
    assertOverviewMatches(out, overview);
  }
});

// Shapes the first pass does not cut: it must then give no overview (the page waits for the full model), never a
// wrong one.
const VARIANTS = {
  'the same entry object twice in the trace': `t.insert(len(t) // 2, t[len(t) // 3])`,
  'nested values in entries': `
for e in t[::7]:
    e['user_metadata'] = {'step': 3, 'tags': ['a', 'b']}`,
  'a trace entry without time_us': `del t[10]['time_us']`,
  'entries out of time order': `t[20]['time_us'] = t[10]['time_us'] - 5`,
};
for (const [name, edit] of Object.entries(VARIANTS)) {
  for (const proto of [2, 4]) {
    test(`overview with ${name} (protocol ${proto}) is the full model's or none`, async () => {
      const out = path.join(tmpDir(), 'v.pickle');
      const code = `import pickle, sys
d = pickle.load(open(sys.argv[1], 'rb'))
t = d['device_traces'][0]
${edit}
pickle.dump(d, open(sys.argv[2], 'wb'), protocol=${proto})`;
      const r = spawnSync('python3', ['-c', code, RESNET, out]);
      assert.equal(r.status, 0, String(r.stderr));
      const overview = await openOverviewAsync(out, 512);
      if (name.startsWith('the same entry')) assert.equal(overview, undefined, 'entries named twice: no overview');
      else assertOverviewMatches(out, overview);
    });
  }
}

test('a capture of an older writer (no index) gets its overview from a pass over its records; no overview for a file that is not a snapshot', async () => {
  // Note [Capture first view] (capture_overview.cpp); the index itself: capture-index.test.mjs.
  const o = await openOverviewAsync(CAPTURE);
  assert.equal(o.source, 'scan');
  assert.equal(o.complete, true);
  const m = openModel(CAPTURE);
  try {
    const s = m.summary().devices.filter((d) => d.events > 0);
    assert.deepEqual(o.devices.map((d) => [d.device, d.events, d.peakAllocatedBytes]), s.map((d) => [d.device, d.events, d.peak_allocated_bytes]));
  } finally {
    m.close();
  }
  const junk = path.join(tmpDir(), 'junk.pickle');
  fs.writeFileSync(junk, Buffer.from('not a pickle at all'));
  assert.equal(await openOverviewAsync(junk), undefined);
  // protocol 2 with code in it: refused, as the full open refuses it
  const evil = path.join(tmpDir(), 'evil.pickle');
  fs.writeFileSync(evil, Buffer.concat([Buffer.from([0x80, 2]), Buffer.from('cos\nsystem\n'), Buffer.from([0x55, 4]), Buffer.from('true'), Buffer.from([0x85, 0x52, 0x2e])]));
  assert.equal(await openOverviewAsync(evil), undefined);
});

test('openModelFirstView reads the overview first only for big files', async () => {
  let told = 0;
  const m = await openModelFirstView(RESNET, () => told++);
  m.close();
  assert.equal(told, 0, `the ${fs.statSync(RESNET).size}-byte fixture is under ${OVERVIEW_MIN_BYTES} bytes: opened at once`);
  // Past the threshold: the overview first, then the model (read at a lower priority), the same as a plain open.
  const order = [];
  const first = await openModelFirstView(RESNET, (o) => order.push(['overview', o.devices[0].events]), 0).then((m) => (order.push(['model']), m));
  try {
    assert.deepEqual(order, [['overview', 55681], ['model']]);
    const plain = openModel(RESNET);
    assert.deepEqual(first.summary(), plain.summary());
    plain.close();
  } finally {
    first.close();
  }
});

test('Note [Full open after the first paint]: the full open starts when the overview is painted, or after FIRST_PAINT_WAIT_MS', async () => {
  const { FIRST_PAINT_WAIT_MS } = await import('../../src/core/base/model/open.ts');
  // the page's `overviewPainted` resolves the listener's promise: the model is not read before it
  let paint;
  let painted = false;
  const order = [];
  const opening = openModelFirstView(RESNET, () => (order.push('overview'), new Promise((r) => (paint = r))), 0).then((m) => (order.push(`model after paint: ${painted}`), m));
  while (!paint) await new Promise((r) => setTimeout(r, 5));
  await new Promise((r) => setTimeout(r, 100));
  assert.deepEqual(order, ['overview'], 'no model while the overview is not painted');
  painted = true;
  paint();
  (await opening).close();
  assert.deepEqual(order, ['overview', 'model after paint: true']);
  // a page that never says so (hidden, closed): the full open starts after the wait, not never
  const t0 = Date.now();
  const m = await openModelFirstView(RESNET, () => new Promise(() => {}), 0);
  m.close();
  assert.ok(Date.now() - t0 >= FIRST_PAINT_WAIT_MS - 50, `waited ${Date.now() - t0} ms`);
});
