// The conformance suite: every analysis of a capture held against what PyTorch itself measured in the same real GPU
// run (test/fixtures/conformance/, gathered on an H200 by test/gpu/conformance/gather.py; its README says how). Each
// fixture is a workload this project did not write its analyses for (GPT-2 with varying lengths, ConvNeXt under
// cudnn.benchmark, a MemPool, Swin-T under expandable segments, T5 under max_split_size_mb, a Llama-style decoder with
// gradient accumulation, RegNetY / DenseNet / OPT loops that keep their graphs, a Mistral-style generate()), run in
// both allocator modes: `lens` and `auto` (PyTorch's allocator, observed). The truth is the workload's own
// `TRUTH` line: torch.cuda.memory_allocated() and the storages of each kind at every step end, max_memory_allocated()
// and max_memory_reserved(), what the kept graphs saved (a saved_tensors_hooks pack hook, not the tool's graph walk),
// the weights and KV cache after generate(). Nothing here is a figure typed in by hand.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import zlib from 'node:zlib';
import { openModel, root } from './reader-support.mjs';

const { summarizeFile } = await import('../../src/core/analyses/summary/index.ts');
const { CATEGORIES } = await import('../../src/core/base/protocol/categories.ts');

const DIR = path.join(root, 'test/fixtures/conformance');
const TMP = fs.mkdtempSync(path.join(os.tmpdir(), 'gpumem-conformance-'));

/** Every run of the fixtures: { name: "<workload>-<run>", workload, run, capture?: path (gunzipped), truth?: object }. */
const RUNS = (() => {
  const names = new Set();
  for (const f of fs.readdirSync(DIR)) {
    const m = /^(.+)\.(capture\.gz|truth\.json)$/.exec(f);
    if (m) names.add(m[1]);
  }
  return [...names].sort().map((name) => {
    const m = /^(.+?)-((?:native|lens|auto).*)$/.exec(name);
    const [workload, run] = m ? [m[1], m[2]] : [name, ''];
    const gz = path.join(DIR, `${name}.capture.gz`);
    const tj = path.join(DIR, `${name}.truth.json`);
    let capture;
    if (fs.existsSync(gz)) {
      capture = path.join(TMP, `${name}.capture`);
      fs.writeFileSync(capture, zlib.gunzipSync(fs.readFileSync(gz)));
    }
    return { name, workload, run, capture, truth: fs.existsSync(tj) ? JSON.parse(fs.readFileSync(tj, 'utf8')) : undefined };
  });
})();
const tracked = RUNS.filter((r) => r.capture && r.truth);
const summaries = new Map();
const summaryOf = (r) => {
  if (!summaries.has(r.name)) summaries.set(r.name, summarizeFile(r.capture).summary);
  return summaries.get(r.name);
};
/** Runs whose allocations were recorded one by one for the whole run. */
const recorded = tracked.filter((r) => !r.run.includes('figures') && !r.run.includes('record') && !r.workload.startsWith('figures'));
const within = (got, want, tol, what) =>
  assert.ok(Math.abs(got - want) <= tol * Math.max(1, Math.abs(want)), `${what}: ${got} against ${want} (${(((got - want) / want) * 100).toFixed(3)} %)`);
const sum = (bytes) => CATEGORIES.reduce((a, c) => a + (bytes[c] ?? 0), 0);

test('the fixtures hold both allocator modes of every workload that runs in both', () => {
  const modes = (w) => RUNS.filter((r) => r.workload === w && r.capture).map((r) => r.run);
  for (const w of ['lm_varlen', 'convnet_benchmark', 'expandable', 'alloc_conf', 'llama_accumulate', 'retained_regnet', 'retained_densenet', 'retained_opt', 'generate'])
    for (const mode of ['lens', 'auto']) assert.ok(modes(w).includes(mode), `${w} has a ${mode} capture`);
  assert.ok(tracked.length >= 20, `${tracked.length} runs with a capture and their truth`);
});

test('steps: every optimizer step is found, and allocated at each step end is what memory_allocated() said there', () => {
  for (const r of recorded.filter((x) => x.truth.step_ends.length)) {
    const s = summaryOf(r);
    const steps = s.steps?.[0]?.steps ?? [];
    assert.equal(steps.length, r.truth.step_ends.length, `${r.name}: steps found`);
    steps.forEach((row, i) => assert.equal(row.allocated_at_end_bytes, r.truth.step_ends[i].allocated, `${r.name} step ${i + 1}: allocated at end`));
  }
});

test('categories: parameters, buffers, gradients and optimizer state are their storages at every step end, in both modes', () => {
  for (const r of recorded.filter((x) => x.truth.step_ends.length)) {
    const rows = summaryOf(r).steps[0].steps;
    rows.forEach((row, i) => {
      const t = r.truth.step_ends[i];
      for (const c of ['parameter', 'buffer', 'gradient', 'optimizer_state'])
        within(row.categories[c], t[c], 0.001, `${r.name} step ${i + 1}: ${c}`);
    });
  }
});

