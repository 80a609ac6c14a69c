// Backward on the forward line over a real GPU capture (test/fixtures/backward-*.capture): what the editor, the
// snapshot panel, `gpumem summary` and the assistant say is computed from the reader's own answers for that capture
// (line statistics in both groupings, linked stacks, the backward peak), so each figure below is the capture's.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { openModel, root } from './reader-support.mjs';
import { formatBytes } from '../../src/core/base/units/bytes.ts';
import { userFrame } from '../../src/core/base/model/frames.ts';
import { annotationText, computeAnnotations, hoverMarkdown, openFrameUri } from '../../src/core/views/annotations/index.ts';
import { summarizeFile } from '../../src/core/analyses/summary/index.ts';
import { OpenedCapture } from '../../src/core/views/snapshot/openedCapture.ts';
import { peakLinesAnswer } from '../../src/core/views/assistant/answers/peakLines.ts';

const FIXTURES = path.join(root, 'test/fixtures');
/** every backward capture (one per allocator mode), each with the reference's answer beside it (NAME.answer.json) */
const ALL = fs.readdirSync(FIXTURES).filter((f) => /^backward-.*\.capture$/.test(f)).sort().map((f) => path.join(FIXTURES, f));
const FILE = ALL[0] ?? path.join(FIXTURES, 'backward-missing.capture');
const base = (f) => f.split(/[\\/]/).pop();

const model = openModel(FILE);
const device = model.devices()[0];
const stats = model.lineStats(device);
const onCaller = model.lineStats(device, { backwardOnCaller: true });
const linked = (st) => st?.backwardOf !== undefined;
after(() => model.close());

test('the capture has forward lines holding their ops\' backward bytes (what everything below is about)', () => {
  const forwardLines = stats.filter((s) => s.backwardBytesAtPeak > 0 && s.topStacks.some((t) => linked(model.stack(t.stackId))));
  assert.ok(forwardLines.length >= 2, `lines with linked backward bytes: ${forwardLines.length}`);
  // every byte made during backward and live at the peak is counted once in either grouping
  const sum = (rows) => rows.reduce((a, s) => a + s.backwardBytesAtPeak, 0);
  assert.equal(sum(stats), sum(onCaller));
  assert.ok(sum(stats) > 0);
  // on the caller's grouping those bytes sit on fewer lines: the backward() calls
  assert.ok(onCaller.filter((s) => s.backwardBytesAtPeak > 0).length < stats.filter((s) => s.backwardBytesAtPeak > 0).length);
});

test('editor: each line\'s text is its forward bytes then its backward bytes, as the reader counts them', () => {
  const peakBytes = model.current(device).peakAllocatedBytes;
  const shown = computeAnnotations(stats, { peakBytes, minBytes: 0 });
  const split = shown.filter((a) => a.stat.backwardBytesAtPeak > 0 && a.stat.backwardBytesAtPeak < a.stat.selfBytesAtPeak);
  assert.ok(split.length > 0, 'some line holds both forward and backward bytes at the peak');
  for (const a of split) {
    const s = a.stat;
    const allocs = `${s.allocCount} alloc${s.allocCount === 1 ? '' : 's'}`;
    assert.equal(a.text, `▲ ${formatBytes(s.selfBytesAtPeak - s.backwardBytesAtPeak)} at peak · backward ${formatBytes(s.backwardBytesAtPeak)} · ${allocs}`);
  }
  for (const s of stats.filter((x) => x.selfBytesAtPeak > 0 && x.backwardBytesAtPeak === x.selfBytesAtPeak)) {
    assert.equal(annotationText(s), `▲ backward ${formatBytes(s.backwardBytesAtPeak)} at peak · ${s.allocCount} alloc${s.allocCount === 1 ? '' : 's'}`);
  }
});

