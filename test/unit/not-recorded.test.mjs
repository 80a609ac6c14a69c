// Note [Not recorded] (src/core/analyses/summary/notRecorded.ts): a recording setting that leaves a part
// out is said where the figures are shown. Captures from the lens allocator on the simulated device
// (reference/sim_training.py), once with Python stacks and once without, read by the real reader.
import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import { needsAllocator, openModel, simTraining } from './reader-support.mjs';
import { summaryDocument, summarizeFile } from '../../src/core/analyses/summary/index.ts';
import { notRecorded } from '../../src/core/analyses/summary/notRecorded.ts';
import { headerInfoOf } from '../../src/core/base/model/header.ts';
import { OpenedCapture } from '../../src/core/views/snapshot/openedCapture.ts';

function opened(file) {
  const m = openModel(file);
  try {
    const session = new OpenedCapture(m, { fileName: path.basename(file), displayPath: (f) => path.basename(f) });
    const [msg] = session.handle({ type: 'ready' });
    assert.equal(msg.type, 'opened');
    return { info: msg.info, doc: summaryDocument(m), lines: m.header().stacks };
  } finally {
    m.close();
  }
}

test('a capture recorded without stacks says so in the summary text, its JSON and the snapshot panel', { skip: needsAllocator }, () => {
  const { cap } = simTraining(3, ['--no-stacks']);
  const { info, doc, lines } = opened(cap);
  assert.equal(lines, false, 'the header says stacks: false');
  assert.equal(doc.identity.not_recorded?.length, 1);
  assert.match(doc.identity.not_recorded[0], /^Python lines were not recorded/);
  assert.deepEqual(info.notRecorded, doc.identity.not_recorded);
  const { text } = summarizeFile(cap);
  assert.match(text, /Not recorded: Python lines were not recorded/);
  // and what it says is true: no allocation of this capture has a line
  assert.ok(doc.top_lines.every((l) => l.line === 0), `no line: ${JSON.stringify(doc.top_lines.slice(0, 2))}`);
});

test('a capture recorded with stacks says nothing is missing, and names its lines', { skip: needsAllocator }, () => {
  const { cap } = simTraining(3);
  const { info, doc, lines } = opened(cap);
  assert.equal(lines, true);
  assert.equal(doc.identity.not_recorded, undefined);
  assert.equal(info.notRecorded, undefined);
  assert.doesNotMatch(summarizeFile(cap).text, /Not recorded/);
  assert.ok(doc.top_lines.some((l) => l.file && l.line > 0), "lines at the peak");
});

test('module paths turned off are said; a file that does not say (a pickle) gets no sentence', () => {
  assert.deepEqual(notRecorded(headerInfoOf({ stacks: true, module_paths: false })), [
    'Module paths were off (GPUMEM_MODULE_PATHS=0): activations are grouped by module class, not by module path.',
  ]);
  assert.deepEqual(notRecorded(headerInfoOf({ stacks: true, module_paths: true })), []);
  assert.deepEqual(notRecorded(headerInfoOf({})), []);
  assert.deepEqual(notRecorded(headerInfoOf({ stacks: 'no' })), [], 'a value of the wrong type is dropped');
});

test('tags turned off are said, beside stacks turned off, which then no longer call the categories complete', () => {
  const tagsOff = 'Parameters, gradients and optimizer state were not tagged (GPUMEM_TAGS=0): the categories count their ' +
    'bytes as other memory.';
  assert.deepEqual(notRecorded(headerInfoOf({ stacks: true, module_paths: true, tags: false })), [tagsOff]);
  assert.deepEqual(notRecorded(headerInfoOf({ stacks: true, module_paths: true, tags: true })), []);
  const both = notRecorded(headerInfoOf({ stacks: false, tags: false }));
  assert.equal(both.length, 2);
  assert.match(both[0], /totals and segments are complete\.$/);
  assert.equal(both[1], tagsOff);
  assert.match(notRecorded(headerInfoOf({ stacks: false, tags: true }))[0], /totals, segments and categories are complete\.$/);
});

test('figures only (GPUMEM_EVENTS=0) is said once, in place of every finer part it already leaves out', () => {
  const said = notRecorded(headerInfoOf({ stacks: true, module_paths: true, tags: true, events: false }));
  assert.equal(said.length, 1);
  assert.match(said[0], /^Allocations were not recorded one by one \(figures only: --figures-only or gpuMemoryLens\.recordAllocations = false\)/);
  assert.match(said[0], /no sizes by line, editor annotations, segments, categories or leak findings/);
  assert.deepEqual(notRecorded(headerInfoOf({ stacks: false, tags: false, events: false })), said);
  assert.deepEqual(notRecorded(headerInfoOf({ stacks: true, events: true })), []);
});

test('a PyTorch backend with stats only (cudaMallocAsync) is said with its name, not as a setting the user chose', () => {
  // the bootstrap writes events: false for it (native/python/gpumem/_capture.py), whatever GPUMEM_EVENTS said
  const [said, ...rest] = notRecorded(headerInfoOf({ stacks: true, events: false, record_steps: 0,
    pytorch_allocator_backend: 'cudaMallocAsync' }));
  assert.deepEqual(rest, []);
  assert.match(said, /^Allocations were not recorded one by one \(PyTorch's cudaMallocAsync backend offers its stats only/);
  assert.doesNotMatch(said, /--figures-only/);
  const native = notRecorded(headerInfoOf({ stacks: true, events: false, pytorch_allocator_backend: 'native' }));
  assert.match(native[0], /\(figures only: --figures-only/, "the native backend's figures only is the setting");
});

test('recording the first steps only is said with its number, and only when a step limit was in force', () => {
  // Note [Recorded steps] (native/python/gpumem/_recorded_steps.py): the header's record_steps, from the bootstrap
  const said = notRecorded(headerInfoOf({ stacks: true, module_paths: true, tags: true, events: true, record_steps: 20 }));
  assert.deepEqual(said, [
    'Allocations were recorded one by one for the first 20 steps only (--record-steps 20 or ' +
      'gpuMemoryLens.recordSteps = 20): sizes by line, editor annotations, segments, categories and leak findings ' +
      "cover those steps; after them, allocated and reserved are PyTorch's own figures, read at each sample.",
  ]);
  assert.match(notRecorded(headerInfoOf({ record_steps: 1 }))[0], /for the first 1 step only/);
  assert.deepEqual(notRecorded(headerInfoOf({ stacks: true, record_steps: 0 })), [], '0: every step');
  assert.deepEqual(notRecorded(headerInfoOf({ stacks: true, record_steps: '5' })), [], 'a value of the wrong type is dropped');
  // with stacks off too, both are said, the step limit first
  const both = notRecorded(headerInfoOf({ stacks: false, record_steps: 3 }));
  assert.equal(both.length, 2);
  assert.match(both[0], /^Allocations were recorded one by one for the first 3/);
  assert.match(both[1], /^Python lines were not recorded/);
});
