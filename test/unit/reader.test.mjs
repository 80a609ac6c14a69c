// The native reader on PyTorch snapshot pickles: safety, state replay, timeline, lines, spans, OOMs and
// the export round trip. Expected values come from test/unit/reference/*.py run on the same files.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { FIXTURES, openModel, python, pythonInline, tmpDir, withModel } from './reader-support.mjs';

const [EXPANDABLE, OOM, PENDING, RESNET] = FIXTURES;


/** n times spread over the device's trace, including both ends and the middle of event gaps. */
function timesOver(m, n) {
  const { t0Us, t1Us } = m.timeRange(0);
  return Array.from({ length: n }, (_, k) => Math.round(t0Us + ((t1Us - t0Us) * k) / (n - 1)));
}

test('pickles that contain code are refused, naming the opcode, its operands and byte offset', () => {
  const dir = tmpDir();
  for (const proto of [2, 4]) {
    const file = path.join(dir, `evil${proto}.pickle`);
    // os.system by reference: GLOBAL 'posix system' (protocol 2) or STACK_GLOBAL (protocol 4).
    const where = JSON.parse(
      pythonInline(
        `import os, pickle, pickletools, sys, json
class Evil:
    def __reduce__(self):
        return (os.system, ('echo pwned',))
data = pickle.dumps({'segments': [Evil()]}, protocol=${proto})
open(sys.argv[1], 'wb').write(data)
op = next((o, a, p) for o, a, p in pickletools.genops(data) if o.name in ('GLOBAL', 'STACK_GLOBAL'))
print(json.dumps({'name': op[0].name, 'pos': op[2], 'module': os.system.__module__}))`,
        file,
      ),
    );
    assert.throws(
      () => openModel(file),
      (e) =>
        e.message.includes(`this pickle contains code (opcode ${where.name} '${where.module} system' at byte ${where.pos})`) &&
        e.message.includes('snapshot pickles contain only plain data — not loading it'),
    );
  }
});

test('a truncated pickle is an error that gives the offset where the data ends', () => {
  const dir = tmpDir();
  const full = fs.readFileSync(OOM);
  const cut = path.join(dir, 'cut.pickle');
  fs.writeFileSync(cut, full.subarray(0, Math.floor(full.length / 2)));
  assert.throws(() => openModel(cut), new RegExp(`truncated at byte ${Math.floor(full.length / 2)}`));
});

test('files that are neither captures nor pickles, and pickles that are not snapshots, get actionable errors', () => {
  const dir = tmpDir();
  const text = path.join(dir, 'notes.txt');
  fs.writeFileSync(text, 'hello');
  assert.throws(() => openModel(text), /neither a GPU Memory Lens capture \(\.gpumem\) nor a PyTorch snapshot pickle \(it starts with bytes 68 65 6c 6c\)/);
  const str = path.join(dir, 'str.pickle');
  pythonInline(`import pickle, sys; pickle.dump('hello', open(sys.argv[1], 'wb'), protocol=4)`, str);
  assert.throws(() => openModel(str), /holds a string, not a PyTorch memory snapshot; create one with torch\.cuda\.memory\._dump_snapshot/);
  const empty = path.join(dir, 'empty.pickle');
  fs.writeFileSync(empty, '');
  assert.throws(() => openModel(empty), /is empty/);
});

