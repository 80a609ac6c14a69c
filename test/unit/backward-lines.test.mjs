// Backward on the forward line (Note [Linked backward stacks] in src/core/base/model/types.ts), as the editor, the
// snapshot panel's stacks and `gpumem summary` say it. GIVEN line statistics, stacks and a backward peak shaped as the
// reader gives them (a linked stack: forward frames, `<module>`, `<backward>`, then the backward() caller's frames),
// WHEN formatted, THEN the forward and backward parts are told apart and the linked stack names its forward line.
// The same formatting over a real GPU capture: backward-fixture.test.mjs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { annotationText, forwardBackwardSplit, hoverMarkdown, openFrameUri } from '../../src/core/views/annotations/index.ts';
import { backwardOfText, isSyntheticFrame } from '../../src/core/base/protocol/backwardOf.ts';
import { backwardPeakJson, backwardPeakText } from '../../src/core/analyses/summary/backward.ts';
import { makeTimeBase } from '../../src/core/analyses/steps/timebase.ts';

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;

function stat(file, line, selfBytesAtPeak, backwardBytesAtPeak, extra = {}) {
  return {
    file,
    line,
    selfBytesAtPeak,
    inclusiveBytesAtPeak: selfBytesAtPeak,
    totalAllocatedBytes: selfBytesAtPeak,
    allocCount: 12,
    liveNowBytes: 0,
    backwardBytesAtPeak,
    topStacks: [],
    ownerGroup: 0,
    ...extra,
  };
}

const TORCH_CONV = '/venv/lib/python3.12/site-packages/torch/nn/modules/conv.py';
/** A stack the reader links to `y = self.conv(x)` at /w/model.py:12, recomputed under checkpointing. */
const LINKED = {
  id: 5,
  backward: true,
  backwardOf: {
    node: 'ConvolutionBackward0',
    module: 'layer1.0.conv1',
    recomputed: true,
    line: { file: '/w/model.py', line: 12, name: 'Block.forward' },
    op: { file: TORCH_CONV, line: 549, name: 'Conv2d._conv_forward' },
  },
  frames: [
    { file: TORCH_CONV, line: 549, name: 'Conv2d._conv_forward', user: false },
    { file: '/w/model.py', line: 12, name: 'Block.forward', user: true },
    { file: '<module>', line: 0, name: 'layer1.0.conv1', user: false },
    { file: '<backward>', line: 0, name: 'ConvolutionBackward0', user: false },
    { file: '/w/train.py', line: 44, name: 'train', user: true },
  ],
};
/** The same line's forward allocation. */
const FORWARD = { id: 6, backward: false, frames: [{ file: '/w/model.py', line: 12, name: 'Block.forward', user: true }, { file: '/w/train.py', line: 40, name: 'train', user: true }] };
const stacks = new Map([
  [5, LINKED],
  [6, FORWARD],
]);

test('a forward line shows its forward bytes and its backward bytes; an all-backward line only the backward part', () => {
  const conv = stat('/w/model.py', 12, 1.2 * GiB + 800 * MiB, 800 * MiB);
  assert.deepEqual(forwardBackwardSplit(conv), { forward: 1.2 * GiB, backward: 800 * MiB });
  assert.equal(annotationText(conv), '▲ 1.20 GiB at peak · backward 800 MiB · 12 allocs');
  assert.equal(annotationText(stat('/w/train.py', 44, 300 * MiB, 300 * MiB, { allocCount: 1 })), '▲ backward 300 MiB at peak · 1 alloc');
  assert.equal(annotationText(stat('/w/model.py', 3, 64 * MiB, 0)), '▲ 64.0 MiB at peak · 12 allocs');
  // backward is a part of self: more than self (a reader's rounding) never makes the forward part negative
  assert.deepEqual(forwardBackwardSplit(stat('/w/a.py', 1, 10, 12)), { forward: 0, backward: 10 });
});

