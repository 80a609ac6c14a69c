// OpenedCapture (the panel host's answers) over the real native Model of the ResNet-50 fixture, checked
// against python3 reading the same pickle: time range, level of detail of the timeline bands, the segment
// map, the source frame of the top site, and the diff between the peak and the end.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { END_OF_TRACE } from '../../src/core/base/protocol/snapshot.ts';
import { OpenedCapture } from '../../src/core/views/snapshot/openedCapture.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const FILE = path.join(ROOT, 'test/fixtures/pytorch-snapshots/resnet50-bf16-train-python-stacks.pickle');
process.env.GPUMEM_ADDON ||= path.join(ROOT, 'dist/native/gpumem_addon.node');
const { openModel } = await import('../../src/core/base/model/open.ts');

// Allocation lifetimes from the trace (alloc → free_requested), as memory_viz draws them.
const py = JSON.parse(
  execFileSync(
    'python3',
    [
      '-c',
      `
import json, pickle, sys
t = pickle.load(open(sys.argv[1], 'rb'))['device_traces'][0]
live = {}; spans = []
for e in t:
    if e['action'] == 'alloc': live[e['addr']] = e
    elif e['action'] == 'free_requested' and e['addr'] in live: spans.append((live.pop(e['addr'])['size'], True))
spans += [(e['size'], False) for e in live.values()]
times = [e['time_us'] for e in t]
print(json.dumps({'t0': min(times), 't1': max(times), 'sizes': sorted((s for s, _ in spans), reverse=True), 'liveAtEnd': sum(1 for _, f in spans if not f)}))`,
      FILE,
    ],
    { encoding: 'utf8', maxBuffer: 64 << 20 },
  ),
);
const summary = JSON.parse(execFileSync('python3', [path.join(ROOT, 'test/unit/reference/snapshot_summary.py'), FILE], { encoding: 'utf8' }));

let model;
let capture;
before(() => {
  model = openModel(FILE);
  capture = new OpenedCapture(model, { fileName: 'resnet.pickle', displayPath: (f) => path.basename(f) });
});
after(() => model?.close());

test('opened: one device whose time range spans the trace', () => {
  const [opened] = capture.handle({ type: 'ready' });
  assert.equal(opened.type, 'opened');
  assert.deepEqual(opened.info.devices, [0]);
  assert.deepEqual(opened.info.timeRanges, [{ t0Us: py.t0, t1Us: py.t1 }]);
  assert.deepEqual(opened.info.problems, []);
});

test('the timeline sends the largest bands first, sorted by start, and says when there were more', () => {
  const view = capture.timeline(7, 0, py.t0, py.t1, 800, 3000);
  assert.equal(view.requestId, 7);
  assert.equal(view.buckets, 800);
  assert.equal(view.allocatedMax.length, 800);
  assert.equal(view.spans.startUs.length, 3000);
  assert.equal(view.spansTruncated, py.sizes.length > 3000);
  // Level of detail: exactly the 3000 largest allocations of the trace (ties may pick either band).
  assert.equal(Math.min(...view.spans.size), py.sizes[2999]);
  assert.equal(view.spans.size.reduce((a, b) => a + b, 0), py.sizes.slice(0, 3000).reduce((a, b) => a + b, 0));
  for (let i = 1; i < view.spans.startUs.length; i++) assert.ok(view.spans.startUs[i - 1] <= view.spans.startUs[i]);
  // Live at the end: flagged, and clamped to the end of the trace so the message stays JSON-safe.
  for (let i = 0; i < view.spans.startUs.length; i++) {
    if (view.spans.liveAtEnd[i]) assert.equal(view.spans.endUs[i], py.t1);
    assert.ok(Number.isFinite(view.spans.endUs[i]));
  }
  // The allocated envelope peaks at python's peak.
  assert.equal(Math.max(...view.allocatedMax), summary.devices[0].peak_allocated_bytes);
  const all = capture.timeline(8, 0, py.t0, py.t1, 10, 100000);
  assert.equal(all.spans.startUs.length, py.sizes.length, 'below the cap every allocation is sent');
  assert.equal(all.spansTruncated, false);
  assert.equal(all.spans.liveAtEnd.filter(Boolean).length, py.liveAtEnd);
});

test('the segment map at the end is the snapshot\'s segments, blocks as offsets that tile each segment', () => {
  const [msg] = capture.handle({ type: 'requestSegments', requestId: 3, device: 0, timeUs: END_OF_TRACE });
  assert.equal(msg.type, 'segments');
  assert.equal(msg.view.segments.length, summary.devices[0].segments);
  assert.equal(msg.view.segments.reduce((n, s) => n + s.blocks.length, 0), summary.devices[0].blocks);
  for (const seg of msg.view.segments) {
    let offset = 0;
    for (const b of seg.blocks) {
      assert.equal(b.offset, offset);
      offset += b.size;
    }
    assert.equal(offset, seg.totalSize);
  }
  assert.equal(msg.view.breakdown.reservedBytes, summary.devices[0].reserved_bytes);
});

