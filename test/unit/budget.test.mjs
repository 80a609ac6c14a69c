// Budgeted captures through the extension's reader (FORMAT.md §5, Note [Capture budget]): the GPT-2-size
// loop of test/bench/budget/gen_stream.py on the simulated device, without a budget, and the same stream written
// again through the writer with a 2 MiB budget (rebudget.cc: same times and ids). The summary's whole-run figures
// agree, per-line counts and totals agree, and the integrity part says which part of the run is aggregated.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { ALLOCATOR_LIB, needsAllocator, openModel, root, tmpDir } from './reader-support.mjs';

const { summarizeFile } = await import('../../src/core/analyses/summary/index.ts');
const { timeBaseOf } = await import('../../src/core/analyses/steps/timebase.ts');

const BUDGET = 2 * 1024 * 1024;
const skip = needsAllocator || (spawnSync('g++', ['--version']).status === 0 ? false : 'needs g++ for rebudget.cc');

function run(cmd, args) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 1 << 26 });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed:\n${r.stderr}`);
  return r.stdout;
}

/** A stream recorded by `generator` (test/bench/budget/GENERATOR LIB OUT ARG) without a budget, and the same
 * stream written again through the writer with `budget` (rebudget.cc); rebudget's JSON line (compactions, merges). */
function rebudgeted(generator, arg, budget) {
  const dir = tmpDir();
  const tool = path.join(dir, 'rebudget');
  const src = path.join(root, 'native/allocator/src');
  run('g++', ['-std=c++17', '-O1', '-o', tool, path.join(root, 'test/bench/budget/rebudget.cc'), path.join(src, 'writer.cc'), path.join(src, 'compactor.cc'), '-lpthread']);
  const full = path.join(dir, 'full.gpumem');
  const budgeted = path.join(dir, 'budgeted.gpumem');
  run('python3', [path.join(root, 'test/bench/budget', generator), ALLOCATOR_LIB, full, arg]);
  return { full, budgeted, ...JSON.parse(run(tool, [full, budgeted, String(budget)])) };
}

function pair() {
  return rebudgeted('gen_stream.py', '200000', BUDGET);
}

const files = skip ? null : pair();

test('a budgeted capture has the whole-run figures of the unbudgeted one and stays under its budget', { skip }, () => {
  const { full, budgeted } = files;
  assert.ok(fs.statSync(full).size > 4 * BUDGET, 'the stream is larger than the budget');
  assert.ok(fs.statSync(budgeted).size <= BUDGET);
  const u = summarizeFile(full).summary;
  const b = summarizeFile(budgeted).summary;
  // The replay's self-check replays the events the file keeps: a compacted range keeps its restated moments only, so
  // it is no whole-run figure (Note [Replay check]).
  // The backward peak likewise is read from the events kept in detail (Note [Backward peak of the detail] in
  // native/addon/src/aggregate.cpp): a compacted range keeps no backward phase.
  const strip = (devs) =>
    devs.map((dev) => {
      const { events: _e, replay_check: _r, ...d } = dev;
      for (const k of Object.keys(d)) if (k.startsWith('backward_')) delete d[k];
      return d;
    });
  assert.ok(u.devices[0].peak_allocated_bytes > 0);
  assert.deepEqual(strip(b.devices), strip(u.devices));
  assert.ok(u.top_lines.length > 3);
  assert.deepEqual(b.top_lines, u.top_lines);
  assert.deepEqual(b.ooms, u.ooms);
  assert.deepEqual(b.categories, u.categories);
  assert.deepEqual(
    b.steps.map((s) => s.steps.map((x) => x.end_us)),
    u.steps.map((s) => s.steps.map((x) => x.end_us)),
  );
  assert.equal(b.integrity.endS, u.integrity.endS);
});

test('per-line counts and totals of a budgeted capture are those of the whole run', { skip }, () => {
  const lines = (file) => {
    const m = openModel(file);
    try {
      return m.lineStats(0).map((l) => JSON.stringify(l)).sort();
    } finally {
      m.close();
    }
  };
  const u = lines(files.full);
  assert.ok(u.length > 3);
  assert.deepEqual(lines(files.budgeted), u);
});

test('the integrity part says which part of the run is aggregated and from when every event is kept', { skip }, () => {
  const u = summarizeFile(files.full).summary;
  const s = summarizeFile(files.budgeted);
  const budget = s.summary.integrity.budget;
  assert.equal(u.integrity.budget, undefined);
  assert.equal(budget.budget_bytes, BUDGET);
  // Several ranges, or fewer once they were merged (Note [Budget as a cap]); either way from the run's start.
  assert.ok(budget.aggregated.length >= 1);
  assert.ok(Math.min(...budget.aggregated.map((r) => r.from_s)) < 0.001);
  for (const r of budget.aggregated) assert.ok(r.from_s <= r.to_s && r.events > 0);
  assert.equal(budget.full_detail_from_s, Math.max(...budget.aggregated.map((r) => r.to_s)));
  // Events compacted = the stream's events − the budgeted file's events that are not restated moments.
  const m = openModel(files.budgeted);
  let restated;
  try {
    restated = m.fileInfo().aggregated.reduce((n, r) => n + r.restated, 0);
  } finally {
    m.close();
  }
  assert.equal(budget.events_compacted, u.devices[0].events - (s.summary.devices[0].events - restated));
  const sentence = s.summary.integrity.sentences.find((x) => x.startsWith('Budgeted capture'));
  assert.match(sentence, /^Budgeted capture \(2\.00 MiB\): every event from \d+\.\d{3} s on is kept/);
  // The text summary says it too, word for word (wrapped in its box).
  const words = (t) => t.replace(/[|!]/g, ' ').split(/\s+/).filter(Boolean).join(' ');
  assert.ok(words(s.text).includes(words(sentence)), 'the text summary says it too');
});

test("the timeline of a budgeted capture spans the compacted ranges' buckets and keeps the peak", { skip }, () => {
  const timeline = (file) => {
    const m = openModel(file);
    try {
      const { t0Us, t1Us } = m.timeRange(0);
      const fullFrom = Math.max(0, ...(m.fileInfo().aggregated ?? []).map((r) => r.toUs));
      return { tl: m.timeline(0, t0Us, t1Us, 200), t0Us, t1Us, fullFrom, peak: m.summary().devices[0].peak_allocated_bytes };
    } finally {
      m.close();
    }
  };
  const u = timeline(files.full);
  const b = timeline(files.budgeted);
  assert.equal(b.t0Us, u.t0Us);
  assert.equal(Math.max(...u.tl.allocatedMax), u.peak);
  assert.equal(Math.max(...b.tl.allocatedMax), u.peak);
  // Inside the compacted part the shape comes from REC_TIMELINE: every display bucket there moves (min < max),
  // as in the unbudgeted timeline, instead of the few steps restated moments alone would draw.
  const w = (u.t1Us - u.t0Us) / 200;
  const inside = [...Array(200).keys()].filter((k) => u.t0Us + (k + 1) * w < b.fullFrom && u.tl.allocatedMin[k] < u.tl.allocatedMax[k]);
  assert.ok(inside.length > 20);
  for (const k of inside) {
    assert.ok(b.tl.allocatedMin[k] < b.tl.allocatedMax[k], `bucket ${k}`);
    assert.ok(b.tl.allocatedMin[k] <= u.tl.allocatedMax[k] && b.tl.allocatedMax[k] >= u.tl.allocatedMin[k], `bucket ${k} overlaps`);
    assert.ok(b.tl.allocatedMax[k] <= u.peak);
  }
});

// Note [Pending frees across a cut] (compactor.cc): a range that ends between a block's free_requested and its
// free_completed. compact_at.cc puts the ends exactly where a live recording's writer put them on CI (2026-11-26),
// where the old compactor left the window's free_completed without its request and the reader, rebuilding the peak
// backwards, showed a 3 MiB block pending at the peak ("pendingFreeBytes: 3145728" against 0). Each end is given as
// the number of block events before it: those are the same in every run of gen_stream.py, while the device samples
// between them follow the clock.
const CI_CUTS = [1417, 20495, 21711, 41306, 60816, 80840, 100611, 113721, 132574, 151845, 171885, 191486];

function records(file) {
  const d = fs.readFileSync(file);
  const out = [];
  for (let pos = 16 + d.readUInt32LE(12); pos + 8 <= d.length; pos += 8 + d.readUInt32LE(pos + 4)) {
    const type = d[pos];
    const block = type >= 10 && type <= 12;
    out.push({ type, flags: d.readUInt16LE(pos + 2), addr: block ? d.readBigUInt64LE(pos + 16) : 0n });
  }
  return out;
}

function compactAt(cuts) {
  const dir = tmpDir();
  const tool = path.join(dir, 'compact_at');
  const out = path.join(dir, 'cut.gpumem');
  run('g++', ['-std=c++17', '-O1', '-o', tool, path.join(root, 'test/bench/budget/compact_at.cc'), path.join(root, 'native/allocator/src/compactor.cc')]);
  run(tool, [files.full, out, String(BUDGET), ...cuts.map(String)]);
  return out;
}

test('a range cut between a free request and its completion: the reader sees the peak as it was, nothing pending', { skip }, () => {
  const full = records(files.full);
  const at = []; // record index of each cut: right after its number of block events
  for (let i = 0, n = 0; i < full.length && at.length < CI_CUTS.length; i++) {
    if (n === CI_CUTS[at.length]) at.push(i);
    if (full[i].type >= 10 && full[i].type <= 12) n++;
  }
  const last = at.at(-1);
  // The stream still has the shape this test needs: the last cut splits a block's free in two.
  assert.equal(full[last - 1].type, 11);
  assert.equal(full[last].type, 12);
  assert.equal(full[last].addr, full[last - 1].addr);
  const cut = compactAt(at);
  const u = summarizeFile(files.full).summary;
  const b = summarizeFile(cut).summary;
  assert.equal(u.categories[0].peak.beyond_allocated.pendingFreeBytes, 0);
  assert.deepEqual(b.categories, u.categories);
  assert.deepEqual(b.top_lines, u.top_lines);
  // Every free_completed in the compacted capture completes a request the reader has seen.
  const pending = new Set();
  const lone = [];
  records(cut).forEach((r, i) => {
    if (r.type === 11) pending.add(r.addr);
    else if (r.type === 12 && !pending.delete(r.addr)) lone.push(i);
  });
  assert.deepEqual(lone, []);
});

// Note [Budget as a cap] (compactor.cc): a fast-step loop whose verbatim records (phase begins,
// module marks, tags, device samples) outgrow any budget unless the compacted history is thinned too.
const FAST_BUDGET = 256 * 1024;
const fast = skip ? null : rebudgeted('gen_fast_steps.py', '3000', FAST_BUDGET);

test('a fast-step run with many markers, tags and samples stays under a small budget with its whole-run figures', { skip }, () => {
  const size = fs.statSync(fast.budgeted).size;
  assert.ok(fs.statSync(fast.full).size > 100 * FAST_BUDGET, 'the run is far larger than the budget');
  assert.ok(size <= FAST_BUDGET, `${size} bytes for a budget of ${FAST_BUDGET}`);
  assert.ok(fast.merges > 0, 'the compacted history was merged and thinned');
  const u = summarizeFile(fast.full).summary;
  const b = summarizeFile(fast.budgeted).summary;
  // The replay's self-check replays the events the file keeps: a compacted range keeps its restated moments only, so
  // it is no whole-run figure (Note [Replay check]).
  // The backward peak likewise is read from the events kept in detail (Note [Backward peak of the detail] in
  // native/addon/src/aggregate.cpp): a compacted range keeps no backward phase.
  const strip = (devs) =>
    devs.map((dev) => {
      const { events: _e, replay_check: _r, ...d } = dev;
      for (const k of Object.keys(d)) if (k.startsWith('backward_')) delete d[k];
      return d;
    });
  assert.deepEqual(strip(b.devices), strip(u.devices));
  assert.equal(u.top_lines.length, 4); // parameters, optimizer state, gradients, block activations
  assert.deepEqual(b.top_lines, u.top_lines);
  const lines = (file) => {
    const m = openModel(file);
    try {
      return m.lineStats(0).map((l) => JSON.stringify(l)).sort();
    } finally {
      m.close();
    }
  };
  assert.deepEqual(lines(fast.budgeted), lines(fast.full));
  assert.deepEqual(
    b.steps.map((s) => s.steps.map((x) => x.end_us)),
    u.steps.map((s) => s.steps.map((x) => x.end_us)),
  );
  assert.equal(u.steps[0].steps.length, 3000);
  // Tagged categories at the peak are exact (the tags travel with their restated blocks); what the phases make of
  // an untagged block is not restated (Note [Budget as a cap]): activations may read as other, in the same total.
  const [cu, cb] = [u.categories[0].peak, b.categories[0].peak];
  assert.equal(cb.allocated_bytes, cu.allocated_bytes);
  assert.equal(cb.time_us, cu.time_us);
  for (const k of ['parameter', 'gradient', 'optimizer_state']) assert.equal(cb.bytes[k], cu.bytes[k], k);
  assert.ok(cu.bytes.parameter > 0 && cu.bytes.gradient > 0 && cu.bytes.optimizer_state > 0);
  const untagged = (x) => x.activation + x.temporary + x.other;
  assert.equal(untagged(cb.bytes), untagged(cu.bytes));
  // The device-used peak survives the thinning of the samples (REC_DEVICE_SAMPLE: t_ns, used, total, process).
  const usedPeak = (file) => {
    const d = fs.readFileSync(file);
    let peak = 0n;
    let samples = 0;
    for (let pos = 16 + d.readUInt32LE(12); pos + 8 <= d.length; pos += 8 + d.readUInt32LE(pos + 4)) {
      if (d[pos] !== 40) continue;
      samples++;
      const used = d.readBigUInt64LE(pos + 16);
      if (used > peak) peak = used;
    }
    return { peak, samples };
  };
  const [su, sb] = [usedPeak(fast.full), usedPeak(fast.budgeted)];
  assert.ok(su.peak > 0n && sb.samples <= su.samples, `${sb.samples} of ${su.samples} samples kept`);
  assert.equal(sb.peak, su.peak);
});

// A 2-minute run of 5 ms steps on an H100 (test/gpu/budget_check.py: 22 k steps) has hundreds of thousands of
// markers; `gpumem summary` of its capture died with "Maximum call stack size exceeded" (the time base gathered
// the markers with push(...all), past V8's argument limit). The fast-step run's own markers, repeated 50 times
// later in time, stand for such a run: 150 000 steps, each found.
test('the time base of a run with 300 000 markers finds every step', { skip }, () => {
  const m = openModel(fast.full);
  try {
    const info = m.fileInfo();
    const one = m.markers(0);
    assert.equal(one.length, 6000);
    const span = one[one.length - 1].timeUs - one[0].timeUs + 1000;
    const many = [];
    for (let k = 0; k < 50; k++) for (const x of one) many.push({ ...x, timeUs: x.timeUs + k * span });
    const tb = timeBaseOf({ fileInfo: () => info, markers: () => many });
    assert.equal(tb.steps.source, 'optimizer');
    assert.equal(tb.steps.steps.length, 50 * 3000);
  } finally {
    m.close();
  }
});
