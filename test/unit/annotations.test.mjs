// Annotation text, colour tier, selection and hover from per-line statistics (src/core/views/annotations).
// GIVEN LineStat values built from byte counts, WHEN annotated, THEN the text and tiers follow the spec
// ("▲ 1.50 GiB at peak · 312 allocs"; tiers from the manifest's colour descriptions: ≥25% high,
// 5–25% medium, <5% low).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { annotationText, computeAnnotations, hoverMarkdown, matchDocument, openFrameUri, tierFor, OPEN_FRAME_COMMAND } from '../../src/core/views/annotations/index.ts';

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;

function stat(file, line, selfBytesAtPeak, extra = {}) {
  return {
    file,
    line,
    selfBytesAtPeak,
    inclusiveBytesAtPeak: selfBytesAtPeak,
    totalAllocatedBytes: selfBytesAtPeak,
    allocCount: 1,
    liveNowBytes: 0,
    backwardBytesAtPeak: 0,
    topStacks: [],
    ...extra,
  };
}

test('the issue example renders exactly', () => {
  assert.equal(annotationText(stat('/w/train.py', 12, 1.5 * GiB, { allocCount: 312 })), '▲ 1.50 GiB at peak · 312 allocs');
  assert.equal(annotationText(stat('/w/train.py', 12, 4 * MiB, { allocCount: 1 })), '▲ 4.00 MiB at peak · 1 alloc');
});

test('a line with nothing live at peak shows its total as a transient', () => {
  const s = stat('/w/train.py', 3, 0, { totalAllocatedBytes: 640 * MiB, allocCount: 40 });
  assert.equal(annotationText(s), '△ 640 MiB allocated · 40 allocs · none live at peak');
});

test('tiers at the documented boundaries', () => {
  assert.equal(tierFor(0.25), 'high');
  assert.equal(tierFor(0.2499), 'medium');
  assert.equal(tierFor(0.05), 'medium');
  assert.equal(tierFor(0.0499), 'low');
  assert.equal(tierFor(0), 'low');
});

test('selection by minBytes, share of peak and heavy marks', () => {
  const peak = 4 * GiB;
  const stats = [
    stat('/w/a.py', 1, 2 * GiB), // 50% → high
    stat('/w/a.py', 2, 512 * MiB), // 12.5% → medium
    stat('/w/a.py', 3, 100 * MiB), // 2.4% → low
    stat('/w/a.py', 4, 512 * 1024), // 0.5 MiB < minBytes 1 MiB → hidden
    stat('/w/a.py', 5, 0, { totalAllocatedBytes: 0, allocCount: 0 }), // never allocated → hidden
    stat('/w/a.py', 6, 0, { totalAllocatedBytes: 3 * MiB, allocCount: 3 }), // transient ≥ minBytes → shown
  ];
  const out = computeAnnotations(stats, { peakBytes: peak, minBytes: MiB, heavyCount: 2 });
  assert.deepEqual(out.map((a) => a.line), [1, 2, 3, 6]);
  assert.deepEqual(out.map((a) => a.tier), ['high', 'medium', 'low', 'low']);
  assert.equal(out[0].shareOfPeak, 0.5);
  assert.equal(out[1].shareOfPeak, 0.125);
  // the two heaviest by self bytes at peak get the overview-ruler mark; a transient never does
  assert.deepEqual(out.filter((a) => a.heavy).map((a) => a.line), [1, 2]);
  assert.equal(out[3].bytes, 3 * MiB);
});

test('hover: numbers, backward share and clickable frames through the one trusted command', () => {
  const s = stat('/w/model.py', 7, 256 * MiB, {
    inclusiveBytesAtPeak: 300 * MiB,
    totalAllocatedBytes: 1 * GiB,
    allocCount: 4,
    liveNowBytes: 128 * MiB,
    backwardBytesAtPeak: 64 * MiB,
    topStacks: [{ stackId: 9, bytesAtPeak: 256 * MiB, count: 4 }],
  });
  // an unlinked backward stack (the backward() caller's frames) whose user frame is this line
  const stacks = new Map([[9, { id: 9, backward: true, frames: [{ file: '/w/model.py', line: 7, name: 'forward', user: true }, { file: '/w/train.py', line: 30, name: '<module>', user: true }] }]]);
  const md = hoverMarkdown(s, { peakBytes: 1 * GiB, where: 'rank 1', stack: (id) => stacks.get(id) });
  assert.match(md, /\| Self at peak \| 256 MiB \(25% of 1\.00 GiB\) \|/);
  assert.match(md, /\| Inclusive at peak \| 300 MiB \|/);
  assert.match(md, /\| Total allocated \| 1\.00 GiB \|/);
  assert.match(md, /\| Allocations \| 4 \|/);
  assert.match(md, /\| Live now \| 128 MiB \|/);
  assert.match(md, /\| Forward at peak \| 192 MiB \|/); // 256 − 64
  assert.match(md, /\| Backward at peak \(made during the backward\(\) called here\) \| 64\.0 MiB \(25% of self at peak\) \|/); // 64/256
  assert.match(md, /rank 1/);
  assert.match(md, /256 MiB · 4 allocs · backward\n/);
  const uri = openFrameUri('/w/train.py', 30);
  assert.ok(md.includes(`(${uri})`), 'frame links use the open-frame command URI');
  assert.ok(uri.startsWith(`command:${OPEN_FRAME_COMMAND}?`));
  assert.deepEqual(JSON.parse(decodeURIComponent(uri.split('?')[1])), ['/w/train.py', 30]);
});

test('hover escapes names so a frame cannot inject markdown links', () => {
  const s = stat('/w/x.py', 1, MiB, { topStacks: [{ stackId: 1, bytesAtPeak: MiB, count: 1 }] });
  const md = hoverMarkdown(s, { peakBytes: MiB, where: '', stack: () => ({ id: 1, backward: false, frames: [{ file: '/w/x.py', line: 1, name: '[evil](command:rm)' }] }) });
  assert.ok(!md.includes('[evil](command:rm)'));
  assert.ok(md.includes('\\[evil\\]\\(command:rm\\)'));
});

test('documents match frame paths exactly, else by the longest unambiguous path suffix', () => {
  const frames = ['/cluster/home/u/proj/train.py', '/cluster/home/u/proj/models/net.py', '/other/net.py'];
  assert.equal(matchDocument('/cluster/home/u/proj/train.py', frames), '/cluster/home/u/proj/train.py');
  assert.equal(matchDocument('/home/me/proj/train.py', frames), '/cluster/home/u/proj/train.py');
  // two frames named net.py: the one sharing models/net.py wins
  assert.equal(matchDocument('/home/me/proj/models/net.py', frames), '/cluster/home/u/proj/models/net.py');
  // only the base name is shared with both: ambiguous, no match
  assert.equal(matchDocument('/home/me/net.py', frames), undefined);
  assert.equal(matchDocument('/home/me/eval.py', frames), undefined);
});
