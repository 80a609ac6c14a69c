// What-if on real data: the breakdown per kind of segment, the verdict and `summary --json`'s what_if
// against the allocator's own answer (the native what-if engine on the simulated device), and `gpumem replay`.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { test } from 'node:test';
import { FIXTURES, openModel, root, tmpDir } from './reader-support.mjs';
import { parseBytes } from '../../src/core/base/units/parseBytes.ts';
import { parseSnapshotWebviewMessage } from '../../src/core/base/protocol/snapshot.ts';
import { breakdownFromSegments } from '../../src/core/analyses/breakdown/breakdown.ts';

const CAPTURE = path.join(root, 'test/fixtures/h200-e2e-train.capture');
const ALL = [CAPTURE, ...FIXTURES];

/** python3's breakdown (test/unit/snapshot_reference.py) of a pickle, device 0. */
function reference(pickle) {
  const out = execFileSync('python3', [path.join(root, 'test/unit/snapshot_reference.py'), pickle], { encoding: 'utf8', maxBuffer: 64 << 20 });
  return JSON.parse(out).devices['0'];
}

test('the lens capture (expandable segments) at its end: the breakdown equals python on its exported twin, and whole free pages are releasable', () => {
  const model = openModel(CAPTURE);
  const twin = path.join(tmpDir(), 'twin.pickle');
  try {
    model.exportPickle(twin);
    const b = breakdownFromSegments(model.stateAt(0, Infinity).segments);
    const ref = reference(twin);
    assert.deepEqual(b, ref.breakdown);
    assert.equal(b.fixedSegments, 0);
    // The state the old wording got wrong: every free byte sat in segments that hold tensors, so it was all
    // called "split remainders: not releasable", yet whole pages among them are released by empty_cache().
    assert.equal(b.cachedFreeBytes, 0);
    assert.ok(b.releasablePageBytes > 0, `releasable pages ${b.releasablePageBytes}`);
    assert.equal(b.releasablePageBytes + b.subPageRemainderBytes, b.reservedBytes - b.allocatedBytes);
  } finally {
    model.close();
  }
});

for (const file of ALL) {
  test(`${path.basename(file)}: the parts add up to reserved − requested at the end and at 8 moments of the trace`, () => {
    const model = openModel(file);
    try {
      for (const d of model.devices()) {
        const { t0Us, t1Us } = model.timeRange(d);
        for (const at of [Infinity, ...Array.from({ length: 8 }, (_, i) => t0Us + ((i + 0.5) * (t1Us - t0Us)) / 8)]) {
          const st = model.stateAt(d, at);
          const b = breakdownFromSegments(st.segments);
          const parts = b.cachedFreeBytes + b.releasablePageBytes + b.subPageRemainderBytes + b.splitRemainderBytes + b.pendingFreeBytes + b.roundingWasteBytes;
          assert.equal(b.requestedBytes + parts, b.reservedBytes, `device ${d} at ${at}`);
          assert.equal(b.reservedBytes, st.fragmentation.reservedBytes, `reserved, device ${d} at ${at}`);
          assert.equal(b.allocatedBytes, st.fragmentation.allocatedBytes, `allocated, device ${d} at ${at}`);
        }
      }
    } finally {
      model.close();
    }
  });
}

test('parseBytes reads bytes and binary units, and refuses decimal units with the fix', () => {
  assert.equal(parseBytes('85899345920'), 80 * 2 ** 30);
  assert.equal(parseBytes('80GiB'), 80 * 2 ** 30);
  assert.equal(parseBytes('80 GiB'), 80 * 2 ** 30);
  assert.equal(parseBytes('80g'), 80 * 2 ** 30);
  assert.equal(parseBytes('1.5TiB'), 1.5 * 2 ** 40);
  assert.equal(parseBytes('512MiB'), 512 * 2 ** 20);
  assert.equal(parseBytes('4k'), 4096);
  assert.throws(() => parseBytes('80GB'), /GB is decimal; write GiB/);
  assert.throws(() => parseBytes('eighty'), /write bytes \(85899345920\) or a binary unit/);
  assert.throws(() => parseBytes('0'), /not a positive size/);
  assert.throws(() => parseBytes('1.5'), /not a whole number of bytes/);
});

test('requestReplay is in the validated message contract', () => {
  assert.deepEqual(parseSnapshotWebviewMessage({ type: 'requestReplay', requestId: 3, device: 0, extra: 'x' }), { type: 'requestReplay', requestId: 3, device: 0 });
  for (const bad of [{ type: 'requestReplay', requestId: 3 }, { type: 'requestReplay', requestId: 1.5, device: 0 }, { type: 'requestReplay', requestId: 1, device: -1 }, { type: 'requestReplay', requestId: 1, device: '0' }]) {
    assert.equal(parseSnapshotWebviewMessage(bad), undefined, JSON.stringify(bad));
  }
});