test('categories: the rows, block overhead included, sum to allocated at every step end and at the peak', () => {
  for (const r of recorded) {
    const s = summaryOf(r);
    for (const row of s.steps?.[0]?.steps ?? []) assert.equal(sum(row.categories), row.allocated_at_end_bytes, `${r.name} step ${row.step}`);
    const peak = s.categories.find((c) => c.peak)?.peak;
    assert.ok(peak, `${r.name}: categories at the peak`);
    assert.equal(sum(peak.bytes) + peak.untraced_bytes, peak.allocated_bytes, `${r.name}: at the peak`);
  }
});

test("peaks: the capture's peak allocated and peak reserved are PyTorch's own counters of the run", () => {
  for (const r of recorded) {
    const d = summaryOf(r).devices[0];
    assert.equal(d.peak_allocated_bytes, r.truth.max_allocated, `${r.name}: peak allocated`);
    const m = openModel(r.capture);
    try {
      assert.equal(m.current(m.devices()[0]).peakReservedBytes, r.truth.max_reserved, `${r.name}: peak reserved`);
    } finally {
      m.close();
    }
  }
});

test('retained graphs: what the kept graphs saved counts as activations kept by their container, at every step end', () => {
  const runs = recorded.filter((r) => r.workload.startsWith('retained_'));
  assert.ok(runs.length >= 6, 'three architectures in two modes');
  for (const r of runs) {
    const s = summaryOf(r);
    const rows = s.steps[0].steps;
    rows.forEach((row, i) => within(row.categories.activation, r.truth.step_ends[i].kept_saved, 0.001, `${r.name} step ${i + 1}: kept activations`));
    // the current step's live activations at the peak are activations too (the peak is in the last step's backward)
    const peak = s.categories[0].peak;
    const last = r.truth.step_ends.at(-1);
    assert.ok(peak.bytes.activation >= 0.95 * last.kept_saved, `${r.name}: activations at the peak ${peak.bytes.activation} of ${last.kept_saved} kept at the end`);
    assert.ok(peak.bytes.other < 0.1 * peak.allocated_bytes, `${r.name}: "other" is ${peak.bytes.other} of ${peak.allocated_bytes} at the peak`);
    // the leak is found, its keeper tied by address and its figures dated
    const leaks = s.steps[0].leaks.filter((l) => l.keeper);
    assert.ok(leaks.length >= 1, `${r.name}: a leak with its keeper`);
    const k = leaks[0].keeper;
    assert.equal(k.match, 'address', `${r.name}: the keeper is tied by address`);
    // named where the loop appends: `keep.append(loss)` in the training helper, whose `keep` is the module's HISTORY
    assert.ok(['keep', 'HISTORY'].includes(k.container), `${r.name}: the keeper's name ${k.container}`);
    assert.equal(k.at, 'end', `${r.name}: the keeper's figures are the end's`);
    assert.equal(k.tensors, last.kept_tensors, `${r.name}: kept tensors at the end`);
  }
});

test('a loop that keeps nothing has no leak finding', () => {
  for (const r of recorded.filter((x) => x.truth.step_ends.length && !x.workload.startsWith('retained_')))
    assert.deepEqual(summaryOf(r).steps[0].leaks.map((l) => `${l.file}:${l.line}`), [], `${r.name}: leaks`);
});

test('inference: with no optimizer, the weights are parameters and buffers, and the KV cache is its own category', () => {
  const runs = recorded.filter((r) => r.workload === 'generate');
  assert.equal(runs.length, 2);
  for (const r of runs) {
    const g = r.truth.generate;
    const m = openModel(r.capture);
    try {
      const at = m.categories(0, [g.t_us], false).moments[0];
      assert.equal(at.allocatedBytes, g.allocated, `${r.name}: allocated after generate()`);
      within(at.bytes.parameter + at.bytes.buffer, g.weights, 0.001, `${r.name}: weights`);
      within(at.bytes.parameter, g.parameters, 0.001, `${r.name}: parameters`);
      within(at.bytes.kv_cache, g.kv_cache, 0.001, `${r.name}: KV cache`);
    } finally {
      m.close();
    }
  }
});

test('a zero-size tensor counts 0 B in both modes, as natively', () => {
  const runs = tracked.filter((r) => r.workload === 'zero_size');
  assert.ok(runs.some((r) => r.run === 'lens') && runs.some((r) => r.run === 'auto'));
  const native = RUNS.find((r) => r.name === 'zero_size-native').truth.zero;
  for (const r of runs) assert.deepEqual(r.truth.zero, native, `${r.name}: memory_allocated() around torch.empty(0)`);
});

test('device used and reserved at the peak come from one sample, and device used is never below reserved', () => {
  for (const r of recorded) {
    const peak = summaryOf(r).categories[0].peak;
    const b = peak.beyond_allocated;
    if (b.deviceUsedBytes === undefined) continue;
    assert.ok(b.deviceUsedBytes >= peak.reserved_bytes, `${r.name}: device used ${b.deviceUsedBytes} below reserved ${peak.reserved_bytes}`);
    assert.equal(b.deviceUsedBytes - b.notFromAllocatorBytes, peak.reserved_bytes, `${r.name}: one sample`);
  }
});
