// Note [Figures from stats] (native/addon/src/model.h): a device with no allocation events (figures only,
// GPUMEM_EVENTS=0, or the cudaMallocAsync backend) is read from the recorder's REC_STATS; a device with events
// never is. Captures written record by record with the format's own layouts (native/python/gpumem/_format.py).
import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import { pythonInline, root, tmpDir, withModel } from './reader-support.mjs';
import { summaryDocument } from '../../src/core/analyses/summary/index.ts';

const MiB = 2 ** 20;
const T0 = 5_000_000_000; // ns

// stats: [[t_ns, allocated, reserved, peak_allocated, peak_reserved], …]; alloc: one allocation event first, if given
function capture(stats, { header = { events: false, allocator_mode: 'pytorch' }, alloc, oom } = {}) {
  const file = path.join(tmpDir(), 'figures.gpumem');
  pythonInline(
    `import json, sys
sys.path.insert(0, sys.argv[3])
from gpumem import _format as F
spec = json.loads(sys.argv[2])
head = json.dumps(spec["header"]).encode()
out = F.FileHeader.pack(F.kMagic, F.kMajor, F.kMinor, len(head)) + head
if spec["alloc"]:
    t, size = spec["alloc"]
    out += F.record(F.REC_SEGMENT_ALLOC, F.SegmentEvent.pack(t, 1 << 30, 64 << 20, 0, 0, 0, 0, 0))
    out += F.record(F.REC_ALLOC, F.BlockEvent.pack(t, 1 << 30, size, size, 0, 0, 0))
for t, a, r, pa, pr in spec["stats"]:
    out += F.record(F.REC_STATS, F.StatsRec.pack(t, a, r, a, a, pa, pr, 0, 0))
    if spec["oom"] and spec["oom"][0] <= t:  # after the first sample at or past its time
        t_oom, requested = spec["oom"]
        out += F.record(F.REC_OOM, F.OomRec.pack(t_oom, requested, 1 << 30, 80 << 30, r, a, 0, 0, 0, 0, 0))
        spec["oom"] = None
out += F.record(F.REC_END, F.EndRec.pack(spec["stats"][-1][0] + 1000, 0, 0, 0, 0))
open(sys.argv[1], "wb").write(out)
`,
    file,
    JSON.stringify({ header, stats, alloc: alloc ?? null, oom: oom ?? null }),
    path.join(root, 'native/python'),
  );
  return file;
}

// Four samples 100 ms apart: allocated 1, 3, 2, 2 MiB; between the 3rd and 4th the peak rose to 9 MiB and fell back.
const STATS = [
  [T0, 1 * MiB, 20 * MiB, 1 * MiB, 20 * MiB],
  [T0 + 100e6, 3 * MiB, 20 * MiB, 3 * MiB, 20 * MiB],
  [T0 + 200e6, 2 * MiB, 20 * MiB, 3 * MiB, 20 * MiB],
  [T0 + 300e6, 2 * MiB, 40 * MiB, 9 * MiB, 40 * MiB],
];

test('a device with no events: current, range, timeline and the summary peak are PyTorch figures', () => {
  withModel(capture(STATS), (m) => {
    assert.deepEqual(m.devices(), [0]);
    const c = m.current(0);
    assert.deepEqual([c.allocatedBytes, c.reservedBytes, c.peakAllocatedBytes, c.peakReservedBytes], [2 * MiB, 40 * MiB, 9 * MiB, 40 * MiB]);
    const { t0Us, t1Us } = m.timeRange(0);
    assert.deepEqual([t0Us, t1Us], [T0 / 1000, (T0 + 300e6) / 1000]);
    // One bucket per sample: each holds its sample and the value carried in; the last one shows the peak that was
    // reached between the third and the fourth sample.
    const tl = m.timeline(0, t0Us, t1Us + 1, 4);
    assert.deepEqual(tl.allocatedMin, [1 * MiB, 1 * MiB, 2 * MiB, 2 * MiB]);
    assert.deepEqual(tl.allocatedMax, [1 * MiB, 3 * MiB, 3 * MiB, 9 * MiB]);
    assert.deepEqual(tl.reservedMax, [20 * MiB, 20 * MiB, 20 * MiB, 40 * MiB]);
    const doc = summaryDocument(m);
    assert.equal(doc.devices[0].events, 0);
    assert.equal(doc.devices[0].peak_allocated_bytes, 9 * MiB);
    assert.match(doc.identity.not_recorded[0], /^Allocations were not recorded one by one/);
  });
});

test('a device with events is read from its events: its stats are a second source the reader never uses', () => {
  withModel(capture(STATS, { header: { events: true }, alloc: [T0 - 1000, 4 * MiB] }), (m) => {
    const c = m.current(0);
    assert.deepEqual([c.allocatedBytes, c.peakAllocatedBytes, c.reservedBytes], [4 * MiB, 4 * MiB, 64 * MiB]);
    assert.equal(summaryDocument(m).devices[0].peak_allocated_bytes, 4 * MiB);
    assert.equal(summaryDocument(m).identity.not_recorded, undefined);
  });
});

test('figures only with an out-of-memory error: the OOM is told and the figures are still PyTorch\'s', () => {
  // Note [Figures from stats]: figures only writes an OOM from PyTorch's OOM observer (Note [Figures only]); that one
  // event row must not make the device read as one with events (it did: every figure read 0).
  withModel(capture(STATS, { oom: [T0 + 150e6, 6 * 2 ** 30] }), (m) => {
    const c = m.current(0);
    assert.deepEqual([c.allocatedBytes, c.reservedBytes, c.peakAllocatedBytes], [2 * MiB, 40 * MiB, 9 * MiB]);
    const doc = summaryDocument(m);
    assert.equal(doc.devices[0].peak_allocated_bytes, 9 * MiB);
    const { t0Us, t1Us } = m.timeRange(0);
    const tl = m.timeline(0, t0Us, t1Us + 1, 4);
    assert.deepEqual(tl.allocatedMax, [1 * MiB, 3 * MiB, 3 * MiB, 9 * MiB]);
    const ooms = m.ooms();
    assert.deepEqual(ooms.map((o) => [o.device, o.requestedBytes]), [[0, 6 * 2 ** 30]], 'the OOM is still told');
  });
});
