// The reader against a reference that shares nothing with the recorder's mechanism (Note [Backward on the forward
// line] in native/allocator/src/backward_links.h): real H200 captures of a BERT training step in both modes
// (test/fixtures/backward-bert-{auto,lens}.capture), each beside the answer test/gpu/backward_lines_check.py computed
// in the same run from anomaly mode's per-node forward tracebacks and hook stamps around each node. Every allocation
// made during the last step's backward must sit on the reference's forward line, name the reference's node, and the
// backward peak must hold what the reference found live there.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { openModel, root } from './reader-support.mjs';

const models = [];
after(() => models.forEach((m) => m.close()));

function load(mode) {
  const base = path.join(root, 'test/fixtures', `backward-bert-${mode}`);
  const model = openModel(`${base}.capture`);
  models.push(model);
  return { model, answer: JSON.parse(fs.readFileSync(`${base}.answer.json`, 'utf8')) };
}

/** The capture's allocation of each reference allocation: same address and size, at the same moment. The reader's
 * clock is the capture's wall-clock µs, the reference's CLOCK_MONOTONIC ns: the offset is the one that matches the
 * most reference allocations (their events are the same events). */
function match(model, refs) {
  const spans = model.spans(0, -Infinity, Infinity, 1e6);
  const byKey = new Map();
  for (const s of spans) {
    const k = `${s.address}:${s.size}`;
    if (!byKey.has(k)) byKey.set(k, []);
    byKey.get(k).push(s);
  }
  const near = (offset) => refs.map((r) => (byKey.get(`${r.addr}:${r.size}`) ?? []).find((s) => Math.abs(s.startUs - (r.t_ns / 1000 + offset)) < 2));
  let best = [];
  for (const s of byKey.get(`${refs[1].addr}:${refs[1].size}`) ?? []) {
    const found = near(s.startUs - refs[1].t_ns / 1000);
    if (found.filter(Boolean).length > best.filter(Boolean).length) best = found;
  }
  return best;
}

for (const mode of ['auto', 'lens']) {
  test(`${mode}: every allocation of the last backward sits on the reference's forward line, with its node`, () => {
    const { model, answer } = load(mode);
    const refs = answer.all_allocations;
    assert.ok(refs.length > 300, `the reference has ${refs.length} allocations`);
    const spans = match(model, refs);
    assert.equal(spans.filter(Boolean).length, refs.length, 'each reference allocation is an allocation of the capture');
    let bytes = 0;
    let linkedBytes = 0;
    const wrong = [];
    refs.forEach((r, k) => {
      const stack = model.stack(spans[k].stackId);
      const user = stack.backwardOf ? stack.backwardOf.line : stack.frames.find((f) => f.user);
      const got = user ? [path.basename(user.file), user.line] : null;
      bytes += r.size;
      if (r.node) linkedBytes += r.size;
      if (JSON.stringify(got) !== JSON.stringify(r.line) || (stack.backwardOf?.node ?? null) !== r.node) {
        wrong.push({ size: r.size, want: [r.line, r.node], got: [got, stack.backwardOf?.node ?? null] });
      }
      if (r.node) assert.ok(stack.backward, 'made by a node: flagged backward');
    });
    assert.deepEqual(wrong, [], `all ${refs.length} allocations (${bytes} B) on the reference's line and node`);
    assert.ok(linkedBytes > 0.9 * bytes, `most bytes came from nodes (${linkedBytes} of ${bytes})`);
  });

  test(`${mode}: the backward peak holds what the reference found live there, by forward line`, () => {
    const { model, answer } = load(mode);
    const peak = model.backwardPeak(0);
    assert.equal(peak.peakBytes, answer.backward_peak_allocated);
    const want = new Map();
    for (const r of answer.allocations) {
      const k = `${r.line[0]}:${r.line[1]}`;
      want.set(k, (want.get(k) ?? 0) + r.size);
    }
    const got = new Map(peak.lines.map((l) => [`${path.basename(l.file)}:${l.line}`, l.bytes]));
    assert.deepEqual(got, want);
    assert.equal(peak.madeInBackwardBytes, answer.allocations.reduce((s, r) => s + r.size, 0));
    // The loss line's two nodes (NllLossBackward0, LogSoftmaxBackward0) made the backward peak; the backward() line
    // holds what no node made.
    assert.equal(peak.linkedBytes, answer.allocations.filter((r) => r.node).reduce((s, r) => s + r.size, 0));
  });
}