test('hover: a linked top stack names the annotated line as the forward line, with its node and module', () => {
  const peakBytes = model.current(device).peakAllocatedBytes;
  let checked = 0;
  for (const s of stats.filter((x) => x.backwardBytesAtPeak > 0)) {
    const md = hoverMarkdown(s, { peakBytes, where: '', stack: (id) => model.stack(id), maxStacks: 10 });
    assert.match(md, new RegExp(`\\| Forward at peak \\| ${formatBytes(s.selfBytesAtPeak - s.backwardBytesAtPeak)} \\|`));
    for (const top of s.topStacks.slice(0, 10)) {
      const st = model.stack(top.stackId);
      if (!linked(st) || userFrame(st.frames)?.line !== s.line || userFrame(st.frames)?.file !== s.file) continue;
      const b = st.backwardOf;
      // the reader's forward line is the stack's user frame: the line the annotation is on
      assert.deepEqual([b.line.file, b.line.line], [s.file, s.line]);
      const tail = [b.node, b.module, b.recomputed ? 'recomputed' : ''].filter(Boolean).map((x) => x.replace(/[\\`*_{}[\]()#+\-.!<>|~]/g, '\\$&'));
      const site = `[${`${base(s.file)}:${s.line}`.replace(/[\\`*_{}[\]()#+\-.!<>|~]/g, '\\$&')}](${openFrameUri(s.file, s.line)})`;
      assert.ok(md.includes(`· ${[`backward of ${site}`, ...tail].join(' · ')}`), `${s.file}:${s.line} stack ${top.stackId}`);
      assert.match(md, /\| Backward at peak \(made by the backward of this line's ops/);
      checked++;
    }
  }
  assert.ok(checked > 0, 'a linked stack was checked');
});

test('snapshot panel: a linked block\'s stack view carries the node and module the reader gives', () => {
  const capture = new OpenedCapture(model, { fileName: base(FILE) });
  const stackId = stats.flatMap((s) => s.topStacks).map((t) => t.stackId).find((id) => linked(model.stack(id)));
  const [msg] = capture.handle({ type: 'requestStack', requestId: 1, stackId });
  assert.deepEqual(msg.view.backwardOf, model.stack(stackId).backwardOf);
  assert.equal(msg.view.backward, true);
  // the sites table in each grouping is the reader's
  const [forward] = capture.handle({ type: 'requestSites', device, backwardGrouping: 'forward' });
  const [caller] = capture.handle({ type: 'requestSites', device, backwardGrouping: 'caller' });
  assert.deepEqual(forward.rows.map((r) => [r.file, r.line, r.selfBytesAtPeak, r.backwardBytesAtPeak]), stats.slice(0, 2000).map((s) => [s.file, s.line, s.selfBytesAtPeak, s.backwardBytesAtPeak]));
  assert.deepEqual(caller.rows.map((r) => [r.file, r.line, r.selfBytesAtPeak, r.backwardBytesAtPeak]), onCaller.slice(0, 2000).map((s) => [s.file, s.line, s.selfBytesAtPeak, s.backwardBytesAtPeak]));
  assert.equal(caller.backwardGrouping, 'caller');
});

test('gpumem summary: the backward peak and its forward lines are the reader\'s, in --json and in the text', () => {
  const peak = model.backwardPeak(device);
  assert.ok(peak && peak.lines.length > 0);
  const { summary, text } = summarizeFile(FILE);
  const d = summary.devices.find((x) => x.device === device);
  assert.equal(d.backward_peak_bytes, peak.peakBytes);
  assert.deepEqual(
    d.backward_by_forward_line,
    peak.lines.map((l) => ({ file: l.file, line: l.line, ...(l.name ? { name: l.name } : {}), module: l.module, bytes: l.bytes, count: l.count, recomputed_bytes: l.recomputedBytes })),
  );
  assert.ok(peak.lines.reduce((a, l) => a + l.bytes, 0) <= peak.madeInBackwardBytes);
  assert.ok(peak.madeInBackwardBytes <= peak.peakBytes && peak.linkedBytes <= peak.madeInBackwardBytes);
  assert.match(text, new RegExp(`Backward peak on device ${device}: ${formatBytes(peak.peakBytes).replace('.', '\\.')} allocated at `));
  const top = peak.lines[0];
  assert.ok(text.split('\n').some((l) => l.includes(`${base(top.file)}:${top.line}`) && l.includes(formatBytes(top.bytes)) && l.includes(top.module || '—')), 'the top forward line is listed');
});

test('assistant: peak lines split forward and backward, and a linked heaviest stack names its node and backward() line', () => {
  const got = peakLinesAnswer({ model, file: FILE }, { device, top: 25 });
  const byLine = new Map(stats.map((s) => [`${s.file}:${s.line}`, s]));
  let named = 0;
  for (const l of got.lines) {
    const s = byLine.get(`${l.file}:${l.line}`);
    if (s.backwardBytesAtPeak > 0) assert.deepEqual([l.forward_at_peak_bytes, l.by_backward_at_peak_bytes], [s.selfBytesAtPeak - s.backwardBytesAtPeak, s.backwardBytesAtPeak]);
    const st = model.stack(s.topStacks[0]?.stackId);
    if (!linked(st)) continue;
    assert.equal(l.heaviest_stack_backward_of.node, st.backwardOf.node);
    assert.ok(!(l.called_from ?? []).includes(l.backward_called_from), 'the forward callers stop at the backward node');
    named++;
  }
  assert.ok(named > 0);
});

test('gpumem summary --json: the backward peak by forward line is the reference\'s, in each mode', () => {
  // The reference (test/gpu/backward_lines_check.py) shares nothing with the recorder's links: each allocation live at
  // the backward peak with the forward line of the node anomaly mode's traceback gives, or the backward() line.
  assert.ok(ALL.length >= 1, 'a backward capture is committed');
  for (const file of ALL) {
    const answer = JSON.parse(fs.readFileSync(file.replace(/\.capture$/, '.answer.json'), 'utf8'));
    const want = new Map();
    for (const a of answer.allocations) want.set(`${a.line[0]}:${a.line[1]}`, (want.get(`${a.line[0]}:${a.line[1]}`) ?? 0) + a.size);
    const { summary } = summarizeFile(file);
    const [d] = summary.devices;
    assert.equal(d.backward_peak_bytes, answer.backward_peak_allocated, base(file));
    const got = new Map();
    for (const l of d.backward_by_forward_line) got.set(`${base(l.file)}:${l.line}`, (got.get(`${base(l.file)}:${l.line}`) ?? 0) + l.bytes);
    assert.deepEqual(got, want, base(file));
    assert.equal(d.backward_made_bytes, answer.allocations.reduce((a, x) => a + x.size, 0), base(file));
  }
});
