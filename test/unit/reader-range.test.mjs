// Note [Range-first open] (native/addon/src/range_open.cpp): a time window of a pickle opened alone must answer,
// for every moment inside it, what the full open answers: the allocated/reserved timeline, the peak, the
// allocator state (blocks, their stacks and states, segments) and the bytes per line. Real fixtures, windows at
// the start, in the middle and at the end of the trace.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { FIXTURES, openModel, tmpDir } from './reader-support.mjs';

const { openModelAsync } = await import('../../src/core/base/model/open.ts');

/** The figures of [fromUs, toUs] that a panel shows, from either model. */
function figures(m, dev, fromUs, toUs) {
  const tl = m.timeline(dev, fromUs, toUs, 97);
  const moments = [0, 0.13, 0.5, 0.77, 1].map((f) => Math.round(fromUs + f * (toUs - fromUs)));
  const peak = Math.max(...tl.allocatedMax);
  const peakBucket = tl.allocatedMax.indexOf(peak);
  return {
    timeline: { allocatedMin: tl.allocatedMin, allocatedMax: tl.allocatedMax, reservedMin: tl.reservedMin, reservedMax: tl.reservedMax },
    peak,
    peakBucket,
    states: moments.map((t) => m.stateAt(dev, t)),
    lines: m.diff(dev, moments[1], moments[3]),
  };
}

/**
 * Stack ids differ between models (interned in reading order): compare what they name. A segment's own stack is
 * left out: the full open already gives it by the direction of its replay (undone from the pickle's segments,
 * which carry none, or replayed forward from the segment_alloc event, which does), and a window replays forward.
 */
function resolveStacks(m, value) {
  const out = JSON.parse(JSON.stringify(value), (k, v) => {
    if ((k === 'stack' || k === 'stackId') && typeof v === 'number') return m.stack(v)?.frames ?? null;
    return v;
  });
  for (const st of out.states) for (const seg of st.segments ?? []) delete seg.stackId;
  return out;
}

const PICKLES = FIXTURES.filter((f) => f.endsWith('.pickle'));
for (const file of PICKLES) {
  for (const [a, b] of [[0, 0.25], [0.3, 0.62], [0.8, 1]]) {
    test(`${path.basename(file)}: the window ${a}..${b} opened alone equals the full open there`, async () => {
      const full = openModel(file);
      try {
        for (const dev of full.devices()) {
          const { t0Us, t1Us } = full.timeRange(dev);
          if (!(t1Us > t0Us)) continue;
          const fromUs = Math.round(t0Us + a * (t1Us - t0Us));
          const toUs = Math.round(t0Us + b * (t1Us - t0Us));
          const part = await openModelAsync(file, false, { fromUs, toUs });
          try {
            const want = resolveStacks(full, figures(full, dev, fromUs, toUs));
            const got = resolveStacks(part, figures(part, dev, fromUs, toUs));
            assert.ok(want.states.some((s) => s.segments.length > 0), 'the window has allocator state');
            assert.deepEqual(got.timeline, want.timeline, 'allocated/reserved buckets');
            assert.equal(got.peak, want.peak, 'peak in the window');
            for (let k = 0; k < want.states.length; k++) assert.deepEqual(got.states[k], want.states[k], `state at moment ${k}`);
            assert.deepEqual(got.lines, want.lines, 'bytes per line between two moments');
            // Only the window is held: its events, not the file's.
            const events = (m) => m.summary().devices.find((d) => d.device === dev).events;
            assert.ok(events(part) < events(full), 'fewer events held than the whole trace');
          } finally {
            part.close();
          }
        }
      } finally {
        full.close();
      }
    });
  }
}

test('a window of a truncated pickle is refused with the reader message, and of an inverted window too', async () => {
  const file = PICKLES.find((f) => f.includes('resnet50'));
  const bytes = fs.readFileSync(file);
  const cut = path.join(tmpDir(), 'cut.pickle');
  fs.writeFileSync(cut, bytes.subarray(0, Math.floor(bytes.length * 0.6)));
  await assert.rejects(openModelAsync(cut, false, { fromUs: 0, toUs: 1e18 }), /truncated|ends|incomplete/i);
  await assert.rejects(openModelAsync(file, false, { fromUs: 10, toUs: 5 }), /ends before it starts/);
  assert.ok(fs.readFileSync(file).equals(bytes), 'the input is untouched');
});
