// gpumem advise's training advice on captures the real allocator wrote on the simulated device
// (test/unit/reference/sim_training.py): every expected figure follows from what the loop allocated, by
// construction, or from an independent run that applies the advice.
import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import { captureStdout, needsAllocator, openModel, root, simTraining, tmpDir } from './reader-support.mjs';

const { advise, adviceText } = await import('../../src/core/analyses/advice/index.ts');
const { batchFromArgv, fitBatch } = await import('../../src/core/analyses/advice/batch.ts');
const { run: adviseCli } = await import('../../src/cli/commands/advise.ts');
const { formatBytes } = await import('../../src/core/base/units/bytes.ts');
const esc = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

const skip = needsAllocator;
const MiB = 1024 * 1024;
const GiB = 1024 * MiB;
// sim_training.py's Block: 2, 3 and 1 MiB per call (× batch), the last its output
const BLOCK = { held: 6 * MiB, out: 1 * MiB };

function withAdvice(cap, opts, fn) {
  const m = openModel(cap);
  try {
    return fn(advise(m, 0, opts), m);
  } finally {
    m.close();
  }
}
const kinds = (a) => a.items.map((i) => i.kind);
const item = (a, kind) => a.items.find((i) => i.kind === kind);

test('checkpoint: the repeated Block is named, its calls counted from the stacks, and the peak predicted by the Note\'s model', { skip }, () => {
  const blocks = 4;
  const { cap } = simTraining(3, ['--blocks', String(blocks)]);
  withAdvice(cap, {}, (a, m) => {
    const c = item(a, 'checkpoint');
    assert.ok(c, `no checkpoint item; not offered: ${a.notOffered.join(' | ')}`);
    assert.equal(c.apply.checkpointModule, 'Block');
    const peak = m.current(0).peakAllocatedBytes;
    // peak − held by the 4 calls + their 4 outputs + one call recomputed
    const expected = peak - blocks * BLOCK.held + blocks * BLOCK.out + BLOCK.held;
    assert.deepEqual(c.predicted, { peakAllocatedBytes: expected, currentPeakAllocatedBytes: peak });
    assert.match(c.evidence[0], new RegExp(esc(`${blocks} calls of Block hold ${formatBytes(blocks * BLOCK.held)}`)));
    assert.equal(c.confidence, 'medium');
    assert.ok(c.assumptions.length >= 2);
    // Attention (3 × 6 MiB, one call) is never advised: checkpointing a single call recomputes all it saves
    assert.ok(!a.items.some((i) => i.apply?.checkpointModule === 'Attention'));
  });
});

test('checkpoint: the prediction matches a run that keeps only each call\'s output (checkpointing, applied on the sim)', { skip }, () => {
  // Applying the advice: the same loop without the blocks' saved activations but with their outputs, plus
  // one call's activations re-made during backward, peaks where the model says.
  const blocks = 3;
  const base = simTraining(3, ['--blocks', String(blocks)]);
  const none = simTraining(3, []);
  withAdvice(base.cap, {}, (a, m) => {
    const c = item(a, 'checkpoint');
    const without = openModel(none.cap);
    try {
      // the peak without blocks + what checkpointing keeps: outputs of every call and one recomputed call
      const applied = without.current(0).peakAllocatedBytes + blocks * BLOCK.out + BLOCK.held;
      assert.equal(c.predicted.peakAllocatedBytes, applied);
      assert.equal(m.current(0).peakAllocatedBytes - without.current(0).peakAllocatedBytes, blocks * BLOCK.held);
    } finally {
      without.close();
    }
  });
});

test('no checkpoint advice when no module class is called more than once', { skip }, () => {
  const { cap } = simTraining(3, []);
  withAdvice(cap, {}, (a) => {
    assert.ok(!kinds(a).includes('checkpoint'));
    assert.ok(a.notOffered.some((n) => /checkpointing: no module class called more than once/.test(n)), a.notOffered.join(' | '));
  });
});

