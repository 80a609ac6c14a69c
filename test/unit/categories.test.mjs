// Categories for every allocation (Note [Categories]), on captures written by the real allocator on the
// simulated device with the tags and phases the bootstrap writes (test/unit/reference/sim_training.py): every
// figure below is what the loop allocated, by construction, and the sums are checked against the allocator state
// replayed independently (stateAt).
import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import { needsAllocator, openModel, root, simTraining } from './reader-support.mjs';

const { stepReport } = await import('../../src/core/analyses/steps/index.ts');
const { categoryView, dominantCategory, lineCategories } = await import('../../src/core/analyses/categories/index.ts');
const { CATEGORIES } = await import('../../src/core/base/protocol/categories.ts');
const { summarizeFile } = await import('../../src/core/analyses/summary/index.ts');
const { timeBaseOf } = await import('../../src/core/analyses/steps/timebase.ts');

const skip = needsAllocator;
const KiB = 1024;
const MiB = 1024 * KiB;

const train = (steps, ...flags) => simTraining(steps, flags);

const sum = (bytes) => CATEGORIES.reduce((a, c) => a + bytes[c], 0);

test('categories sum exactly to allocated at every step end and at the peak; tagged memory is what the loop made', { skip }, () => {
  const leak = 8 * KiB;
  const { cap } = train(6, '--leak', String(leak));
  const m = openModel(cap);
  try {
    const r = stepReport(m, 0, timeBaseOf(m).steps);
    const { report } = categoryView(m, 0, r.steps);
    assert.deepEqual([report.hasTags, report.hasPhases, report.moments.length], [true, true, 6]);
    report.moments.forEach((mo, i) => {
      // an independent path: the allocator state replayed at the step end
      assert.equal(sum(mo.bytes), m.stateAt(0, mo.timeUs).fragmentation.allocatedBytes, `step ${i + 1}`);
      assert.equal(mo.untracedBytes, 0);
      // parameters were allocated before the first tag (at step 1's optimizer step) and count from their allocation
      assert.deepEqual(mo.bytes, {
        parameter: 12 * MiB,
        buffer: 0,
        gradient: 12 * MiB,
        optimizer_state: 24 * MiB,
        activation: 0,
        kv_cache: 0,
        temporary: 0,
        other: (i + 1) * leak,
        block_overhead: 0,
      }, `step ${i + 1}`);
    });
    const p = report.peak;
    assert.equal(sum(p.bytes), m.summary().devices[0].peak_allocated_bytes);
    // the peak is in the last backward, after its 2 MiB temporary: the forward's activations (4 × 6 MiB and the
    // 512 B loss) are all live, plus the kept tensors (one per step, this step's too)
    assert.deepEqual(p.bytes, {
      parameter: 12 * MiB,
      buffer: 0,
      gradient: 12 * MiB,
      optimizer_state: 24 * MiB,
      activation: 24 * MiB + 512,
      kv_cache: 0,
      temporary: 2 * MiB,
      other: 6 * leak,
      block_overhead: 0,
    });
    assert.deepEqual(p.modules, [
      { module: 'Attention', bytes: 18 * MiB },
      { module: 'MLP', bytes: 6 * MiB },
      { module: '<no forward frame>', bytes: 512 },
    ]);
  } finally {
    m.close();
  }
});

test('activation vs temporary by phases: per line at the peak, and the step-1 peak before any tag exists', { skip }, () => {
  const { cap, info } = train(3);
  const m = openModel(cap);
  try {
    const r = stepReport(m, 0, timeBaseOf(m).steps);
    const { report } = categoryView(m, 0, r.steps);
    const at = (kind) => lineCategories(report.peak, path.join(root, 'test/unit/reference/sim_training.py'), info.lines[kind]);
    assert.deepEqual(at('act'), { activation: 18 * MiB }, 'made in forward, freed in the next backward');
    assert.deepEqual(at('act_mlp'), { activation: 6 * MiB });
    assert.deepEqual(at('tmp'), { temporary: 2 * MiB }, 'made and freed inside one backward');
    assert.equal(at('fwd_tmp'), undefined, 'a forward temporary is not live at the peak');
    assert.deepEqual(at('param'), { parameter: 12 * MiB }, 'the first parameter was tagged through a view into its block');
    assert.deepEqual(at('state'), { optimizer_state: 24 * MiB });
    // a moment inside step 1's forward, right after its 1 MiB temporary was made: tags written later still apply
    const fwd = m.spans(0, r.steps.steps[0].startUs, r.steps.steps[0].endUs, 1000).find((s) => s.size === 1 * MiB);
    const early = m.categories(0, [fwd.startUs]).moments[0];
    assert.equal(early.bytes.parameter, 12 * MiB);
    assert.equal(early.bytes.temporary, 1 * MiB);
    assert.equal(sum(early.bytes), m.stateAt(0, fwd.startUs).fragmentation.allocatedBytes);
  } finally {
    m.close();
  }
});

