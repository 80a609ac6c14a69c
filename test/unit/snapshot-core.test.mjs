// The snapshot panel's model-independent computations, checked against python3 reading the real PyTorch
// 2.11 fixture pickles (test/unit/snapshot_reference.py): the breakdown of reserved memory, the verdict
// sentence, the request-size rule, message validation, and the timeline's column stacking.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { formatBytes } from '../../src/core/base/units/bytes.ts';
import { parseSnapshotWebviewMessage } from '../../src/core/base/protocol/snapshot.ts';
import { breakdownFromSegments, releasableBytes, unallocatedBytes, wholePageBytes } from '../../src/core/analyses/breakdown/breakdown.ts';
import { failingRequestSize, probeRequestSize, verdictSentence } from '../../src/core/analyses/verdicts/verdict.ts';
import { bandAt, sweepColumns } from '../../webview/snapshot/stacking.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const FIXTURES = path.join(ROOT, 'test/fixtures/pytorch-snapshots');
const NAMES = ['resnet50-bf16-train-python-stacks.pickle', 'mlp-record-stream-pending.pickle', 'mlp-oom.pickle', 'mlp-expandable.pickle'];

function reference(name) {
  const out = execFileSync('python3', [path.join(ROOT, 'test/unit/snapshot_reference.py'), path.join(FIXTURES, name)], { encoding: 'utf8', maxBuffer: 64 << 20 });
  return JSON.parse(out).devices['0'];
}

for (const name of NAMES) {
  test(`breakdown of ${name} equals python's, and its parts add up to reserved − requested`, () => {
    const ref = reference(name);
    const b = breakdownFromSegments(ref.segmentInfos);
    assert.deepEqual(b, ref.breakdown);
    const parts = b.cachedFreeBytes + b.releasablePageBytes + b.subPageRemainderBytes + b.splitRemainderBytes + b.pendingFreeBytes + b.roundingWasteBytes;
    assert.equal(parts, b.reservedBytes - b.requestedBytes);
    assert.equal(unallocatedBytes(b), b.reservedBytes - b.allocatedBytes);
    // Parts exist only in their kind of segment.
    if (b.expandableSegments === 0) assert.equal(b.releasablePageBytes + b.subPageRemainderBytes, 0);
    if (b.fixedSegments === 0) assert.equal(b.splitRemainderBytes, 0);
  });
}

test('the record_stream fixture has pending-free bytes and the verdict names them', () => {
  const ref = reference('mlp-record-stream-pending.pickle');
  const b = breakdownFromSegments(ref.segmentInfos);
  assert.ok(b.pendingFreeBytes > 0, 'fixture is documented to hold active_pending_free blocks');
  assert.match(verdictSentence(b), new RegExp(`${escape(formatBytes(b.pendingFreeBytes))} waits on other streams`));
});

test('the ResNet-50 verdict states unallocated bytes, free block count and largest block, and claims nothing without an engine answer', () => {
  const ref = reference('resnet50-bf16-train-python-stacks.pickle');
  const b = breakdownFromSegments(ref.segmentInfos);
  const v = verdictSentence(b);
  const unalloc = ref.breakdown.reservedBytes - ref.breakdown.allocatedBytes;
  assert.equal(v, `${formatBytes(unalloc)} reserved but unallocated in ${ref.breakdown.freeBlocks} free blocks, largest ${formatBytes(ref.breakdown.largestFreeBlockBytes)}.`);
  const request = probeRequestSize(b);
  assert.ok(request > ref.breakdown.largestFreeBlockBytes && request <= unalloc, `${request}`);
});

test('the expandable fixture: its free bytes are sub-page remainders (empty_cache() had just run), none of it releasable', () => {
  const ref = reference('mlp-expandable.pickle');
  const b = breakdownFromSegments(ref.segmentInfos);
  assert.equal(b.fixedSegments, 0);
  assert.ok(b.expandableSegments > 0);
  assert.equal(b.splitRemainderBytes, 0, 'no fixed segment: nothing is a split remainder');
  assert.equal(b.subPageRemainderBytes, ref.breakdown.reservedBytes - ref.breakdown.allocatedBytes);
  assert.equal(releasableBytes(b), 0);
});

test('wholePageBytes rounds a free block inward to pages counted from the segment start', () => {
  const MiB = 2 ** 20;
  assert.equal(wholePageBytes(0, 78 * MiB, 22 * MiB, 20 * MiB), 20 * MiB);
  assert.equal(wholePageBytes(0, 42 * MiB, 4 * MiB, 20 * MiB), 0);
  assert.equal(wholePageBytes(6 * MiB, 6 * MiB, 45 * MiB, 20 * MiB), 40 * MiB, 'pages start at the segment, not at address 0');
  assert.equal(wholePageBytes(0, 1.5 * MiB, 2.5 * MiB, 2 * MiB), 2 * MiB);
});

