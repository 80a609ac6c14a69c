// Steps and leak findings, on captures written by the real allocator (simulated device) with the step
// facts the bootstrap writes, and the rules of Note [Steps] / Note [Leak rule] checked against their spec.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import path from 'node:path';
import { ALLOCATOR_LIB, needsAllocator, openModel, python, simTraining, tmpDir } from './reader-support.mjs';

const { detectSteps, stepAt, findLeaks, stepReport } = await import('../../src/core/analyses/steps/index.ts');
const { summarizeFile } = await import('../../src/core/analyses/summary/index.ts');
const { timeBaseOf } = await import('../../src/core/analyses/steps/timebase.ts');

const skip = needsAllocator;
const KiB = 1024;
const MiB = 1024 * KiB;

const train = (steps, ...flags) => simTraining(steps, flags);

const mk = (timeUs, label, kind = 'step') => ({ device: 0, timeUs, kind, label });

test('steps: optimizer steps after a backward end steps; accumulation and two optimizers give one step each', () => {
  const facts = [mk(10, 'backward'), mk(11, 'backward'), mk(12, 'optimizer.step'), mk(13, 'optimizer.step'), mk(20, 'backward'), mk(21, 'optimizer.step')];
  const s = detectSteps(facts, 5);
  assert.equal(s.source, 'optimizer');
  assert.deepEqual(s.steps, [
    { index: 1, startUs: 5, endUs: 12 },
    { index: 2, startUs: 12, endUs: 21 },
  ]);
  assert.equal(stepAt(s.steps, 5), 1);
  assert.equal(stepAt(s.steps, 12), 1);
  assert.equal(stepAt(s.steps, 12.5), 2);
  assert.equal(stepAt(s.steps, 22), undefined);
});

test('steps: user marks override the facts; backward ends count when no optimizer stepped; nothing gives none', () => {
  const user = detectSteps([mk(10, 'backward'), mk(12, 'optimizer.step'), mk(15, 'iteration end', 'user'), mk(30, 'epoch-step')], 0);
  assert.equal(user.source, 'user');
  assert.deepEqual(user.steps.map((s) => s.endUs), [15, 30]);
  const manual = detectSteps([mk(10, 'backward'), mk(20, 'backward'), mk(25, 'warmup done', 'user')], 0);
  assert.equal(manual.source, 'backward');
  assert.deepEqual(manual.steps.map((s) => s.endUs), [10, 20]);
  const noBackwardFacts = detectSteps([mk(10, 'optimizer.step'), mk(20, 'optimizer.step')], 0);
  assert.deepEqual([noBackwardFacts.source, noBackwardFacts.steps.length], ['optimizer', 2]);
  assert.deepEqual(detectSteps([mk(3, 'epoch 1', 'user')], 0), { source: 'none', steps: [] });
});

test('leak rule: three growths in a row are a finding, two are not; growth is the run average', () => {
  const table = (series) => ({ steps: [], lines: series.map((v, i) => ({ file: 'f.py', line: i + 1, bytesAtEnds: v })) });
  assert.deepEqual(findLeaks(table([[1, 2, 3], [5, 5, 5, 5], [1, 2, 3, 3, 4, 5]])), []);
  const [f] = findLeaks(table([[100, 100, 110, 130, 160, 160]]));
  assert.deepEqual(f, { file: 'f.py', line: 1, growthPerStepBytes: 20, fromStep: 2, toStep: 5, growingSteps: 3, bytesAtLastEnd: 160 });
});

test('leak rule: growth is looked for in the requested bytes and reported in the blocks\' bytes', () => {
  const line = (bytesAtEnds, requestedAtEnds) => ({ steps: [], lines: [{ file: 'f.py', line: 7, bytesAtEnds, requestedAtEnds }] });
  // blocks that grow while the request stays: no finding; the same blocks without requested bytes (an old table): one
  assert.deepEqual(findLeaks(line([100, 110, 120, 130], [90, 90, 90, 90])), []);
  assert.equal(findLeaks(line([100, 110, 120, 130], undefined)).length, 1);
  // requests that grow while one block stays the same size (it was handed out whole before): a finding, in blocks
  const [f] = findLeaks(line([1024, 1024, 1536, 2048], [600, 800, 1000, 1200]));
  assert.deepEqual([f.fromStep, f.toStep, f.growthPerStepBytes, f.bytesAtLastEnd], [1, 4, (2048 - 1024) / 3, 2048]);
});