test('without phase facts or tags (an older bootstrap) everything is "other", still summing to allocated', { skip }, () => {
  const { cap } = train(3, '--no-facts');
  const m = openModel(cap);
  try {
    const report = m.categories(0, [], false);
    assert.deepEqual([report.hasTags, report.hasPhases], [false, false]);
    const p = report.peak;
    assert.deepEqual(CATEGORIES.filter((c) => p.bytes[c] > 0), ['other']);
    assert.equal(p.bytes.other, m.summary().devices[0].peak_allocated_bytes);
    assert.deepEqual(p.modules, []);
  } finally {
    m.close();
  }
});

test('activations by module path from the module marks (Note [Module paths]): each instance its own row, the root by class', { skip }, () => {
  const { cap } = train(3, '--module-paths');
  const m = openModel(cap);
  try {
    const report = m.categories(0, [], false);
    assert.equal(report.moduleSource, 'path');
    const p = report.peak;
    // the loop made 3 × 6 MiB in each Attention.forward and 6 MiB in MLP.forward, under the paths written around them
    assert.equal(p.bytes.activation, 2 * 18 * MiB + 6 * MiB + 512);
    assert.deepEqual(p.modules, [
      { module: 'blocks.0.attn', bytes: 18 * MiB },
      { module: 'blocks.1.attn', bytes: 18 * MiB },
      { module: 'blocks.0.mlp', bytes: 6 * MiB },
      { module: 'Net', bytes: 512 },
    ]);
    assert.equal(p.modules.reduce((a, x) => a + x.bytes, 0), p.bytes.activation);
    const s = summarizeFile(cap);
    assert.equal(s.summary.categories[0].module_names, 'path');
    assert.match(s.text, /Activations by module path \(top 4\):\n {4}blocks\.0\.attn\s+18\.0 MiB\n {4}blocks\.1\.attn\s+18\.0 MiB/);
    assert.match(s.text, /grouped by module path/);
  } finally {
    m.close();
  }
  // the same loop without marks keeps the class rows (both Attention instances in one)
  const plain = openModel(train(3).cap);
  try {
    const report = plain.categories(0, [], false);
    assert.equal(report.moduleSource, 'class');
    assert.deepEqual(report.peak.modules[0], { module: 'Attention', bytes: 18 * MiB });
  } finally {
    plain.close();
  }
});

test('dominantCategory picks the largest, none for nothing', () => {
  assert.equal(dominantCategory({ other: 5, gradient: 9 }), 'gradient');
  assert.equal(dominantCategory({}), undefined);
  assert.equal(dominantCategory(undefined), undefined);
});

