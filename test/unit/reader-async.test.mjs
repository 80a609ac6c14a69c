// openModelAsync parses on a worker thread (the snapshot panel uses it so the extension host stays
// responsive); it must build the same model as the synchronous open, for pickles and captures, and reject
// bad input with the same actionable error.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { FIXTURES, openModel, root } from './reader-support.mjs';

const { openModelAsync } = await import('../../src/core/base/model/open.ts');
const CAPTURE = path.join(root, 'test/fixtures/h200-e2e-train.capture');

function views(model) {
  const device = model.devices()[0];
  const { t0Us, t1Us } = model.timeRange(device);
  return {
    summary: model.summary(),
    lines: model.lineStats(device),
    end: model.stateAt(device, Infinity),
    timeline: model.timeline(device, t0Us, t1Us, 64),
    spans: model.spans(device, t0Us, t1Us, 50),
    problems: model.problems(),
  };
}

for (const file of [...FIXTURES, CAPTURE]) {
  test(`async open of ${path.basename(file)} builds the same model as the synchronous one`, async () => {
    const sync = openModel(file);
    const asyncModel = await openModelAsync(file);
    try {
      const a = views(sync);
      assert.ok(a.summary.devices[0].events > 0, 'the fixture has events');
      assert.deepEqual(views(asyncModel), a);
    } finally {
      sync.close();
      asyncModel.close();
    }
  });
}

test('async open rejects a pickle that contains code, like the synchronous open', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpumem-async-'));
  const evil = path.join(dir, 'evil.pickle');
  // protocol 2: GLOBAL 'os system', a string argument, TUPLE1, REDUCE, STOP
  fs.writeFileSync(evil, Buffer.concat([Buffer.from([0x80, 2]), Buffer.from('cos\nsystem\n'), Buffer.from([0x55, 4]), Buffer.from('true'), Buffer.from([0x85, 0x52, 0x2e])]));
  let syncMessage;
  try {
    openModel(evil);
  } catch (e) {
    syncMessage = e.message;
  }
  assert.match(syncMessage ?? '', /contains code/);
  await assert.rejects(openModelAsync(evil), (e) => e.message === syncMessage);
  fs.rmSync(dir, { recursive: true, force: true });
});