test('a site\'s stack leads to its line: the innermost user frame of the top stack is python\'s top line', () => {
  const [sites] = capture.deviceMessages(0).filter((m) => m.type === 'sites');
  const top = summary.top_lines[0];
  assert.equal(sites.rows[0].file, top.file);
  assert.equal(sites.rows[0].line, top.line);
  assert.equal(sites.rows[0].selfBytesAtPeak, top.bytes_at_peak);
  assert.equal(sites.rows[0].displayFile, path.basename(top.file));
  const [stack] = capture.handle({ type: 'requestStack', requestId: 4, stackId: sites.rows[0].topStackId });
  const user = stack.view.frames.find((f) => f.user);
  assert.deepEqual([user.file, user.line], [top.file, top.line]);
  assert.ok(stack.view.frames.some((f) => !f.user && f.file.includes('site-packages')), 'library frames are marked as not user code');
});

test('compare peak → end: every line shrank back to what the end holds, and the totals add up', () => {
  const peak = summary.devices[0].peak_at_time_us;
  const [msg] = capture.handle({ type: 'compareMoments', requestId: 5, device: 0, aUs: peak, bUs: END_OF_TRACE });
  assert.equal(msg.type, 'diff');
  const { rows, grewBytes, shrankBytes } = msg.view;
  assert.ok(rows.length > 0);
  for (const r of rows) assert.equal(r.afterBytes - r.beforeBytes, r.deltaBytes);
  assert.equal(grewBytes - shrankBytes, rows.reduce((a, r) => a + r.deltaBytes, 0));
  const top = summary.top_lines[0];
  const row = rows.find((r) => r.file === top.file && r.line === top.line);
  assert.equal(row.beforeBytes, top.bytes_at_peak, 'A (the peak) holds python\'s bytes at peak for the top line');
  assert.equal(msg.view.afterLabel, 'the end');
});

test('a failing query answers requestFailed for that request', () => {
  const broken = new OpenedCapture({ ...model, stateAt: () => { throw new Error('boom'); }, timeRange: (d) => model.timeRange(d) }, { fileName: 'x' });
  assert.deepEqual(broken.handle({ type: 'requestSegments', requestId: 9, device: 0, timeUs: 1 }), [{ type: 'requestFailed', requestId: 9, message: 'boom' }]);
});

test('compare with another file: each side at its end, by line', () => {
  const other = openModel(path.join(ROOT, 'test/fixtures/pytorch-snapshots/mlp-expandable.pickle'));
  try {
    const same = capture.diff(1, 0, END_OF_TRACE, END_OF_TRACE, ['a', 'b'], model);
    assert.deepEqual([same.rows.length, same.grewBytes, same.shrankBytes], [0, 0, 0], 'a file compared with itself has no changes');
    const view = capture.diff(2, 0, END_OF_TRACE, END_OF_TRACE, ['resnet at the end', 'mlp at the end'], other);
    assert.deepEqual([view.beforeLabel, view.afterLabel], ['resnet at the end', 'mlp at the end']);
    assert.ok(view.rows.some((r) => r.file.endsWith('train_small.py') && r.afterBytes > 0 && r.beforeBytes === 0), 'lines only the other file has appear as grown');
    for (const r of view.rows) assert.equal(r.afterBytes - r.beforeBytes, r.deltaBytes);
  } finally {
    other.close();
  }
});

test('every answer the opened capture gives to the page passes the host → webview protocol the page checks', async () => {
  const { snapshotHostMessages, snapshotWebviewMessages } = await import('../../src/core/base/protocol/snapshot.ts');
  const asks = [
    { type: 'ready' },
    { type: 'selectDevice', device: 0 },
    { type: 'requestTimeline', requestId: 1, device: 0, t0Us: py.t0, t1Us: py.t1, buckets: 400, maxSpans: 300 },
    { type: 'requestTimeline', requestId: 2, device: 0, t0Us: py.t0, t1Us: py.t1, buckets: 400, maxSpans: 300, owner: 0 },
    { type: 'requestSegments', requestId: 3, device: 0, timeUs: END_OF_TRACE },
    { type: 'requestStack', requestId: 4, stackId: 1 },
    { type: 'compareMoments', requestId: 5, device: 0, aUs: py.t0 + (py.t1 - py.t0) / 2, bUs: END_OF_TRACE },
    { type: 'requestReplay', requestId: 6, device: 0 },
    { type: 'requestSites', device: 0, backwardGrouping: 'caller' },
  ];
  const seen = new Set();
  for (const ask of asks) {
    // what SnapshotPanelHost hands the opened capture: the checked message
    const checked = snapshotWebviewMessages.check(JSON.parse(JSON.stringify(ask)));
    assert.equal(checked.ok, true, checked.reason);
    for (const answer of capture.handle(checked.message) ?? []) {
      // what the page receives: the JSON-cloned message, checked by webview/common/api.ts onHostMessage
      const c = snapshotHostMessages.check(JSON.parse(JSON.stringify(answer)));
      assert.equal(c.ok, true, `${answer.type}: ${c.reason}`);
      seen.add(answer.type);
    }
  }
  assert.deepEqual([...seen].sort(), ['diff', 'opened', 'replay', 'segments', 'sites', 'stack', 'summary', 'timeline']);
});