test('gpumem summary: categories at the peak, per step end, and the leak\'s category, in text and --json', { skip }, () => {
  const { cap, info } = train(5, '--leak', String(64 * KiB));
  const s = summarizeFile(cap);
  const [c] = s.summary.categories;
  assert.deepEqual([c.device, c.has_tags, c.has_phases, c.module_names], [0, true, true, 'class']);
  assert.equal(c.peak.bytes.activation, 24 * MiB + 512);
  assert.equal(c.peak.beyond_allocated.cacheBytes, c.peak.reserved_bytes - c.peak.allocated_bytes);
  assert.deepEqual(c.peak.activations_by_module.map((x) => x.module), ['Attention', 'MLP', '<no forward frame>']);
  const [dev] = s.summary.steps;
  assert.deepEqual(dev.steps.map((x) => x.categories.other), [1, 2, 3, 4, 5].map((k) => k * 64 * KiB));
  assert.deepEqual(dev.leaks.map((l) => [l.line, l.category]), [[info.lines.leak, 'other']]);
  assert.match(s.text, /What the memory is at the peak on device 0 \(\S+ MiB allocated\):/);
  assert.match(s.text, /\n {2}optimizer state\s+24\.0 MiB/);
  assert.match(s.text, /\n {2}activations\s+24\.0 MiB/);
  assert.match(s.text, /\n {4}Attention\s+18\.0 MiB/);
  assert.match(s.text, /not by module path/);
  assert.match(s.text, /params\s+grads\s+optimizer\s+activations\s+temporary\s+other/);
  assert.match(s.text, /Leak: \S+:\d+ keeps 64\.0 KiB more at each step end \(steps 1–5, 320 KiB at the last step end, not parameters/);
});

test('the hover of an annotated line gives its bytes at the peak by category', { skip }, async () => {
  const { hoverMarkdown } = await import('../../src/core/views/annotations/index.ts');
  const { cap, info } = train(3);
  const m = openModel(cap);
  try {
    const peak = m.categories(0, [], true).peak;
    const stats = m.lineStats(0);
    const hoverOf = (kind) => {
      const stat = stats.find((s) => s.line === info.lines[kind]);
      return hoverMarkdown(stat, { peakBytes: m.current(0).peakAllocatedBytes, where: '', stack: (id) => m.stack(id), categories: lineCategories(peak, stat.file, stat.line) });
    };
    assert.match(hoverOf('act'), /\| By category at peak \| activations 18\.0 MiB \|/);
    assert.match(hoverOf('tmp'), /\| By category at peak \| temporaries 2\.00 MiB \|/);
    assert.match(hoverOf('grad'), /\| By category at peak \| gradients 12\.0 MiB \|/);
  } finally {
    m.close();
  }
});

test('the hover\'s categories at the peak are computed once per peak, then at most every 5 s (Note [Hover categories while growing])', { skip }, async () => {
  const { PeakCategoriesCache } = await import('../../src/core/analyses/categories/peakCache.ts');
  const { cap } = train(3);
  const m = openModel(cap);
  try {
    let now = 1000;
    const cache = new PeakCategoriesCache(5000, () => now);
    const want = m.categories(0, [], true).peak;
    assert.deepEqual(cache.get(m, 0), want);
    now += 4999;
    assert.deepEqual(cache.get(m, 0), want);
    assert.equal(cache.computed, 1, 'same peak within 5 s: no new pass');
    now += 1;
    cache.get(m, 0);
    assert.equal(cache.computed, 2, 'after 5 s a later tag may have recategorised the peak: one pass');
    // a capture that grew to a higher peak is recomputed at once
    let peak = m.current(0).peakAllocatedBytes;
    const growing = Object.create(m, { current: { value: (d) => ({ ...m.current(d), peakAllocatedBytes: peak }) } });
    cache.get(growing, 0);
    assert.equal(cache.computed, 3);
    cache.get(growing, 0);
    assert.equal(cache.computed, 3);
    peak += 512;
    assert.deepEqual(cache.get(growing, 0), want);
    assert.equal(cache.computed, 4, 'a new peak: one pass');
  } finally {
    m.close();
  }
});

test('the snapshot timeline numbers the steps: the fact that ends each step carries its number', { skip }, async () => {
  const { OpenedCapture } = await import('../../src/core/views/snapshot/openedCapture.ts');
  // 2 backward() per optimizer step: the optimizer.step facts end the steps, the backward facts stay plain
  const { cap } = train(3, '--accumulate', '2');
  const m = openModel(cap);
  try {
    const session = new OpenedCapture(m, { fileName: 'train.gpumem' });
    const summary = session.handle({ type: 'ready' }).find((x) => x.type === 'summary');
    const steps = summary.markers.filter((x) => x.kind === 'step');
    assert.deepEqual(
      steps.map((x) => x.label),
      ['backward', 'backward', 'step 1 · optimizer.step', 'backward', 'backward', 'step 2 · optimizer.step', 'backward', 'backward', 'step 3 · optimizer.step'],
    );
    assert.deepEqual(steps.filter((x) => x.label.startsWith('step ')).map((x) => x.timeUs), timeBaseOf(m).steps.steps.map((s) => s.endUs));
  } finally {
    m.close();
  }
});