test('integers beyond 2^63 (LONG1 with 9 bytes) stay exact through the model and the exported pickle', () => {
  const dir = tmpDir();
  const src = path.join(dir, 'big.pickle');
  const out = path.join(dir, 'big-out.pickle');
  pythonInline(
    `import pickle, sys
base = 2**64 - 2**30
blk = lambda a, s, st: {'address': a, 'size': s, 'requested_size': s, 'state': st, 'frames': []}
seg = {'device': 0, 'address': base, 'total_size': 2**29, 'allocated_size': 2**20, 'active_size': 2**20, 'requested_size': 2**20,
       'stream': 2**63 + 5, 'segment_type': 'large', 'segment_pool_id': (0, 0), 'is_expandable': False, 'frames': [],
       'blocks': [blk(base, 2**20, 'active_allocated'), blk(base + 2**20, 2**29 - 2**20, 'inactive')]}
ev = {'action': 'alloc', 'addr': base, 'size': 2**20, 'stream': 2**63 + 5, 'time_us': 10, 'compile_context': 'N/A', 'user_metadata': '', 'frames': []}
pickle.dump({'segments': [seg], 'device_traces': [[ev]], 'allocator_settings': {}, 'external_annotations': []}, open(sys.argv[1], 'wb'), protocol=4)`,
    src,
  );
  withModel(src, (m) => m.exportPickle(out));
  assert.deepEqual(python('replay_reference.py', 'compare', src, out), { equal: true, first_difference: null });
});

for (const file of FIXTURES) {
  test(`export of ${path.basename(file)} round-trips to an equal pickle`, () => {
    const out = path.join(tmpDir(), 'out.pickle');
    withModel(file, (m) => m.exportPickle(out));
    assert.deepEqual(python('replay_reference.py', 'compare', file, out), { equal: true, first_difference: null });
  });
}

test('exporting a moment keeps the trace up to it and the replayed state at it', () => {
  const out = path.join(tmpDir(), 'mid.pickle');
  const m = openModel(RESNET);
  const [, , mid] = timesOver(m, 5);
  m.exportPickle(out, mid);
  const state = m.stateAt(0, mid);
  m.close();
  const exported = python('snapshot_summary.py', out).devices[0];
  const [expected] = python('replay_reference.py', 'series', RESNET, mid);
  assert.equal(exported.allocated_bytes, expected.allocated);
  assert.equal(exported.reserved_bytes, expected.reserved);
  assert.equal(exported.segments, state.segments.length);
  const events = Number(pythonInline(`import pickle,sys; print(sum(1 for e in pickle.load(open(sys.argv[1],'rb'))['device_traces'][0] if e['time_us'] <= ${mid}))`, RESNET));
  assert.equal(exported.events, events);
});

for (const file of [RESNET, EXPANDABLE, PENDING, OOM]) {
  test(`state at any time of ${path.basename(file)} agrees with the allocated/reserved replay and is well formed`, () => {
    withModel(file, (m) => {
      const times = timesOver(m, 17);
      const expected = python('replay_reference.py', 'series', file, ...times);
      times.forEach((t, k) => {
        const s = m.stateAt(0, t);
        assert.equal(s.fragmentation.allocatedBytes, expected[k].allocated, `allocated at ${t}`);
        assert.equal(s.fragmentation.reservedBytes, expected[k].reserved, `reserved at ${t}`);
        for (const seg of s.segments) {
          let cursor = seg.address;
          for (const b of seg.blocks) {
            assert.equal(b.address, cursor, 'blocks tile their segment without gaps or overlaps');
            cursor += b.size;
          }
          assert.equal(cursor, seg.address + seg.totalSize);
        }
      });
    });
  });
}

test('state at the end is the snapshot itself (segments and blocks as PyTorch wrote them)', () => {
  withModel(PENDING, (m) => {
    const s = m.stateAt(0, Infinity);
    const expected = JSON.parse(
      pythonInline(
        `import pickle, sys, json
d = pickle.load(open(sys.argv[1], 'rb'))
print(json.dumps([[s['address'], s['total_size'], [[b['address'], b['size'], b['requested_size'], b['state']] for b in s['blocks']]] for s in d['segments']]))`,
        PENDING,
      ),
    );
    assert.deepEqual(
      s.segments.map((g) => [g.address, g.totalSize, g.blocks.map((b) => [b.address, b.size, b.requestedSize, b.state])]),
      expected,
    );
    assert.ok(s.fragmentation.pendingFreeBytes > 0, 'the record_stream fixture has pending-free blocks');
  });
});

