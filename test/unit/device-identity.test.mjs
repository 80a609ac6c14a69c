// The GPU's name comes from the capture's REC_DEVICE (the only place a writer puts it: the
// header is written before CUDA exists, Note [Devices] in gpumem_format.h) and reaches every view.
// Fixture: test/fixtures/h200-e2e-train.capture, recorded by the real allocator on an NVIDIA H200. The
// expected identity is decoded from the same bytes by the spec-only reader (reference/capture_facts.py).
import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import { openModel, python, root } from './reader-support.mjs';
import { formatBytes } from '../../src/core/base/units/bytes.ts';
import { summaryDocument, summarizeFile } from '../../src/core/analyses/summary/index.ts';
import { OpenedCapture } from '../../src/core/views/snapshot/openedCapture.ts';

const H200 = path.join(root, 'test/fixtures/h200-e2e-train.capture');
const facts = python('capture_facts.py', H200);

test('the H200 capture names its GPU: REC_DEVICE read by the spec-only reader', () => {
  assert.deepEqual(facts.devices.map((d) => [d.index, d.name]), [[0, 'NVIDIA H200']]);
  assert.equal(Math.round(facts.devices[0].totalBytes / 2 ** 30), 140, 'an H200 has about 140 GiB');
});

test('the reader, the summary and its text name the GPU the capture was recorded on', () => {
  const m = openModel(H200);
  try {
    const info = m.fileInfo();
    assert.deepEqual(info.devices.map((d) => ({ index: d.index, name: d.name, totalBytes: d.totalBytes })), facts.devices);
    const doc = summaryDocument(m);
    assert.equal(doc.devices[0].name, 'NVIDIA H200');
    assert.equal(doc.devices[0].total_bytes, facts.devices[0].totalBytes);
  } finally {
    m.close();
  }
  const { text } = summarizeFile(H200);
  assert.match(text, new RegExp(`Device cuda:0 NVIDIA H200 \\(${formatBytes(facts.devices[0].totalBytes).replace(/[.()]/g, '\\$&')}\\)`));
});

test('the snapshot panel is told the GPU name per device', () => {
  const m = openModel(H200);
  try {
    const session = new OpenedCapture(m, { fileName: 'h200-e2e-train.capture', displayPath: (f) => path.basename(f) });
    const [opened] = session.handle({ type: 'ready' });
    assert.equal(opened.type, 'opened');
    assert.deepEqual(opened.info.deviceNames, { 0: 'NVIDIA H200' });
  } finally {
    m.close();
  }
});