test('failingRequestSize picks the smallest round size above the largest block that fits the total', () => {
  const MiB = 2 ** 20;
  assert.equal(failingRequestSize(180 * MiB, 2.1 * 2 ** 30), 200 * MiB);
  assert.equal(failingRequestSize(3 * MiB, 10 * MiB), 4 * MiB);
  assert.equal(failingRequestSize(5 * MiB, 5 * MiB), undefined, 'one block holding all free bytes: nothing fails from fragmentation');
  assert.equal(failingRequestSize(9 * MiB, 9.5 * MiB), undefined, 'no round size between 9 and 9.5 MiB');
});

test('an OOM verdict explains the OOM, by its own figures', () => {
  const GiB = 2 ** 30;
  const oom = { device: 0, timeUs: 1, requestedBytes: 4 * GiB, deviceFreeBytes: 1 * GiB, deviceTotalBytes: 80 * GiB, reservedBytes: 70 * GiB, allocatedBytes: 60 * GiB, largestFreeBlockBytes: 2 * GiB, verdict: 'fragmentation', stackId: 0 };
  const b = breakdownFromSegments([]);
  assert.equal(verdictSentence(b, undefined, oom), 'Out of memory: a 4.00 GiB request failed although 10.0 GiB was reserved but unallocated; the largest free block was 2.00 GiB, so fragmentation caused it.');
  assert.match(verdictSentence(b, undefined, { ...oom, verdict: 'shortage' }), /device had 1\.00 GiB free of 80\.0 GiB/);
});

test('webview messages outside the contract are dropped', () => {
  assert.equal(parseSnapshotWebviewMessage({ type: 'goToSource', file: 'a.py', line: 1.5 }), undefined);
  assert.equal(parseSnapshotWebviewMessage({ type: 'requestTimeline', requestId: 1, device: 0, t0Us: 5, t1Us: 5, buckets: 10, maxSpans: 10 }), undefined);
  assert.equal(parseSnapshotWebviewMessage({ type: 'exportPng', dataUrl: 'data:text/html,<script>', suggestedName: 'x.png' }), undefined);
  assert.equal(parseSnapshotWebviewMessage({ type: 'rm -rf' }), undefined);
  assert.deepEqual(parseSnapshotWebviewMessage({ type: 'goToSource', file: '/p/train.py', line: 12, extra: 1 }), { type: 'goToSource', file: '/p/train.py', line: 12 });
});

test('column stacking matches a brute-force replay of the ResNet-50 trace', () => {
  // Bands from the real trace (alloc → free_requested), stacked by allocation order.
  const out = execFileSync('python3', ['-c', `
import json, pickle, sys
t = pickle.load(open(sys.argv[1], 'rb'))['device_traces'][0]
live = {}; spans = []
for e in t:
    if e['action'] == 'alloc': live[e['addr']] = (e['time_us'], e['size'])
    elif e['action'] == 'free_requested' and e['addr'] in live:
        s, z = live.pop(e['addr']); spans.append((s, e['time_us'], z))
end = t[-1]['time_us']
spans += [(s, end, z) for s, z in live.values()]
spans.sort(key=lambda x: x[0])
print(json.dumps(spans[:3000]))`, path.join(FIXTURES, 'resnet50-bf16-train-python-stacks.pickle')], { encoding: 'utf8', maxBuffer: 64 << 20 });
  const raw = JSON.parse(out);
  const spans = { startUs: raw.map((s) => s[0]), endUs: raw.map((s) => s[1]), liveAtEnd: raw.map(() => false), size: raw.map((s) => s[2]), stackId: raw.map(() => 0), address: raw.map(() => 0) };
  const v0 = spans.startUs[0];
  const v1 = spans.startUs[spans.startUs.length - 1];
  const columns = 97;
  let checked = 0;
  sweepColumns(spans, v0, v1, columns, (c, live) => {
    const t = v0 + ((c + 0.5) * (v1 - v0)) / columns;
    const expected = raw.map((s, i) => [s, i]).filter(([s]) => s[0] <= t && s[1] > t).map(([, i]) => i);
    assert.deepEqual([...live], expected, `column ${c}`);
    // The band found at the middle of each live band's extent is that band.
    let base = 0;
    for (const i of live) {
      assert.equal(bandAt(spans, t, base + spans.size[i] / 2).index, i);
      base += spans.size[i];
    }
    checked += live.length;
  });
  assert.ok(checked > 1000, `only ${checked} band-columns checked`);
});

function escape(s) {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