test('timeline buckets hold the min and max of allocated and reserved, the value carried in included', () => {
  withModel(RESNET, (m) => {
    const { t0Us, t1Us } = m.timeRange(0);
    for (const [a, b, n] of [
      [t0Us, t1Us, 40],
      [t0Us + 100000, t0Us + 130000, 25],
    ]) {
      const tl = m.timeline(0, a, b, n);
      const expected = python('replay_reference.py', 'buckets', RESNET, a, b, n);
      assert.deepEqual(
        { allocatedMin: tl.allocatedMin, allocatedMax: tl.allocatedMax, reservedMin: tl.reservedMin, reservedMax: tl.reservedMax },
        expected,
      );
    }
    assert.equal(m.timeline(0, t0Us, t1Us, 1).allocatedMax[0], m.summary().devices[0].peak_allocated_bytes);
  });
});

test('line statistics: self bytes at the peak are the summary top lines; inclusive covers every user frame', () => {
  withModel(RESNET, (m) => {
    const stats = m.lineStats(0);
    const top = m.summary().top_lines;
    const self = stats.filter((s) => s.selfBytesAtPeak > 0).map((s) => ({ file: s.file, line: s.line, bytes_at_peak: s.selfBytesAtPeak }));
    assert.deepEqual(self, top);
    const counts = JSON.parse(
      pythonInline(
        `import pickle, sys, json
from snapshot_summary import innermost_user
d = pickle.load(open(sys.argv[1], 'rb'))
c = {}
for e in d['device_traces'][0]:
    if e['action'] == 'alloc':
        k = '%s:%d' % innermost_user(e['frames'])
        n, b = c.get(k, (0, 0)); c[k] = (n + 1, b + e['size'])
print(json.dumps(c))`,
        RESNET,
      ),
    );
    for (const s of stats.filter((x) => x.allocCount > 0)) {
      const key = s.line ? `${s.file}:${s.line}` : `${s.file}:0`;
      assert.deepEqual([s.allocCount, s.totalAllocatedBytes], counts[key], key);
      assert.ok(s.inclusiveBytesAtPeak >= s.selfBytesAtPeak);
    }
    // train_bench.py:52 (<module>) is in every user stack: its inclusive bytes are all user-attributed bytes.
    const module = stats.find((s) => s.line === 52);
    const attributed = top.filter((t) => t.file !== '<no user frame>').reduce((a, t) => a + t.bytes_at_peak, 0);
    assert.equal(module.inclusiveBytesAtPeak, attributed);
    const st = m.stack(stats[0].topStacks[0].stackId);
    assert.equal(st.frames.find((f) => !/site-packages/.test(f.file)).line, stats[0].line);
  });
});

test('spans: every allocation lifetime, largest first, limited to maxCount', () => {
  withModel(RESNET, (m) => {
    const { t0Us, t1Us } = m.timeRange(0);
    const all = m.spans(0, t0Us, t1Us, 1e9);
    assert.equal(all.length, python('replay_reference.py', 'spans', RESNET).spans);
    const top = m.spans(0, t0Us, t1Us, 100);
    assert.equal(top.length, 100);
    const sizes = all.map((s) => s.size).sort((a, b) => b - a);
    assert.deepEqual(top.map((s) => s.size), sizes.slice(0, 100));
    assert.ok(all.every((s) => s.startUs <= s.endUs));
  });
});