test('set_to_none: gradients kept into the next forward are found; freed gradients give no item', { skip }, () => {
  const kept = simTraining(3, []);
  withAdvice(kept.cap, {}, (a) => {
    const g = item(a, 'set-to-none');
    assert.ok(g, a.notOffered.join(' | '));
    // 3 × 4 MiB gradients, live when step 2's (or 3's) forward begins
    assert.match(g.evidence[0], new RegExp(esc(`gradients hold ${formatBytes(12 * MiB)}`)));
    // the sim's peak is inside backward (its 2 MiB temporary): no peak predicted, and it says why
    assert.equal(g.predicted, null);
    assert.equal(g.confidence, 'low');
    assert.match(g.evidence[2], /peak is in the backward/);
  });
  const freed = simTraining(3, ['--free-grads']);
  withAdvice(freed.cap, {}, (a) => {
    assert.ok(!kinds(a).includes('set-to-none'));
    assert.ok(a.notOffered.some((n) => /gradients hold 0 B when step \d's forward begins/.test(n)), a.notOffered.join(' | '));
  });
});

test('leaks: history.append(loss) becomes an item with its line and growth; a clean loop has none', { skip }, () => {
  const leak = 256 * 1024;
  const { cap, info } = simTraining(6, ['--leak', String(leak)]);
  withAdvice(cap, {}, (a) => {
    const l = item(a, 'leak');
    assert.ok(l);
    assert.equal(l.apply.line, info.lines.leak);
    assert.equal(l.apply.file, path.join(root, 'test/unit/reference/sim_training.py'));
    assert.match(l.title, new RegExp(esc(`keeps ${formatBytes(leak)} more at every step end`)));
    assert.equal(l.predicted, null);
  });
  withAdvice(simTraining(6, []).cap, {}, (a) => {
    assert.ok(!kinds(a).includes('leak'));
    assert.ok(a.notOffered.some((n) => /^leaks: no line grows/.test(n)));
  });
});

test('batch size: one run offers the measurement; two runs give the line, and the batch it says fits peaks as predicted and fits', { skip }, () => {
  const one = simTraining(3, ['--batch', '1']);
  withAdvice(one.cap, {}, (a) => {
    const mb = item(a, 'measure-batch');
    assert.ok(mb);
    assert.match(mb.action, /gpumem advise train\.gpumem OTHER\.gpumem/);
    assert.equal(mb.predicted, null);
  });
  const two = simTraining(3, ['--batch', '2']);
  const capacity = 256 * MiB;
  const a = (() => {
    const m1 = openModel(one.cap);
    const m2 = openModel(two.cap);
    try {
      // the batches come from each run's own command line (sim_training.py … --batch N)
      assert.equal(batchFromArgv(m1.header().argv), 1);
      assert.equal(batchFromArgv(m2.header().argv), 2);
      return advise(m1, 0, { capacityBytes: capacity, file: 'one.gpumem', other: { model: m2, file: 'two.gpumem' } });
    } finally {
      m1.close();
      m2.close();
    }
  })();
  const b = item(a, 'batch-size');
  assert.ok(b, a.notOffered.join(' | '));
  // per sample: the activations of one batch unit (Attention 3 × 6 MiB + MLP 6 MiB)
  assert.equal(a.batchFit.perSampleAllocatedBytes, 24 * MiB);
  const best = b.apply.batch;
  assert.ok(best > 2);
  // apply it: a run at that batch on the same capacity peaks where predicted and does not run out
  const applied = simTraining(3, ['--batch', String(best)]);
  const m = openModel(applied.cap);
  try {
    assert.equal(m.ooms().length, 0);
    assert.equal(m.current(0).peakAllocatedBytes, b.predicted.peakAllocatedBytes);
    assert.ok(m.current(0).peakReservedBytes <= capacity);
    // one more sample would not fit the usable part of the capacity
    const f = a.batchFit;
    const reservedAt = (n) => Math.max(f.fixedReservedBytes + n * f.perSampleReservedBytes, f.reservedRatio * (f.fixedAllocatedBytes + n * f.perSampleAllocatedBytes));
    assert.ok(reservedAt(best) <= f.usableBytes && reservedAt(best + 1) > f.usableBytes);
  } finally {
    m.close();
  }
});

test('fitBatch: the line through two runs, and the errors a user can act on', () => {
  const run = (batch, alloc, res) => ({ file: `b${batch}`, batch, peakAllocatedBytes: alloc, peakReservedBytes: res, deviceTotalBytes: 80 * GiB });
  const f = fitBatch(run(8, 10 * GiB, 11 * GiB), run(4, 6 * GiB, 7 * GiB));
  assert.equal(f.perSampleAllocatedBytes, GiB);
  assert.equal(f.fixedAllocatedBytes, 2 * GiB);
  // usable = 80 − 1 (assumed outside, no samples) − 3 % of 80 = 76.6 GiB; reserved is at least allocated × 7/6
  // (batch 4's ratio, the larger): (76.6 / (7/6) − 2) / 1 → 63, tighter than the reserved line's (76.6 − 3) / 1
  const usable = 80 * GiB - GiB - 0.03 * 80 * GiB;
  assert.equal(f.reservedRatio, 7 / 6);
  assert.equal(f.maxBatch, Math.floor((usable / (7 / 6) - 2 * GiB) / GiB));
  assert.equal(f.predictedPeakAllocatedBytes, 2 * GiB + f.maxBatch * GiB);
  assert.throws(() => fitBatch(run(4, 1, 1), run(4, 2, 2)), /two different batch sizes/);
  assert.equal(fitBatch(run(4, 5 * GiB, 5 * GiB), run(8, 5 * GiB, 5 * GiB)).maxBatch, null);
  assert.equal(batchFromArgv(['train.py', '--batch-size=12']), 12);
  assert.equal(batchFromArgv(['train.py', '--bs', '3']), 3);
  assert.equal(batchFromArgv(['train.py', '--lr', '3']), undefined);
});

test('gpumem advise A B: text names the batch; --batches needs OTHER; a missing OTHER is a clear error', { skip }, async () => {
  const dir = tmpDir();
  const one = simTraining(2, ['--batch', '1'], { capture: path.join(dir, 'b1.gpumem') });
  const two = simTraining(2, ['--batch', '3'], { capture: path.join(dir, 'b3.gpumem') });
  const out = await captureStdout(() => adviseCli([one.cap, two.cap, '--capacity', '512MiB']));
  assert.equal(out.code, 0);
  assert.match(out.out, /The largest batch that fits: \d+/);
  assert.match(out.out, /batch 1: peak allocated .* \(b1\.gpumem\)/);
  const json = await captureStdout(() => adviseCli([one.cap, two.cap, '--batches', '2,6', '--capacity', '512MiB', '--json']));
  // --batches overrides the command lines: the per-sample figure halves (24 MiB × 2 over 4 samples)
  assert.equal(JSON.parse(json.out).batchFit.perSampleAllocatedBytes, 12 * MiB);
  await assert.rejects(() => adviseCli([one.cap, '--batches', '1,2']), /--batches needs OTHER/);
  await assert.rejects(() => adviseCli([one.cap, two.cap, '--batches', '1']), /two positive whole numbers/);
  const missing = await captureStdout(() => adviseCli([one.cap, path.join(dir, 'nope.gpumem')]));
  assert.equal(missing.code, 1);
  const text = adviceText('b1.gpumem', withAdvice(one.cap, {}, (a) => a));
  assert.match(text, /Find the largest batch that fits/);
});

test('an OOM the replay does not reproduce gets no policy advice against it, and the reason is stated', () => {
  // mlp-oom.pickle: PyTorch refused a 110.8 GiB request; the failed request is not in the trace, so every
  // policy's replay fits, and no policy can be said to avoid the OOM.
  const m = openModel(path.join(root, 'test/fixtures/pytorch-snapshots/mlp-oom.pickle'));
  try {
    const device = m.devices()[0];
    assert.ok(m.ooms().some((o) => o.device === device));
    assert.equal(m.replay(device, m.whatIf(device, Infinity).policy).oom, null);
    const a = advise(m, device);
    assert.ok(!kinds(a).includes('avoid-oom'));
    assert.ok(a.notOffered.some((n) => /ran out of memory, but the replay of .* does not \(the failed request is not in the trace\)/.test(n)), a.notOffered.join(' | '));
  } finally {
    m.close();
  }
});
