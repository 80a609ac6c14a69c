// Note [Async queries] (native/addon/src/addon.cpp) and Note [First answers] (src/core/base/model/open.ts): the first
// answers of a panel computed on a worker thread are the very JSON the synchronous queries return; while a query runs
// on the worker the model refuses the host thread, and a close() waits for the query.
import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import { root } from './reader-support.mjs';

const { openModel, openModelAsync } = await import('../../src/core/base/model/open.ts');
const { OpenedCapture } = await import('../../src/core/views/snapshot/openedCapture.ts');
const FILE = path.join(root, 'test/fixtures/pytorch-snapshots/resnet50-bf16-train-python-stacks.pickle');

test('queryAsync answers what the synchronous query answers', async () => {
  const m = openModel(FILE);
  try {
    const h = m.handle;
    const { t0Us, t1Us } = m.timeRange(0);
    assert.equal(await h.queryAsync('summary'), h.summary());
    assert.equal(await h.queryAsync('markers', 0), h.markers(0));
    assert.equal(await h.queryAsync('lineStats', 0), h.lineStats(0));
    assert.equal(await h.queryAsync('spans', 0, t0Us, t1Us, 3001, -1), h.spans(0, t0Us, t1Us, 3001, -1));
    assert.equal(await h.queryAsync('timeline', 0, t0Us, t1Us, 777, true), h.timeline(0, t0Us, t1Us, 777, true));
    // the summary's verdict probe (Note [First answers in turns] in src/core/views/snapshot/openedCapture.ts)
    assert.equal(await h.queryAsync('whatIf', 0, Infinity, 3 * 2 ** 20), h.whatIf(0, Infinity, { requests: [3 * 2 ** 20] }));
    assert.equal(await h.queryAsync('whatIf', 0, Infinity), h.whatIf(0, Infinity, {}));
    assert.equal(await h.queryAsync('whatIf', 0, (t0Us + t1Us) / 2, 2 ** 20, 2 ** 30), h.whatIf(0, (t0Us + t1Us) / 2, { requests: [2 ** 20, 2 ** 30] }));
    assert.throws(() => h.queryAsync('replay', 0), /unknown query replay/);
  } finally {
    m.close();
  }
});

test('while a query runs on the worker, the model refuses the host thread; close() waits for it', async () => {
  const m = openModel(FILE);
  const pending = m.handle.queryAsync('lineStats', 0);
  assert.throws(() => m.handle.summary(), /answering a query on a worker thread/);
  m.close();
  assert.ok((await pending).startsWith('['), 'the query in flight still answers');
  assert.throws(() => m.handle.summary(), /closed/);
});

test('a prepared session answers the page as an unprepared one does', async () => {
  const a = await openModelAsync(FILE);
  const b = openModel(FILE);
  try {
    const prepared = new OpenedCapture(a, { fileName: 'x.pickle' });
    await prepared.prepare();
    const plain = new OpenedCapture(b, { fileName: 'x.pickle' });
    const { t0Us, t1Us } = a.timeRange(0);
    for (const s of [prepared, plain]) s.first = [s.opened(), ...s.deviceMessages(0), s.timeline(1, 0, t0Us, t1Us, 1300, 3000)];
    assert.deepEqual(prepared.first, plain.first);
    // a later timeline question prepared on the worker (a zoomed window, one owner's bands) answers as an unprepared one
    const [z0, z1] = [t0Us + (t1Us - t0Us) / 3, t0Us + (t1Us - t0Us) / 2];
    await prepared.prepareTimeline(0, z0, z1, 640, 3000, 1);
    assert.deepEqual(prepared.timeline(7, 0, z0, z1, 640, 3000, 1), plain.timeline(7, 0, z0, z1, 640, 3000, 1));
  } finally {
    a.close();
    b.close();
  }
});