test('diff of two moments: bytes live by line', () => {
  withModel(RESNET, (m) => {
    const [, a, , b] = timesOver(m, 5);
    const before = python('replay_reference.py', 'live_lines', RESNET, a);
    const after = python('replay_reference.py', 'live_lines', RESNET, b);
    const rows = m.diff(0, a, b);
    const keys = new Set([...Object.keys(before), ...Object.keys(after)]);
    assert.equal(rows.length, keys.size);
    for (const r of rows) {
      const k = `${r.file}:${r.line}`;
      assert.equal(r.beforeBytes, before[k] ?? 0, k);
      assert.equal(r.afterBytes, after[k] ?? 0, k);
      assert.equal(r.deltaBytes, r.afterBytes - r.beforeBytes);
    }
    // Two models: the same file opened twice diffs to zero at the same moment.
    const other = openModel(RESNET);
    assert.ok(m.diff(0, b, b, other).every((r) => r.deltaBytes === 0));
    other.close();
  });
});

test('OOM entries: requested bytes, device free bytes and the verdict from the figures before the failure', () => {
  withModel(OOM, (m) => {
    const expected = python('replay_reference.py', 'ooms', OOM);
    const got = m.ooms().map(({ requestedBytes, deviceFreeBytes, allocatedBytes, reservedBytes, verdict, timeUs }) => ({
      requestedBytes,
      deviceFreeBytes,
      allocatedBytes,
      reservedBytes,
      verdict,
      timeUs,
    }));
    assert.deepEqual(got, expected);
    assert.equal(m.markers(0).filter((k) => k.kind === 'oom').length, expected.length);
  });
});

test('markers: external_annotations become ranges, snapshot actions become snapshot markers', () => {
  withModel(RESNET, (m) => {
    const counts = JSON.parse(
      pythonInline(
        `import pickle, sys, json
d = pickle.load(open(sys.argv[1], 'rb'))
a = d['external_annotations']
print(json.dumps({'range_begin': sum(x['stage'] == 'START' for x in a), 'range_end': sum(x['stage'] == 'END' for x in a),
                  'snapshot': sum(e['action'] == 'snapshot' for e in d['device_traces'][0])}))`,
        RESNET,
      ),
    );
    const markers = m.markers(0);
    for (const kind of Object.keys(counts)) assert.equal(markers.filter((k) => k.kind === kind).length, counts[kind], kind);
    assert.ok(markers.every((k, i) => i === 0 || markers[i - 1].timeUs <= k.timeUs), 'sorted by time');
  });
});

test('a long pickle (> 2^18 events) answers states forward from its undone start and cached checkpoints', () => {
  const dir = tmpDir();
  const big = path.join(dir, 'resnet-x6.pickle');
  // Six copies of the trace, shifted in time (the trace is a whole number of training steps, so each copy
  // ends where it began). Addresses stay: shifting them, as ../shared/tools/scale_snapshot.py does for
  // speed tests, puts blocks outside every segment, which no allocator state can hold.
  pythonInline(
    `import pickle, sys
d = pickle.load(open(sys.argv[1], 'rb'))
t = d['device_traces'][0]
body = [e for e in t if e['action'] != 'snapshot']; tail = [e for e in t if e['action'] == 'snapshot']
start = min(e['time_us'] for e in t); span = max(e['time_us'] for e in t) - start + 1000; n = 6
out = []
for k in range(n):
    for e in body:
        ne = dict(e); ne['time_us'] += k * span
        out.append(ne)
out += [dict(e, time_us=e['time_us'] + (n - 1) * span) for e in tail]
d['device_traces'][0] = out
pickle.dump(d, open(sys.argv[2], 'wb'), protocol=4)`,
    RESNET,
    big,
  );
  withModel(big, (m) => {
    const times = timesOver(m, 13);
    const expected = python('replay_reference.py', 'series', big, ...times);
    // Early moments first (undo once, then forward with checkpoints), then again in reverse (cached).
    for (const order of [times.map((_, k) => k), times.map((_, k) => times.length - 1 - k)]) {
      for (const k of order) {
        const f = m.stateAt(0, times[k]).fragmentation;
        assert.deepEqual([f.allocatedBytes, f.reservedBytes], [expected[k].allocated, expected[k].reserved], `at ${times[k]}`);
      }
    }
    assert.deepEqual(m.summary(), python('snapshot_summary.py', big));
  });
});
