// The OOM notification's sentence (src/core/views/live/oom.ts), from a real OOM: PyTorch 2.11's
// mlp-oom.pickle read by the real reader; expected numbers decoded from the pickle by python3.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { formatBytes } from '../../src/core/base/units/bytes.ts';
import { oomMessage } from '../../src/core/views/live/index.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
process.env.GPUMEM_ADDON ||= path.join(ROOT, 'dist/native/gpumem_addon.node');
const { openModel } = await import('../../src/core/base/model/open.ts');
const fixture = path.join(ROOT, 'test/fixtures/pytorch-snapshots/mlp-oom.pickle');

test('a real OOM names the line, the request and the verdict with its numbers', () => {
  // The pickle's one `oom` trace entry: size = requested bytes, addr = the device's free bytes (README).
  const py = `
import pickle, sys, json
s = pickle.load(open(sys.argv[1], 'rb'))
d, e = [(d, e) for d, t in enumerate(s['device_traces']) for e in t if e['action'] == 'oom'][0]
f = e['frames'][0]
print(json.dumps({'size': e['size'], 'free': e.get('device_free', e.get('addr')), 'device': d, 'file': f['filename'], 'line': f['line']}))`;
  const want = JSON.parse(execFileSync('python3', ['-c', py, fixture], { encoding: 'utf8' }));
  const model = openModel(fixture);
  try {
    const [oom] = model.ooms();
    const frame = model.stack(oom.stackId)?.frames[0];
    const msg = oomMessage(oom, frame);
    assert.ok(msg.startsWith(`CUDA out of memory at ${path.basename(want.file)}:${want.line} on cuda:${want.device}: requested ${formatBytes(want.size)} — `), msg);
    // reserved − allocated is far below the request here: the verdict is a shortage, and says why
    assert.ok(oom.reservedBytes - oom.allocatedBytes < want.size);
    assert.ok(msg.includes(`— shortage: ${formatBytes(want.free)} free on the device`), msg);
  } finally {
    model.close();
  }
});

test('fragmentation: the sentence gives the unallocated bytes and the largest free block', () => {
  const MiB = 1 << 20;
  const oom = {
    device: 1, timeUs: 0, requestedBytes: 400 * MiB, deviceFreeBytes: 10 * MiB, deviceTotalBytes: 80 * 1024 * MiB,
    reservedBytes: 3000 * MiB, allocatedBytes: 850 * MiB, largestFreeBlockBytes: 180 * MiB, verdict: 'fragmentation', stackId: 3,
  };
  assert.equal(
    oomMessage(oom, { file: '/w/train.py', line: 42, name: 'step' }),
    'CUDA out of memory at train.py:42 on cuda:1: requested 400 MiB — fragmentation: 2.10 GiB reserved but unallocated, yet the largest free block is 180 MiB.',
  ); // 3000 − 850 = 2150 MiB = 2.0996 GiB → "2.10 GiB"
  assert.match(oomMessage(oom, undefined), /^CUDA out of memory at a line without Python frames on cuda:1/);
  // Note [Linked backward stacks]: a request made by a forward op's backward names the forward line as its backward
  const backwardOf = { node: 'ConvolutionBackward0', module: 'layer1.0.conv1', recomputed: false, line: { file: '/w/model.py', line: 12, name: 'forward' }, op: null };
  assert.match(oomMessage(oom, { file: '/w/model.py', line: 12, name: 'forward' }, backwardOf), /^CUDA out of memory in the backward of model\.py:12 \(ConvolutionBackward0\) on cuda:1: requested 400 MiB — /);
});

test('the line named is the innermost user frame, not library code', async () => {
  // `user` as the reader marks frames (Note [User frames]; user-frames.test.mjs checks the reader's marks).
  const { userFrame } = await import('../../src/core/base/model/frames.ts');
  const lib = { file: '/venv/lib/python3.11/site-packages/torch/nn/modules/linear.py', line: 125, name: 'forward', user: false };
  const std = { file: '/usr/lib/python3.11/contextlib.py', line: 81, name: 'inner', user: false };
  const user = { file: '/w/model.py', line: 12, name: 'forward', user: true };
  assert.equal(userFrame([lib, std, user, { file: '/w/train.py', line: 3, name: '<module>', user: true }]), user);
  assert.equal(userFrame([lib]), lib, 'only library frames: the innermost one');
  assert.equal(userFrame([]), undefined);
});
