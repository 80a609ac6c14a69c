// Figures-only runs are exact, and device used and reserved of a moment come from one sample, on real H200 captures
// (test/fixtures/conformance: each capture with the truth PyTorch measured in the same run, README.md there).
// Notes [Figures from stats] and [Figures after the events] (native/addon/src/model.h), [Figures at the end] and
// [Figures at step ends] (native/addon/src/aggregate.cpp), [Device samples of a moment] (native/addon/src/samples.cpp),
// [What the engine cannot answer] (src/core/analyses/replay/unmodelled.ts). Each capture's samples and PyTorch's
// figures are read again, record by record, by reference/device_samples.py.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import zlib from 'node:zlib';
import { python, pythonInline, root, tmpDir, withModel } from './reader-support.mjs';
import { formatBytes } from '../../src/core/base/units/bytes.ts';
import { summarizeFile } from '../../src/core/analyses/summary/index.ts';
import { timeBaseOf } from '../../src/core/analyses/steps/timebase.ts';
import { figuresOf } from '../../src/core/views/live/view.ts';
import { replayPolicies } from '../../src/core/analyses/replay/index.ts';
import { advise } from '../../src/core/analyses/advice/index.ts';
import { POLICIES } from '../../src/core/base/model/whatIf.ts';
import { buildSummary } from '../../src/core/views/snapshot/summaryView.ts';
import { categoriesView } from '../../src/core/views/snapshot/categoriesView.ts';

const DIR = path.join(root, 'test/fixtures/conformance');
const work = tmpDir();
/** The gunzipped capture of a fixture, in a temp folder. */
function capture(name, dir = DIR) {
  const out = path.join(work, `${path.basename(dir)}-${name}.gpumem`);
  if (!fs.existsSync(out)) fs.writeFileSync(out, zlib.gunzipSync(fs.readFileSync(path.join(dir, `${name}.capture.gz`))));
  return out;
}
// Two real H200 captures whose device samples tell the stories below (a peak whose stretch has no sample; passes of a
// cudaMallocAsync run that read device used below reserved while the pool moved), kept because a regathered
// conformance run need not show them again.
const SAMPLES = path.join(root, 'test/fixtures/device-samples');
const truthOf = (name) => {
  const f = path.join(DIR, `${name}.truth.json`);
  return fs.existsSync(f) ? JSON.parse(fs.readFileSync(f, 'utf8')) : undefined;
};
const CAPTURES = fs.readdirSync(DIR).filter((f) => f.endsWith('.capture.gz')).map((f) => f.slice(0, -'.capture.gz'.length)).sort();
// Figures-only runs: PyTorch's cudaMallocAsync backend, --figures-only, and the runs whose last steps are figures only
// (--record-steps 2). Picked up by name as they are gathered.
const FIGURE_RUNS = CAPTURES.filter((n) => n.startsWith('figures_async-') || n.endsWith('-auto-figures') || n.endsWith('-auto-record2'));

test('the fixtures hold a cudaMallocAsync run with its truth', () => {
  assert.ok(CAPTURES.includes('figures_async-auto'));
  assert.equal(truthOf('figures_async-auto').backend, 'cudaMallocAsync');
  assert.ok(CAPTURES.length >= 20, `${CAPTURES.length} captures`);
});