test('hover: forward and backward rows, and the linked top stack names its forward line, node, module and recompute', () => {
  const s = stat('/w/model.py', 12, 1.2 * GiB + 800 * MiB, 800 * MiB, {
    topStacks: [
      { stackId: 6, bytesAtPeak: 1.2 * GiB, count: 4 },
      { stackId: 5, bytesAtPeak: 800 * MiB, count: 8 },
    ],
  });
  const md = hoverMarkdown(s, { peakBytes: 4 * GiB, where: '', stack: (id) => stacks.get(id), maxFrames: 8 });
  assert.match(md, /\| Forward at peak \| 1\.20 GiB \|/);
  assert.match(md, /\| Backward at peak \(made by the backward of this line's ops\) \| 800 MiB \(39% of self at peak\) \|/); // 800 of 2028.8 MiB
  assert.doesNotMatch(md, /From backward/);
  const header = md.split('\n').find((l) => l.startsWith('800 MiB · 8 allocs'));
  assert.equal(header, `800 MiB · 8 allocs · backward of [model\\.py:12](${openFrameUri('/w/model.py', 12)}) · ConvolutionBackward0 · layer1\\.0\\.conv1 · recomputed`);
  assert.ok(md.includes('1.20 GiB · 4 allocs\n'), 'the forward stack has no backward tag');
  // the synthetic frames are said, never offered as links to open
  assert.ok(md.includes('- *module* layer1\\.0\\.conv1\n'));
  assert.ok(md.includes('- *autograd node* ConvolutionBackward0, run by the backward() called from:\n'));
  assert.ok(!md.includes(encodeURIComponent('<backward>')) && !md.includes(encodeURIComponent('<module>')));
  assert.ok(md.includes(`](${openFrameUri('/w/train.py', 44)}) train`), 'the backward() caller stays the outer frame');
});

test('hover: a line holding both its ops\' backward and a backward() it calls says both', () => {
  const unlinked = { id: 7, backward: true, frames: [{ file: '/w/model.py', line: 12, name: 'Block.forward', user: true }] };
  const both = new Map([...stacks, [7, unlinked]]);
  const s = stat('/w/model.py', 12, GiB, 512 * MiB, { topStacks: [{ stackId: 5, bytesAtPeak: 256 * MiB, count: 1 }, { stackId: 7, bytesAtPeak: 256 * MiB, count: 1 }] });
  const md = hoverMarkdown(s, { peakBytes: GiB, where: '', stack: (id) => both.get(id) });
  assert.match(md, /\| Backward at peak \(made by the backward of this line's ops and the backward\(\) called here\) \| 512 MiB/);
});

test('"backward of" in the snapshot panel: the forward line, else the op; node, module and recompute after it', () => {
  assert.equal(backwardOfText(LINKED.backwardOf), 'backward of /w/model.py:12 · ConvolutionBackward0 · layer1.0.conv1 · recomputed');
  const libraryOnly = { node: 'MmBackward0', module: '', recomputed: false, line: null, op: { file: '/venv/x.py', line: 3, name: 'f' } };
  assert.equal(backwardOfText(libraryOnly, (f) => f.split('/').pop()), 'backward of x.py:3 · MmBackward0');
  assert.equal(backwardOfText({ node: 'AddBackward0', module: '', recomputed: false, line: null, op: null }), 'backward of a forward op · AddBackward0');
  assert.deepEqual(LINKED.frames.map(isSyntheticFrame), [false, false, true, true, false]);
});

/** A backward peak as the reader's backwardPeak(device) gives it. */
const PEAK = {
  device: 0,
  peakBytes: 5 * GiB,
  timeUs: 1_700_000_002_500_000,
  madeInBackwardBytes: 2 * GiB,
  linkedBytes: 1.5 * GiB,
  recomputedBytes: 256 * MiB,
  lines: [
    { file: '/w/model.py', line: 12, name: 'Block.forward', module: 'layer1.0.conv1', bytes: GiB, count: 8, recomputedBytes: 256 * MiB },
    { file: '/w/train.py', line: 44, name: 'train', module: '', bytes: 512 * MiB, count: 3, recomputedBytes: 0 },
    { file: '/w/model.py', line: 20, name: 'Head.forward', module: 'fc', bytes: 512 * MiB, count: 2, recomputedBytes: 0 },
  ],
};

test('summary --json: per device the backward peak and its forward lines; null and [] where no backward ran', () => {
  const time = makeTimeBase(1_700_000_000_000_000, [{ device: 0, timeUs: 1_700_000_002_000_000, kind: 'user', label: 'step 3' }]);
  const json = backwardPeakJson({ backwardPeak: () => PEAK }, 0, time);
  assert.equal(json.backward_peak_bytes, 5 * GiB);
  assert.deepEqual(json.backward_by_forward_line[0], { file: '/w/model.py', line: 12, name: 'Block.forward', module: 'layer1.0.conv1', bytes: GiB, count: 8, recomputed_bytes: 256 * MiB });
  assert.deepEqual(json.backward_by_forward_line.map((l) => l.bytes), [GiB, 512 * MiB, 512 * MiB]);
  assert.deepEqual([json.backward_peak_t_s, json.backward_peak_step, json.backward_made_bytes, json.backward_linked_bytes], [2.5, 3, 2 * GiB, 1.5 * GiB]);
  assert.deepEqual(backwardPeakJson({ backwardPeak: () => null }, 0, time), { backward_peak_bytes: null, backward_by_forward_line: [] });

  const text = backwardPeakText({ devices: [{ device: 0, ...json }, { device: 1, backward_peak_bytes: null, backward_by_forward_line: [] }] }, 2);
  assert.equal(text[0], 'Backward peak on device 0: 5.00 GiB allocated at 2.500 s (step 3), while a backward ran');
  assert.equal(text[1], '  made during backward and live then: 2.00 GiB, of it 1.50 GiB by the backward of forward lines, 256 MiB recomputed (activation checkpointing)');
  assert.match(text[3], /^ {2}\s*1\.00 GiB {2}50\.0% {2}\/w\/model\.py:12 {2}layer1\.0\.conv1 {2}recomputed 25%$/);
  assert.match(text[4], /^ {2}\s*512 MiB {2}25\.0% {2}\/w\/train\.py:44 {2}—$/);
  assert.equal(text[5], '  … 1 more lines (--json lists them)');
  assert.equal(text.length, 6, 'a device where no backward ran has no block');
});