test('PyTorch\'s allocator observed: a line whose blocks grow at every step end with nothing more kept is no leak', { skip }, () => {
  const cap = path.join(tmpDir(), 'wander.gpumem');
  const info = python('observed_wander.py', ALLOCATOR_LIB, cap);
  // The observer's blocks (Note [Observed block sizes]): the gradient's grows by 256 KiB at step ends 2-4, its
  // request does not.
  assert.deepEqual(info.grad_blocks.slice(0, 4).map((b, i) => b - info.grad_requested[i]), [1, 2, 3, 4].map((k) => k * 256 * KiB));
  const m = openModel(cap);
  try {
    const r = stepReport(m, 0, timeBaseOf(m).steps);
    assert.deepEqual([r.steps.source, r.steps.steps.length], ['optimizer', 6]);
    const grad = r.table.lines.find((l) => l.line === info.lines.grad);
    assert.deepEqual(grad.bytesAtEnds, info.grad_blocks);
    assert.deepEqual(grad.requestedAtEnds, info.grad_requested);
    assert.deepEqual(r.leaks, []);
    // what the rule found when it read the blocks' bytes
    const byBlocks = findLeaks({ steps: [], lines: [{ ...grad, requestedAtEnds: undefined }] });
    assert.deepEqual(byBlocks.map((f) => [f.line, f.fromStep, f.toStep, f.growthPerStepBytes]), [[info.lines.grad, 1, 4, 256 * KiB]]);
  } finally {
    m.close();
  }
});

test('a training loop that keeps one tensor per step: a leak finding on that line, growing by its size', { skip }, () => {
  const { cap, info } = train(8, '--leak', String(8 * KiB));
  const m = openModel(cap);
  try {
    const r = stepReport(m, 0, timeBaseOf(m).steps);
    assert.equal(r.steps.source, 'optimizer');
    assert.equal(r.steps.steps.length, 8);
    assert.equal(r.leaks.length, 1, JSON.stringify(r.leaks));
    const [leak] = r.leaks;
    assert.equal(leak.line, info.lines.leak);
    assert.equal(leak.growthPerStepBytes, 8 * KiB);
    assert.deepEqual([leak.fromStep, leak.toStep, leak.bytesAtLastEnd], [1, 8, 8 * 8 * KiB]);
    // Per-step figures agree with the allocator state replayed at each step end (an independent path).
    r.table.steps.forEach((s, i) => {
      const f = m.stateAt(0, s.endUs).fragmentation;
      assert.deepEqual([s.allocatedAtEndBytes, s.reservedAtEndBytes], [f.allocatedBytes, f.reservedBytes], `step ${i + 1}`);
      // params 12 MiB + grads 12 MiB + optimizer state 24 MiB + the kept tensors
      assert.equal(s.allocatedAtEndBytes, 48 * MiB + (i + 1) * 8 * KiB);
      // the peak is inside backward: activations 24 MiB + loss 512 B + this step's kept tensor + the 2 MiB
      // temporary, over params + everything earlier steps left (step 1: its gradients are allocated there)
      const held = i === 0 ? 12 * MiB + 12 * MiB : 48 * MiB + i * 8 * KiB;
      assert.equal(s.peakAllocatedBytes, held + 24 * MiB + 512 + 8 * KiB + 2 * MiB, `step ${i + 1} peak`);
    });
    const byLine = new Map(r.table.lines.map((l) => [l.line, l.bytesAtEnds]));
    assert.deepEqual(byLine.get(info.lines.param), Array(8).fill(12 * MiB));
    assert.deepEqual(byLine.get(info.lines.state), Array(8).fill(24 * MiB));
    assert.equal(byLine.get(info.lines.act), undefined, 'activations are never live at a step end');
  } finally {
    m.close();
  }
});

test('no leak, gradient accumulation and gpumem.step(): steps and findings follow Note [Steps]', { skip }, () => {
  const plain = train(6);
  const accumulated = train(4, '--accumulate', '3');
  const user = train(6, '--user-every', '2');
  for (const [run, source, count] of [[plain, 'optimizer', 6], [accumulated, 'optimizer', 4], [user, 'user', 3]]) {
    const m = openModel(run.cap);
    try {
      const r = stepReport(m, 0, timeBaseOf(m).steps);
      assert.deepEqual([r.steps.source, r.steps.steps.length, r.leaks.length], [source, count, 0]);
    } finally {
      m.close();
    }
  }
});

test('gpumem summary prints the steps and the leak, and --json carries them', { skip }, () => {
  const { cap, info } = train(5, '--leak', String(64 * KiB));
  const s = summarizeFile(cap);
  const [dev] = s.summary.steps ?? [];
  assert.deepEqual([dev.source, dev.steps.length], ['optimizer', 5]);
  assert.deepEqual(dev.leaks.map((l) => [l.line, l.growth_per_step_bytes, l.from_step, l.to_step]), [[info.lines.leak, 64 * KiB, 1, 5]]);
  assert.match(s.text, /Steps on device 0: 5, found from optimizer\.step\(\) after backward\(\)/);
  assert.match(s.text, new RegExp(`Leak: \\S*sim_training\\.py:${info.lines.leak} keeps 64\\.0 KiB more at each step end \\(steps 1–5, 320 KiB at the last step end[,)]`));
});
