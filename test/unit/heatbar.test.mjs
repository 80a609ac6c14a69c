// The pseudo-gutter heat bar's bucket math (src/core/views/annotations/heatBar.ts). Spec (Note [Heat bar
// buckets]): 8 lengths, a line holding share s of the peak gets ⌈8·s⌉ steps (at least one, at most eight); a
// line with nothing live at the peak gets the hollow 0-step bar; the colour is the text's tier (≥25% high,
// 5–25% medium, <5% low). Then the same rules on a real PyTorch 2.11 snapshot, against python's numbers.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { BAR_STEPS, HEAT_BAR_KINDS, computeAnnotations, heatBarFor, heatBarKey } from '../../src/core/views/annotations/index.ts';
import { openModel, python, root } from './reader-support.mjs';

test('lengths: one step per eighth of the peak, rounded up, 1..8', () => {
  assert.equal(BAR_STEPS, 8);
  const cases = [
    [1e-9, 1], // any byte live at the peak shows a bar
    [0.01, 1],
    [0.125, 1], // exactly one eighth: one step
    [0.125001, 2],
    [0.25, 2],
    [0.26, 3],
    [0.5, 4],
    [0.51, 5],
    [0.874, 7],
    [0.875, 7],
    [0.99, 8],
    [1, 8],
    [1.3, 8], // a line cannot hold more than the peak; a stale peak must not draw past the gutter
  ];
  for (const [share, steps] of cases) assert.equal(heatBarFor(share).steps, steps, `share ${share}`);
});

test('shares of the peak made of real byte counts land on their step exactly at the bounds', () => {
  const MiB = 1 << 20;
  const peak = 1536 * MiB;
  // k/8 of the peak in bytes is exactly k steps; one byte more is k+1
  for (let k = 1; k <= 8; k++) {
    const bytes = (k * peak) / 8;
    assert.equal(heatBarFor(bytes / peak).steps, k, `${k}/8 of the peak`);
    if (k < 8) assert.equal(heatBarFor((bytes + 1) / peak).steps, k + 1, `${k}/8 of the peak + 1 B`);
  }
});

test('colours follow the text tiers; nothing live at the peak is the hollow bar', () => {
  assert.deepEqual(heatBarFor(0.0499), { steps: 1, tier: 'low' });
  assert.deepEqual(heatBarFor(0.05), { steps: 1, tier: 'medium' });
  assert.deepEqual(heatBarFor(0.2499), { steps: 2, tier: 'medium' });
  assert.deepEqual(heatBarFor(0.25), { steps: 2, tier: 'high' });
  assert.deepEqual(heatBarFor(0.9), { steps: 8, tier: 'high' });
  for (const none of [0, -0.1, Number.NaN]) assert.deepEqual(heatBarFor(none), { steps: 0, tier: 'low' }, `share ${none}`);
});

test('the fixed set of bar kinds is every bar heatBarFor can return, each once', () => {
  assert.deepEqual(HEAT_BAR_KINDS.map(heatBarKey), ['low-0', 'low-1', 'medium-1', 'medium-2', 'high-2', 'high-3', 'high-4', 'high-5', 'high-6', 'high-7', 'high-8']);
  const kinds = new Set(HEAT_BAR_KINDS.map(heatBarKey));
  for (let i = 0; i <= 10_000; i++) assert.ok(kinds.has(heatBarKey(heatBarFor(i / 10_000))), `share ${i / 10_000}`);
});

test('a real snapshot: each annotated line of train_small.py gets ⌈8 × its bytes / peak⌉ steps (python\'s numbers)', () => {
  const pickle = path.join(root, 'test/e2e/workspace/mlp-expandable.pickle');
  const ref = python('snapshot_summary.py', pickle);
  const peak = ref.devices[0].peak_allocated_bytes;
  const m = openModel(pickle);
  try {
    const stats = m.lineStats(0);
    const shown = computeAnnotations(stats, { peakBytes: m.current(0).peakAllocatedBytes, minBytes: 1 << 20 });
    const byLine = new Map(shown.filter((a) => a.file.endsWith('train_small.py')).map((a) => [a.line, heatBarFor(a.shareOfPeak)]));
    const lines = ref.top_lines.filter((l) => l.file.endsWith('train_small.py') && l.bytes_at_peak >= 1 << 20);
    assert.ok(lines.length >= 3, `python lists ${lines.length} lines`);
    for (const l of lines) {
      const share = l.bytes_at_peak / peak;
      const want = { steps: Math.ceil(share * 8), tier: share >= 0.25 ? 'high' : share >= 0.05 ? 'medium' : 'low' };
      assert.deepEqual(byLine.get(l.line), want, `train_small.py:${l.line} holds ${l.bytes_at_peak} of ${peak} B`);
    }
    // The heaviest line (the optimizer step, about half of the peak) is a long red bar.
    assert.deepEqual(byLine.get(14), { steps: 5, tier: 'high' });
  } finally {
    m.close();
  }
});