for (const name of FIGURE_RUNS) {
  test(`${name}: the summary's figures are PyTorch's own, in text and --json`, () => {
    const truth = truthOf(name);
    const file = capture(name);
    const facts = python('device_samples.py', file);
    const { summary, text } = summarizeFile(file);
    const [d] = summary.devices;
    assert.equal(summary.devices.length, 1);
    // Peaks: PyTorch's peak counters, exactly what max_memory_allocated()/max_memory_reserved() said.
    assert.equal(d.peak_allocated_bytes, truth.max_allocated);
    assert.equal(d.peak_reserved_bytes, truth.max_reserved);
    // The end: the last figures PyTorch reported (the capture's last REC_STATS), at that sample's time.
    const last = facts.stats.filter((s) => s.device === d.device).at(-1);
    assert.equal(d.end_sample_us, last.t_us);
    assert.deepEqual([d.reserved_bytes, d.allocated_bytes], [last.reserved, last.allocated]);
    assert.ok(d.reserved_bytes > 0, 'reserved is measured, not 0');
    // Where the bootstrap read the figures once more as the process ended (Note [Last figures], after the workload's
    // TRUTH line), they are the run's end; figures_async-auto was gathered before that read existed: its last sample
    // came 4 ms before the last step ended, and the truth's end (704 MiB reserved) after it.
    const stepEnds = withModel(file, (m) => timeBaseOf(m).steps.steps.map((s) => s.endUs));
    if (name !== 'figures_async-auto' || last.t_us > stepEnds.at(-1)) {
      assert.equal(d.reserved_bytes, truth.reserved_end);
    } else {
      assert.equal(truth.reserved_end, 738197504);
      assert.equal(last.reserved, 671088640);
    }
    // Nothing of the allocator's state is known at the end: no zeros passed off as measured.
    assert.deepEqual([d.segments, d.blocks, d.allocated_blocks, d.largest_free_block_bytes], [null, null, null, null]);
    assert.match(text, new RegExp(`GPU reserved memory\\s+${esc(formatBytes(d.reserved_bytes))}  PyTorch's figure`));
    assert.match(text, new RegExp(`Peak reserved memory\\s+${esc(formatBytes(truth.max_reserved))}`));
    assert.match(text, /Largest free block\s+—/);
    if (d.events === 0) assert.equal(summary.categories[0].peak, null, 'no category is known without events');
  });

  test(`${name}: no what-if, replay or advice prediction, and one line that says why`, () => {
    const file = capture(name);
    const { summary, text } = summarizeFile(file);
    const [d] = summary.devices;
    assert.equal(d.what_if, undefined);
    assert.equal(typeof d.what_if_none, 'string');
    assert.doesNotMatch(text, /would release|served without reserving more/);
    assert.equal(text.split('\n').filter((l) => l.startsWith(`What-if, device ${d.device}: none, as `)).length, 1);
    withModel(file, (m) => {
      // with no event at all nothing can be replayed; after the recorded steps (--record-steps) their stream can,
      // and only the end has no allocator state
      if (d.events === 0) {
        const set = replayPolicies(m, d.device, POLICIES);
        assert.deepEqual([set.results.length, set.none], [0, d.what_if_none]);
        const a = advise(m, d.device);
        assert.deepEqual([a.items.length, a.ownPolicy], [0, undefined]);
        assert.deepEqual(a.notOffered, [`any advice: ${d.what_if_none}`]);
      } else {
        assert.match(d.what_if_none, /after the recorded steps were not recorded one by one/);
      }
      // the snapshot panel: PyTorch's figures at the end, the allocator state said to be unknown, no what-if verdict
      const s = buildSummary(m, d.device);
      assert.deepEqual([s.reservedBytes, s.allocatedBytes, s.peakReservedBytes], [d.reserved_bytes, d.allocated_bytes, d.peak_reserved_bytes]);
      assert.equal(s.endFromStats?.sampleUs, d.end_sample_us);
      assert.match(s.verdict, /no allocation was recorded one by one then/);
      assert.doesNotMatch(s.verdict, /would release/);
    });
  });

  test(`${name}: step rows of the figures are PyTorch's at the step's last sample, or unknown, never zeros`, () => {
    const file = capture(name);
    const facts = python('device_samples.py', file);
    const { summary, text } = summarizeFile(file);
    const steps = summary.steps?.[0]?.steps ?? [];
    assert.ok(steps.length > 0, 'the run has steps');
    const stats = steps.filter((r) => r.source === 'stats');
    assert.ok(stats.length > 0);
    let prev = -Infinity;
    for (const r of steps) {
      if (r.source === 'stats') {
        // the last REC_STATS read inside the step (after the step before it ended, at or before its end)
        const inside = facts.stats.filter((s) => s.t_us > prev && s.t_us <= r.end_us && (facts.events_off_us === null || s.t_us >= facts.events_off_us)).at(-1);
        if (inside) {
          assert.deepEqual(
            [r.sample_us, r.allocated_at_end_bytes, r.reserved_at_end_bytes, r.peak_allocated_bytes, r.peak_is_counter],
            [inside.t_us, inside.allocated, inside.reserved, inside.peak_allocated, true],
          );
        } else {
          assert.deepEqual([r.sample_us, r.allocated_at_end_bytes, r.reserved_at_end_bytes, r.peak_allocated_bytes], [null, null, null, null]);
        }
        assert.equal(r.categories, undefined, 'no category is known where no event was recorded');
      }
      prev = r.end_us;
    }
    // a step with no sample read inside it is "—" in the text, never 0 B
    for (const r of stats.filter((x) => x.sample_us === null)) assert.match(text, new RegExp(`\\n\\s+${r.step}(\\s+—){4,}\\n`));
    assert.match(text, /peak \(≤\) is PyTorch's peak counter then/);
  });
}

// Note [Device samples of a moment]: for every capture, at the peak, at each step end and now, the device sample the
// figures come from is a real sample, with the reserved of its own moment (its device's segment events at its time,
// or the figures of its own pass), device used never below it, and "not from the allocator" their difference.
for (const name of CAPTURES) {
  test(`${name}: device used and reserved of a moment come from one sample; device used is never below reserved`, () => {
    const file = capture(name);
    const facts = python('device_samples.py', file);
    withModel(file, (m) => {
      const time = timeBaseOf(m);
      const ends = time.steps.steps.map((s) => s.endUs);
      for (const device of m.devices()) {
        const samples = facts.samples.filter((s) => s.device === device);
        const figuresFrom = (facts.events[device] ?? 0) === 0 ? -Infinity : facts.events_off_us ?? Infinity;
        const check = (label, sample, reserved) => {
          const own = samples.find((s) => s.t_us === sample.timeUs && s.used === sample.usedBytes);
          assert.ok(own, `${label}: a sample of the capture`);
          assert.equal(sample.reservedBytes, own.t_us < figuresFrom ? own.events_reserved : own.pass_reserved, `${label}: the sample's own reserved`);
          assert.ok(sample.usedBytes >= sample.reservedBytes, `${label}: device used ${sample.usedBytes} ≥ reserved ${sample.reservedBytes}`);
          if (reserved !== undefined) assert.ok(sample.usedBytes >= reserved, `${label}: device used ≥ the reserved shown beside it`);
        };
        const report = m.categories(device, ends, false);
        const moments = [['peak', report.peak], ...report.moments.map((mo, i) => [`step ${i + 1} end`, mo])];
        let seen = 0;
        for (const [label, mo] of moments) {
          if (!mo || !mo.deviceSample) continue;
          seen++;
          assert.equal(mo.notFromAllocatorBytes, mo.deviceSample.usedBytes - mo.deviceSample.reservedBytes, label);
          if (mo.deviceUsedBytes !== undefined) {
            assert.equal(mo.deviceUsedBytes, mo.deviceSample.usedBytes, label);
            assert.equal(mo.reservedBytes, mo.deviceSample.reservedBytes, `${label}: device used is shown only with its own reserved`);
            check(label, mo.deviceSample, mo.reservedBytes);
          } else {
            check(label, mo.deviceSample);
          }
        }
        if (samples.length && report.peak) assert.ok(seen > 0, 'the peak has a device sample');
        // now: the live panel's figures
        const c = m.current(device);
        if (c.deviceSample) {
          check('now', c.deviceSample, c.deviceUsedBytes === undefined ? undefined : c.reservedBytes);
          const f = figuresOf(m, device);
          assert.equal(f.unattributedBytes, c.deviceSample.usedBytes - c.deviceSample.reservedBytes);
          if (f.deviceUsedBytes !== undefined) assert.ok(f.deviceUsedBytes >= f.reservedBytes);
          else assert.equal(f.deviceUsedPending, true);
        }
        // the graphs: a bucket's device used is never below its reserved
        const { t0Us, t1Us } = m.timeRange(device);
        const tl = m.timeline(device, t0Us, t1Us + 1, 64);
        tl.deviceUsedMax?.forEach((u, k) => {
          if (Number.isFinite(u)) assert.ok(u >= tl.reservedMax[k], `bucket ${k}: device used ${u} ≥ reserved ${tl.reservedMax[k]}`);
        });
        // the snapshot panel's categories: device used only beside its own reserved
        const view = categoriesView(m, device, time, 1, undefined, (f) => f);
        if (view.peak?.beyond.deviceUsedBytes !== undefined) assert.ok(view.peak.beyond.deviceUsedBytes >= view.peak.reservedBytes);
      }
    });
  });
}

test('a peak with no sample of its own: device used is not shown beside its reserved', () => {
  // Its peak's stretch (from the last segment growth) has no sample; the one that stands in for "not from the
  // allocator" was read before a growth: 6.89 GiB used, 5.54 GiB reserved, beside the peak's 7.34 GiB reserved.
  withModel(capture('alloc_conf-auto', SAMPLES), (m) => {
    const p = m.categories(0, [], false).peak;
    assert.equal(p.deviceUsedBytes, undefined);
    assert.ok(p.deviceSample.usedBytes < p.reservedBytes, 'the stand-in sample read less than the peak reserved');
    assert.equal(p.notFromAllocatorBytes, p.deviceSample.usedBytes - p.deviceSample.reservedBytes);
  });
  const { text } = summarizeFile(capture('alloc_conf-auto', SAMPLES));
  assert.match(text, /not from the allocator\s+1\.35 GiB .*the nearest device sample: 6\.89 GiB used, 5\.54 GiB reserved\)/);
  assert.doesNotMatch(text, /\n {2}device used /);
});

