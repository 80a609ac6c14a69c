// Note [Figures after the events] (native/addon/src/model.h): after MARK_EVENTS_OFF (recordSteps N) the process records
// no event one by one, and a device with events reads its REC_STATS samples from the marker on: timeline, current
// figures, the summary's peak and the time range; before it, and without the marker, the events alone. Captures
// written record by record with the format's own layouts (native/python/gpumem/_format.py).
import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import { eventsBeforeOff, eventsOffCapture, tmpDir, withModel } from './reader-support.mjs';

const MiB = 2 ** 20;
const T0 = 5_000_000_000; // ns
const ms = (x) => T0 + x * 1e6; // ns, x ms after T0
const us = (x) => ms(x) / 1000; // the reader's µs (clock anchors 0: monotonic time)

// { events, off, stats }: eventsOffCapture's (./reader-support.mjs)
function capture(spec) {
  return eventsOffCapture(path.join(tmpDir(), 'after-events.gpumem'), spec);
}

// Device 0: a 64 MiB segment, A 10 MiB, B 20 MiB (the events' peak, 30 MiB at 20 ms), B freed, C 5 MiB at 120 ms:
// 15 MiB when the events stop at 150 ms. Device 1: 8 MiB of a 32 MiB segment, before the marker.
const EVENTS = eventsBeforeOff(ms);
const OFF = ms(150);
// PyTorch's figures: one sample before the marker (31 MiB: the events say 30, so a reader of it would show it), then
// samples after it rising above the events' peak, the peak reaching 50 MiB between the 250 ms and 350 ms samples.
const STATS = [
  [ms(25), 0, 31 * MiB, 64 * MiB, 31 * MiB, 64 * MiB],
  [ms(180), 0, 35 * MiB, 80 * MiB, 35 * MiB, 80 * MiB],
  [ms(200), 1, 16 * MiB, 32 * MiB, 16 * MiB, 32 * MiB],
  [ms(250), 0, 40 * MiB, 96 * MiB, 40 * MiB, 96 * MiB],
  [ms(350), 0, 20 * MiB, 96 * MiB, 50 * MiB, 96 * MiB],
  [ms(450), 0, 15 * MiB, 96 * MiB, 50 * MiB, 96 * MiB],
];

test('after MARK_EVENTS_OFF the timeline follows the samples; before it the events; the bucket it falls in spans both', () => {
  withModel(capture({ events: EVENTS, off: OFF, stats: STATS }), (m) => {
    assert.deepEqual(m.devices(), [0, 1]);
    // Five buckets of 100 ms: the first wholly before the marker (the events: 0 → 30 MiB, not the 31 MiB sample), the
    // second holds it (events 10 → 15 MiB, then the 35 MiB sample), the rest the samples with the value carried in,
    // the fourth showing the peak reached between its sample and the one before.
    const tl = m.timeline(0, us(0), us(500), 5);
    assert.deepEqual(tl.allocatedMin, [0, 10 * MiB, 35 * MiB, 20 * MiB, 15 * MiB]);
    assert.deepEqual(tl.allocatedMax, [30 * MiB, 35 * MiB, 40 * MiB, 50 * MiB, 20 * MiB]);
    assert.deepEqual(tl.reservedMin, [0, 64 * MiB, 80 * MiB, 96 * MiB, 96 * MiB]);
    assert.deepEqual(tl.reservedMax, [64 * MiB, 80 * MiB, 96 * MiB, 96 * MiB, 96 * MiB]);
    // A window that starts after the marker carries in the last sample before it (35 MiB at 180 ms).
    const late = m.timeline(0, us(200), us(300), 1);
    assert.deepEqual([late.allocatedMin[0], late.allocatedMax[0]], [35 * MiB, 40 * MiB]);
    // Between the marker and the first sample, the events' figures at the marker are carried in.
    const gap = m.timeline(0, us(160), us(170), 1);
    assert.deepEqual([gap.allocatedMin[0], gap.allocatedMax[0], gap.reservedMax[0]], [15 * MiB, 15 * MiB, 64 * MiB]);
  });
});

