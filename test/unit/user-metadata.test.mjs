// Memory labels (torch.cuda.memory._set_memory_metadata) through the native reader: a capture's REC_USER_METADATA
// (Note [User metadata] in native/format/gpumem_format.h) becomes the same per-event user_metadata a pickle's trace
// entries give, so spans, the userMetadata query, `gpumem summary` and the exported pickle show labels alike for both.
// Captures come from the real writer on the simulated device (reference/labelled_run.py).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { test } from 'node:test';
import { ALLOCATOR_LIB, FIXTURES, needsAllocator, openModel, pythonInline, root, tmpDir } from './reader-support.mjs';

const { summarizeFile } = await import('../../src/core/analyses/summary/index.ts');

const MiB = 2 ** 20;

/** A labelled run (reference/labelled_run.py): its capture and the label each kept block and the peak were made under. */
function labelledRun(...flags) {
  const cap = path.join(tmpDir(), 'labelled.gpumem');
  const r = spawnSync('python3', [path.join(root, 'test/unit/reference/labelled_run.py'), ALLOCATOR_LIB, cap, ...flags.map(String)], {
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stderr);
  const out = JSON.parse(r.stdout);
  return { cap, labels: new Map(Object.entries(out.labels).map(([size, label]) => [Number(size), label])), records: out.records };
}

/** size → label of the allocations of at least 1 MiB (each size is made once). */
function labelsBySize(m) {
  const spans = m.spans(0, -Infinity, Infinity, 1e6).filter((s) => s.size >= MiB);
  return new Map(spans.map((s) => [s.size, s.userMetadata ?? null]));
}

test('a capture labels each allocation with its thread\'s label: spans, userMetadata(), summary', { skip: needsAllocator }, () => {
  const { cap, labels, records } = labelledRun('--churn', 200);
  assert.equal(records, 6, 'one record per change: the repeated "stage=train" wrote none');
  const m = openModel(cap);
  try {
    assert.deepEqual(m.problems(), []);
    assert.deepEqual(labelsBySize(m), labels);
    // The churn's 4 KiB allocations carry the label of their stage too.
    const small = m.spans(0, -Infinity, Infinity, 1e6).filter((s) => s.size === 4096);
    assert.deepEqual([...new Set(small.map((s) => s.userMetadata))].sort(), ['stage=eval', 'stage=train']);
    // At the peak (the 64 MiB block) live: 8 (init), 3 + 5 (train), 2 (no label), 6 (worker), 64 (peak) MiB.
    assert.deepEqual(m.userMetadata(), [
      { device: 0, label: 'stage=peak', allocations: 1, allocatedBytes: 64 * MiB, bytesAtPeak: 64 * MiB },
      { device: 0, label: 'stage=init', allocations: 1, allocatedBytes: 8 * MiB, bytesAtPeak: 8 * MiB },
      { device: 0, label: 'stage=train', allocations: 202, allocatedBytes: 200 * 4096 + 8 * MiB, bytesAtPeak: 8 * MiB },
      { device: 0, label: 'worker', allocations: 1, allocatedBytes: 6 * MiB, bytesAtPeak: 6 * MiB },
      { device: 0, label: 'stage=eval', allocations: 201, allocatedBytes: 200 * 4096 + 7 * MiB, bytesAtPeak: 0 },
    ]);
  } finally {
    m.close();
  }
  const { summary, text } = summarizeFile(cap);
  assert.deepEqual(summary.user_metadata[0], { device: 0, label: 'stage=peak', allocations: 1, allocated_bytes: 64 * MiB, bytes_at_peak: 64 * MiB });
  assert.equal(summary.user_metadata.length, 5);
  assert.match(text, /Memory labels \(_set_memory_metadata\)/);
  assert.match(text, /64\.0 MiB\s+1\s+64\.0 MiB {2}stage=peak/);
});

test('the exported pickle carries each label as its trace entries\' user_metadata, and reads back the same', { skip: needsAllocator }, () => {
  const { cap, labels } = labelledRun('--churn', 20);
  const out = path.join(tmpDir(), 'labelled.pickle');
  const m = openModel(cap);
  let rows;
  try {
    rows = m.userMetadata();
    m.exportPickle(out);
  } finally {
    m.close();
  }
  const entries = JSON.parse(
    pythonInline(
      `import json, pickle, sys
d = pickle.load(open(sys.argv[1], 'rb'))
print(json.dumps([[e['action'], e['size'], e['user_metadata'], e['compile_context']] for e in d['device_traces'][0]
                  if e['action'] in ('alloc', 'free_requested') and e['size'] >= 1 << 20]))`,
      out,
    ),
  );
  const allocs = entries.filter((e) => e[0] === 'alloc');
  assert.deepEqual(new Map(allocs.map((e) => [e[1], e[2] === '' ? null : e[2]])), labels);
  assert.ok(allocs.every((e) => e[3] === 'N/A'), 'compile_context as PyTorch writes it when there is none');
  // The 64 MiB block is freed on the main thread under its own label, as PyTorch stamps a free entry.
  assert.deepEqual(entries.filter((e) => e[0] === 'free_requested').map((e) => e.slice(1, 3)), [[64 * MiB, 'stage=peak']]);
  // The pickle's user_metadata is the same model field: the pickle reads back with the same labels.
  const p = openModel(out);
  try {
    assert.deepEqual(labelsBySize(p), labels);
    assert.deepEqual(p.userMetadata(), rows);
  } finally {
    p.close();
  }
});

test('a budgeted capture keeps the labels of its restated allocations, merged ranges included', { skip: needsAllocator }, () => {
  // 1 MiB budget: the churn is compacted away and its markers (kept verbatim) make the writer merge the ranges
  // (Note [Budget as a cap]); the kept blocks and the peak are restated allocations (Note [Labels of restated blocks]).
  const { cap, labels } = labelledRun('--budget', 1 << 20, '--churn', 30000, '--mark-every', 2);
  const m = openModel(cap);
  try {
    assert.deepEqual(m.problems(), []);
    assert.ok(m.fileInfo().aggregated?.length, 'the capture was compacted');
    assert.deepEqual(labelsBySize(m), labels);
    // Bytes at the peak per label are whole-run figures: the same as the unbudgeted run's.
    assert.deepEqual(
      m.userMetadata().map((r) => [r.label, r.bytesAtPeak]),
      [['stage=peak', 64 * MiB], ['stage=init', 8 * MiB], ['stage=train', 8 * MiB], ['worker', 6 * MiB], ['stage=eval', 0]],
    );
  } finally {
    m.close();
  }
});

test('a pickle\'s user_metadata shows in spans and userMetadata() as a capture\'s labels do', () => {
  const fixture = FIXTURES.find((f) => f.includes('mlp-expandable'));
  const out = path.join(tmpDir(), 'meta.pickle');
  const labelled = JSON.parse(
    pythonInline(
      `import json, pickle, sys
d = pickle.load(open(sys.argv[1], 'rb'))
t = d['device_traces'][0]
big = [e for e in t if e['action'] == 'alloc' and e['size'] >= 1 << 20][:3]
for k, e in enumerate(big):
    e['user_metadata'] = 'stage=%d' % k
pickle.dump(d, open(sys.argv[2], 'wb'), protocol=4)
print(json.dumps([[e['addr'], e['user_metadata']] for e in big]))`,
      fixture,
      out,
    ),
  );
  const m = openModel(out);
  try {
    const spans = m.spans(0, -Infinity, Infinity, 1e6);
    for (const [addr, label] of labelled) {
      const s = spans.find((x) => x.address === addr && x.userMetadata === label);
      assert.ok(s, `the allocation at ${addr} shows ${label}`);
    }
    assert.deepEqual(m.userMetadata().map((r) => r.label).sort(), ['stage=0', 'stage=1', 'stage=2']);
  } finally {
    m.close();
  }
});

test('a label record shorter than its layout is damage at its offset; everything before it stays', { skip: needsAllocator }, () => {
  const { cap } = labelledRun('--churn', 5);
  const cut = path.join(tmpDir(), 'short-label.gpumem');
  // The first REC_USER_METADATA (51) rewritten with an 8-byte payload (its layout is 16).
  pythonInline(
    `import sys
sys.path.insert(0, '${path.join(root, 'native/python')}')
from gpumem import _format as F
data = open(sys.argv[1], 'rb').read()
_, _, _, pos = F.read_header(data)
for off, t, dev, fl, p in F.records(data, pos):
    if t == F.REC_USER_METADATA:
        data = data[:off] + F.record(t, p[:8]) + data[off + 8 + len(p):]
        break
open(sys.argv[2], 'wb').write(data)`,
    cap,
    cut,
  );
  const m = openModel(cut);
  try {
    const [problem] = m.problems();
    assert.match(problem.message, /a user metadata record is shorter than its layout \(8 bytes\)/);
  } finally {
    m.close();
  }
});