test('a device sample whose pass read device used below reserved is never picked (cudaMallocAsync)', () => {
  const facts = python('device_samples.py', capture('figures_async-auto', SAMPLES));
  const torn = facts.samples.filter((s) => s.pass_reserved !== null && s.used < s.pass_reserved);
  assert.ok(torn.length >= 40, `${torn.length} passes read device used below reserved`);
  withModel(capture('figures_async-auto', SAMPLES), (m) => {
    const { t0Us, t1Us } = m.timeRange(0);
    const tl = m.timeline(0, t0Us, t1Us + 1, 4096);
    // every bucket holding a torn pass still shows device used at least reserved
    for (const s of torn) {
      const k = Math.min(4095, Math.floor(((s.t_us - t0Us) / (t1Us + 1 - t0Us)) * 4096));
      assert.ok(tl.deviceUsedMax[k] >= tl.reservedMax[k]);
    }
    const c = m.current(0);
    assert.ok(!torn.some((s) => s.t_us === c.deviceSample.timeUs));
  });
});

// A run whose events stop after its recorded steps (Note [Figures after the events]): step rows after the stop are
// PyTorch's, the categories there unknown, the end PyTorch's figure, and no what-if at the end.
test('after the recorded steps: the step rows, categories, end and what-if follow the figures', () => {
  const MiB = 2 ** 20;
  const ms = (x) => 5e9 + x * 1e6;
  const file = path.join(tmpDir(), 'record-steps.gpumem');
  pythonInline(
    `import json, sys
sys.path.insert(0, sys.argv[2])
from gpumem import _format as F
head = json.dumps({"events": True, "record_steps": 2, "mono_anchor_ns": 0, "wall_anchor_ns": 0}).encode()
out = F.FileHeader.pack(F.kMagic, F.kMajor, F.kMinor, len(head)) + head
for sid, s in ((1, b"recordSteps 2"), (2, b"optimizer.step")):
    out += F.record(F.REC_STRING, F.StringRec.pack(sid, len(s)) + s)
ms = lambda x: int(5e9 + x * 1e6)
MiB = 1 << 20
out += F.record(F.REC_SEGMENT_ALLOC, F.SegmentEvent.pack(ms(1), 1 << 30, 64 * MiB, 0, 0, 0, 0, 0))
out += F.record(F.REC_ALLOC, F.BlockEvent.pack(ms(2), 1 << 30, 10 * MiB, 10 * MiB, 0, 0, 0))
out += F.record(F.REC_DEVICE_SAMPLE, F.DeviceSampleRec.pack(ms(50), 600 * MiB, 80 << 30, 0))
out += F.record(F.REC_MARKER, F.MarkerRec.pack(ms(100), 2, 4))  # step 1 ends
out += F.record(F.REC_MARKER, F.MarkerRec.pack(ms(200), 2, 4))  # step 2 ends
out += F.record(F.REC_MARKER, F.MarkerRec.pack(ms(210), 1, F.MARK_EVENTS_OFF))
# figures after the stop: a pass at 250 ms (device used first, then PyTorch's figures), one at 450 ms
out += F.record(F.REC_DEVICE_SAMPLE, F.DeviceSampleRec.pack(ms(250), 700 * MiB, 80 << 30, 0))
out += F.record(F.REC_STATS, F.StatsRec.pack(ms(250) + 90000, 30 * MiB, 96 * MiB, 30 * MiB, 30 * MiB, 90 * MiB, 96 * MiB, 0, 0))
out += F.record(F.REC_MARKER, F.MarkerRec.pack(ms(300), 2, 4))  # step 3 ends
out += F.record(F.REC_MARKER, F.MarkerRec.pack(ms(400), 2, 4))  # step 4 ends: no sample inside it
out += F.record(F.REC_DEVICE_SAMPLE, F.DeviceSampleRec.pack(ms(450), 50 * MiB, 80 << 30, 0))  # torn: below reserved
out += F.record(F.REC_STATS, F.StatsRec.pack(ms(450) + 90000, 20 * MiB, 128 * MiB, 20 * MiB, 20 * MiB, 90 * MiB, 128 * MiB, 0, 0))
out += F.record(F.REC_MARKER, F.MarkerRec.pack(ms(500), 2, 4))  # step 5 ends
out += F.record(F.REC_END, F.EndRec.pack(ms(510), 0, 0, 0, 0))
open(sys.argv[1], "wb").write(out)
`,
    file,
    path.join(root, 'native/python'),
  );
  const us = (x) => ms(x) / 1000;
  const { summary, text } = summarizeFile(file);
  const [d] = summary.devices;
  assert.deepEqual([d.reserved_bytes, d.allocated_bytes, d.end_sample_us, d.segments], [128 * MiB, 20 * MiB, us(450) + 90, null]);
  assert.deepEqual([d.peak_allocated_bytes, d.peak_reserved_bytes], [90 * MiB, 128 * MiB]);
  assert.match(d.what_if_none, /after the recorded steps were not recorded one by one: the allocator's state at the end is not known/);
  const rows = summary.steps[0].steps;
  assert.deepEqual(
    rows.map((r) => [r.step, r.source ?? 'events', r.allocated_at_end_bytes, r.reserved_at_end_bytes, r.peak_allocated_bytes]),
    [
      [1, 'events', 10 * MiB, 64 * MiB, 10 * MiB],
      [2, 'events', 10 * MiB, 64 * MiB, 10 * MiB],
      [3, 'stats', 30 * MiB, 96 * MiB, 90 * MiB],
      [4, 'stats', null, null, null],
      [5, 'stats', 20 * MiB, 128 * MiB, 90 * MiB],
    ],
  );
  assert.deepEqual(rows.map((r) => r.categories !== undefined), [true, true, false, false, false]);
  assert.match(text, /Steps 3–5: no allocation was recorded one by one/);
  withModel(file, (m) => {
    // categories: known up to the stop, null after it
    const report = m.categories(0, [us(150), us(300)], false);
    assert.notEqual(report.moments[0], null);
    assert.equal(report.moments[1], null);
    // now: the last pass read device used below its reserved, so it stands in for "not from the allocator" only from
    // the 250 ms pass (700 − 96 MiB), and device used waits: it would read below the 128 MiB reserved beside it
    const c = m.current(0);
    assert.deepEqual(c.deviceSample, { timeUs: us(250), usedBytes: 700 * MiB, reservedBytes: 96 * MiB });
    assert.equal(c.deviceUsedBytes, undefined);
    assert.equal(figuresOf(m, 0).unattributedBytes, 604 * MiB);
    // the events' moment at step 1's end: the 50 ms sample is of its stretch (64 MiB reserved since 1 ms)
    const end1 = m.categories(0, [us(100)], false).moments[0];
    assert.deepEqual([end1.deviceUsedBytes, end1.notFromAllocatorBytes], [600 * MiB, 536 * MiB]);
  });
});

function esc(s) {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