test('after MARK_EVENTS_OFF: current figures are the last sample, the peaks and the time range reach the samples', () => {
  withModel(capture({ events: EVENTS, off: OFF, stats: STATS }), (m) => {
    const c = m.current(0);
    assert.deepEqual(
      [c.allocatedBytes, c.reservedBytes, c.peakAllocatedBytes, c.peakReservedBytes, c.timeUs],
      [15 * MiB, 96 * MiB, 50 * MiB, 96 * MiB, us(450)],
    );
    const d0 = m.summary().devices.find((d) => d.device === 0);
    // The first sample that reported 50 MiB (350 ms), not the later one that repeats it.
    assert.deepEqual([d0.peak_allocated_bytes, d0.peak_at_time_us, d0.events], [50 * MiB, us(350), 5]);
    assert.deepEqual(m.timeRange(0), { t0Us: us(0), t1Us: us(450) });
    // The marker holds for every device: device 1's events stopped too, and its sample after the marker is read.
    const c1 = m.current(1);
    assert.deepEqual([c1.allocatedBytes, c1.reservedBytes, c1.peakAllocatedBytes, c1.timeUs], [16 * MiB, 32 * MiB, 16 * MiB, us(200)]);
    assert.deepEqual(m.timeRange(1), { t0Us: us(5), t1Us: us(200) });
    // What the user sees: a notice (process-wide, on device 0) that says why, at the marker's time.
    const notice = m.markers(0).find((k) => k.kind === 'notice');
    assert.equal(notice.timeUs, us(150));
    assert.equal(notice.label, "allocations no longer recorded one by one (recordSteps 5): from here on, PyTorch's figures at each sample");
    assert.equal(notice.detail.level, 'info');
  });
});

test('without the marker a device with events reads its events only: the samples are ignored', () => {
  withModel(capture({ events: EVENTS, off: null, stats: STATS }), (m) => {
    const tl = m.timeline(0, us(0), us(500), 5);
    assert.deepEqual(tl.allocatedMin, [0, 10 * MiB, 15 * MiB, 15 * MiB, 15 * MiB]);
    assert.deepEqual(tl.allocatedMax, [30 * MiB, 15 * MiB, 15 * MiB, 15 * MiB, 15 * MiB]);
    assert.deepEqual(tl.reservedMax, [64 * MiB, 64 * MiB, 64 * MiB, 64 * MiB, 64 * MiB]);
    const c = m.current(0);
    assert.deepEqual(
      [c.allocatedBytes, c.reservedBytes, c.peakAllocatedBytes, c.peakReservedBytes, c.timeUs],
      [15 * MiB, 64 * MiB, 30 * MiB, 64 * MiB, us(120)],
    );
    const d0 = m.summary().devices.find((d) => d.device === 0);
    assert.deepEqual([d0.peak_allocated_bytes, d0.peak_at_time_us], [30 * MiB, us(20)]);
    assert.deepEqual(m.timeRange(0), { t0Us: us(0), t1Us: us(120) });
    assert.equal(m.markers(0).length, 0);
  });
});

test("samples whose peak equals the events' peak keep the events' peak and its time", () => {
  // PyTorch's peak counts from the process start: after the marker the samples repeat the events' 30 MiB.
  const stats = [
    [ms(180), 0, 12 * MiB, 64 * MiB, 30 * MiB, 64 * MiB],
    [ms(250), 0, 14 * MiB, 64 * MiB, 30 * MiB, 64 * MiB],
  ];
  withModel(capture({ events: EVENTS, off: OFF, stats }), (m) => {
    const d0 = m.summary().devices.find((d) => d.device === 0);
    assert.deepEqual([d0.peak_allocated_bytes, d0.peak_at_time_us], [30 * MiB, us(20)]);
    const c = m.current(0);
    assert.deepEqual([c.allocatedBytes, c.peakAllocatedBytes, c.timeUs], [14 * MiB, 30 * MiB, us(250)]);
    // No peak rise after the marker: the buckets hold the samples and the value carried in, nothing higher.
    const tl = m.timeline(0, us(200), us(300), 1);
    assert.deepEqual([tl.allocatedMin[0], tl.allocatedMax[0]], [12 * MiB, 14 * MiB]);
  });
});
