// Every snapshot PyTorch 2.6–2.14 writes. The fixtures (test/fixtures/pytorch-snapshots/make_variants.py)
// are the real 2.11 pickles with what later versions add, in PyTorch's schema. Every expected value is computed by
// python3 from the same file (reference/snapshot_summary.py: the summary figures; reference/snapshot_extras.py: the
// `snapshot` section), never written down by hand.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { captureStdout, fixturesDir, openModel, python, pythonInline, tmpDir } from './reader-support.mjs';
import { formatBytes } from '../../src/core/base/units/bytes.ts';
import { run as summaryCommand } from '../../src/cli/commands/summary.ts';
import { summarizeFile } from '../../src/core/analyses/summary/index.ts';
import { poolLabel } from '../../src/core/analyses/pools/index.ts';
import { openOverviewAsync } from '../../src/core/base/model/open.ts';

const fixture = (name) => path.join(fixturesDir, `${name}.pickle`);
const NEW = ['mlp-expandable-proto5', 'mlp-expandable-proto2', 'mlp-user-metadata', 'mlp-annotations', 'mlp-pools', 'mlp-host-segments'];
const byKey = (rows) => [...rows].sort((a, b) => `${a.where}.${a.key}`.localeCompare(`${b.where}.${b.key}`));

/** The pickle's protocol and opcode names, read by Python's pickletools. */
function opcodes(file) {
  return JSON.parse(
    pythonInline(
      "import pickletools,sys,json; ops=list(pickletools.genops(open(sys.argv[1],'rb').read())); print(json.dumps({'protocol': ops[0][1], 'ops': sorted({o.name for o,_,_ in ops})}))",
      file,
    ),
  );
}

test('the protocol-5 pickle gives the same summary as the same snapshot written with protocol 2, and both are the reference', async () => {
  const p5 = fixture('mlp-expandable-proto5');
  const p2 = fixture('mlp-expandable-proto2');
  const o5 = opcodes(p5);
  const o2 = opcodes(p2);
  assert.equal(o5.protocol, 5);
  assert.equal(o2.protocol, 2);
  for (const op of ['FRAME', 'MEMOIZE', 'SHORT_BINUNICODE']) {
    assert.ok(o5.ops.includes(op), `protocol 5 uses ${op}`);
    assert.ok(!o2.ops.includes(op), `protocol 2 has no ${op}`);
  }
  assert.ok(o2.ops.includes('BINPUT'), 'protocol 2 memoises with BINPUT');
  // Python reads the two as one value.
  assert.equal(pythonInline("import pickle,sys; print(pickle.load(open(sys.argv[1],'rb')) == pickle.load(open(sys.argv[2],'rb')))", p5, p2).trim(), 'True');

  const s5 = summarizeFile(p5);
  const s2 = summarizeFile(p2);
  assert.deepEqual(s5.summary, s2.summary);
  assert.equal(s5.text.replace('proto5', 'protoN'), s2.text.replace('proto2', 'protoN'));
  assert.deepEqual([s5.problems, s2.problems], [[], []]);
  // …and neither is a shared wrong answer: the summary figures equal Python's, and so does the snapshot section.
  const expected = python('snapshot_summary.py', p5);
  const { devices, top_lines, format } = s5.summary;
  assert.equal(format, expected.format);
  assert.deepEqual(top_lines, expected.top_lines);
  for (const [k, d] of expected.devices.entries()) for (const [key, v] of Object.entries(d)) assert.equal(devices[k][key], v, key);
  const extras = python('snapshot_extras.py', p5);
  assert.deepEqual({ ...s5.summary.snapshot, unknown_keys: byKey(s5.summary.snapshot.unknown_keys) }, { ...extras, unknown_keys: byKey(extras.unknown_keys) });
  // The CLI prints the same documents.
  const j5 = await captureStdout(() => summaryCommand([p5, '--json']));
  const j2 = await captureStdout(() => summaryCommand([p2, '--json']));
  assert.equal(j5.code, 0);
  assert.deepEqual(JSON.parse(j5.out), JSON.parse(j2.out));
});

for (const name of NEW) {
  test(`gpumem summary of ${name}: the summary figures and the snapshot section equal Python's, text and --json`, async () => {
    const file = fixture(name);
    const expected = python('snapshot_summary.py', file);
    const extras = python('snapshot_extras.py', file);
    const json = await captureStdout(() => summaryCommand([file, '--json']));
    assert.equal(json.code, 0);
    assert.equal(json.err, '', 'no problems noted');
    const doc = JSON.parse(json.out);
    assert.deepEqual(doc.top_lines, expected.top_lines);
    for (const [k, d] of expected.devices.entries()) for (const [key, v] of Object.entries(d)) assert.equal(doc.devices[k][key], v, `${name} ${key}`);
    assert.deepEqual({ ...doc.snapshot, unknown_keys: byKey(doc.snapshot.unknown_keys) }, { ...extras, unknown_keys: byKey(extras.unknown_keys) });

    const text = await captureStdout(() => summaryCommand([file]));
    assert.equal(text.code, 0);
    const out = text.out;
    for (const d of extras.devices) {
      for (const p of d.pools) {
        const line = out.split('\n').find((l) => l.includes(poolLabel(p.pool_id)));
        assert.ok(line, `${poolLabel(p.pool_id)} in the text`);
        assert.ok(line.includes(`reserved ${formatBytes(p.reserved_bytes).padStart(10)}`) && line.includes(`active ${formatBytes(p.active_bytes).padStart(10)}`), line);
        assert.ok(line.includes(`fragmentation ${(100 * p.fragmentation).toFixed(0)}%`), line);
      }
      if (d.untraced_blocks) assert.match(out, new RegExp(`${d.untraced_blocks} blocks \\(${formatBytes(d.untraced_bytes).replace('.', '\\.')}\\) allocated with no allocation in the trace`));
      // in the "Memory labels" table: bytes at the peak, allocations, allocated, label
      for (const t of d.user_metadata) assert.ok(out.split('\n').some((l) => l.includes(t.value.slice(0, 40)) && new RegExp(`\\s${t.allocations}\\s+${formatBytes(t.bytes).replace('.', '\\.')}\\s`).test(l)), t.value);
      for (const a of d.annotations) assert.ok(out.includes(`${a.name} ×${a.ranges}`), a.name);
    }
    if (extras.host) {
      assert.ok(out.includes(`pinned (reserved)     ${formatBytes(extras.host.reserved_bytes).padStart(10)}  ${extras.host.segments} segments`));
      assert.ok(out.includes(`allocated             ${formatBytes(extras.host.allocated_bytes).padStart(10)}  ${extras.host.allocated_blocks} blocks of ${extras.host.blocks}`));
      assert.ok(out.includes(`peak allocated        ${formatBytes(extras.host.peak_allocated_bytes).padStart(10)}  over ${extras.host.events} host trace events`));
    } else {
      assert.ok(!out.includes('Pinned host memory'));
    }
    assert.ok(out.includes(`Allocator settings: PYTORCH_CUDA_ALLOC_CONF=${extras.allocator_settings.PYTORCH_CUDA_ALLOC_CONF},`));
    for (const u of extras.unknown_keys) assert.ok(out.includes(`${u.where}.${u.key} (${u.count} time`), `${u.where}.${u.key}`);
  });
}

test("the first view's pass (Note [First view]) reads each new fixture as the model does: host_traces are not a device's", async () => {
  for (const name of NEW) {
    const file = fixture(name);
    const ov = await openOverviewAsync(file, 64);
    const m = openModel(file);
    try {
      assert.equal(ov.devices.length, 1, name);
      const d = ov.devices[0];
      const s = m.summary().devices[0];
      assert.deepEqual([d.events, d.peakAllocatedBytes], [s.events, s.peak_allocated_bytes], name);
      const tl = m.timeline(0, d.t0Us, d.t1Us, 64);
      assert.deepEqual([d.allocatedMax, d.reservedMax], [tl.allocatedMax, tl.reservedMax], name);
    } finally {
      m.close();
    }
  }
});

test('the fixtures hold what they are for: metadata as strings and dicts, annotations, both pool kinds, untraced blocks, host memory, unknown keys', () => {
  const meta = python('snapshot_extras.py', fixture('mlp-user-metadata'));
  const values = meta.devices[0].user_metadata.map((t) => t.value);
  assert.ok(values.some((v) => v.startsWith('step=')) && values.some((v) => v.startsWith('{"step":')), values.join(' | '));
  assert.ok(meta.devices[0].compile_contexts.length > 0);
  assert.deepEqual(meta.unknown_keys.map((u) => u.where).sort(), ['segment', 'snapshot', 'trace entry']);
  assert.ok(opcodes(fixture('mlp-user-metadata')).ops.includes('BYTEARRAY8'), 'a protocol-5-only opcode');
  const ann = python('snapshot_extras.py', fixture('mlp-annotations'));
  assert.ok(ann.devices[0].annotations.some((a) => a.name === '## forward ##' && a.ranges > 1));
  const pools = python('snapshot_extras.py', fixture('mlp-pools'));
  assert.deepEqual(pools.devices[0].pools.map((p) => p.kind).sort(), ['graph', 'mempool']);
  assert.ok(pools.devices[0].pools.some((p) => p.fragmentation > 0), 'a pool with free bytes split up');
  assert.ok(pools.devices[0].untraced_blocks > 0);
  const host = python('snapshot_extras.py', fixture('mlp-host-segments'));
  assert.ok(host.host.cached_bytes > 0 && host.host.allocated_bytes > 0 && host.host.events > 0);
});

test('user_metadata changes are markers on the timeline, and each allocation band carries its metadata and compile context', () => {
  const file = fixture('mlp-user-metadata');
  // Python: the entries where user_metadata changes (as the reader renders it), and every alloc's metadata by (addr, time).
  const facts = JSON.parse(
    pythonInline(
      `import pickle,sys,json
sys.path.insert(0, '.')
from snapshot_extras import meta
d=pickle.load(open(sys.argv[1],'rb')); t=d['device_traces'][0]
cur=''; changes=[]
for e in t:
    v=meta(e.get('user_metadata',''))
    if v!=cur: changes.append([e['time_us'], v]); cur=v
allocs={f"{e['addr']}:{e['time_us']}": [meta(e.get('user_metadata','')), e.get('compile_context','N/A')] for e in t if e['action']=='alloc'}
print(json.dumps({'changes': changes, 'allocs': allocs}))`,
      file,
    ),
  );
  const m = openModel(file);
  try {
    const markers = m.markers(0).filter((k) => k.kind === 'metadata');
    assert.deepEqual(
      markers.map((k) => [k.timeUs, k.detail.userMetadata]),
      facts.changes,
    );
    const { t0Us, t1Us } = m.timeRange(0);
    const spans = m.spans(0, t0Us, t1Us, 100000);
    let tagged = 0;
    for (const s of spans) {
      const want = facts.allocs[`${s.address}:${s.startUs}`];
      if (!want) continue; // a band whose alloc is before the trace
      assert.equal(s.userMetadata ?? '', want[0]);
      assert.equal(s.compileContext ?? 'N/A', want[1]);
      if (s.userMetadata) tagged++;
    }
    assert.ok(tagged > 0);
  } finally {
    m.close();
  }
});

test('blocks of unknown history are marked in the state at every moment, and only those', () => {
  const file = fixture('mlp-pools');
  const extras = python('snapshot_extras.py', file);
  const m = openModel(file);
  try {
    const end = m.stateAt(0, Infinity);
    const marked = end.segments.flatMap((s) => s.blocks).filter((b) => b.untraced);
    assert.equal(marked.length, extras.devices[0].untraced_blocks);
    assert.equal(marked.reduce((n, b) => n + b.size, 0), extras.devices[0].untraced_bytes);
    assert.ok(marked.every((b) => b.state === 'active_allocated'));
    // They were live before the trace began, so they are in the state at its start too, still marked.
    const { t0Us } = m.timeRange(0);
    const start = m.stateAt(0, t0Us - 1);
    const atStart = new Set(start.segments.flatMap((s) => s.blocks).filter((b) => b.untraced).map((b) => b.address));
    for (const b of marked) assert.ok(atStart.has(b.address), `0x${b.address.toString(16)} at the start`);
    // Private pools: the segments say their ids.
    const ids = new Set(end.segments.filter((s) => s.poolId).map((s) => s.poolId.join(',')));
    assert.deepEqual([...ids].sort(), extras.devices[0].pools.map((p) => p.pool_id.join(',')).sort());
  } finally {
    m.close();
  }
});

test('keys this reader does not know, at every level and of any type, are kept raw and never stop the read', () => {
  const dir = tmpDir();
  const out = path.join(dir, 'future.pickle');
  pythonInline(
    `import pickle,sys
d=pickle.load(open(sys.argv[1],'rb'))
d['future_list']=[None, 1.5, {'nested': (1, 'two')}, b'\\x00\\xff']
d[7]='an int key'
d['segments'][0]['blocks'][0]['future_block']={'a': [1, 2]}
d['external_annotations'][0]['future_annotation']=None
t=d['device_traces'][0]
t[3]['future_entry']={'deep': {'deeper': [True, False]}}
t.insert(5, dict(t[5], action='future_action'))
pickle.dump(d, open(sys.argv[2],'wb'), protocol=5)`,
    fixture('mlp-expandable'),
    out,
  );
  const extras = python('snapshot_extras.py', out);
  const m = openModel(out);
  try {
    const got = m.extras().unknownKeys;
    assert.deepEqual(byKey(got), byKey(extras.unknown_keys));
    assert.ok(got.some((u) => u.where === 'snapshot' && u.key === '7'));
    // An unknown action is skipped and said, never a crash; the rest of the trace reads as before.
    assert.ok(m.problems().some((p) => /1 trace entries of device 0 have actions this reader does not know/.test(p.message)));
    const ref = python('snapshot_summary.py', fixture('mlp-expandable'));
    assert.equal(m.summary().devices[0].peak_allocated_bytes, ref.devices[0].peak_allocated_bytes);
  } finally {
    m.close();
  }
  fs.rmSync(dir, { recursive: true, force: true });
});

test("torch.compile's FX frames: the bytes go to the user's traced line, and the stack names the graph's node", () => {
  // The frames PyTorch's own test expects from _snapshot(augment_with_fx_traces=True) on an MLP compiled with aot_eager
  // (test_cuda.py: fx_node_name in addmm / relu / addmm_1, fx_original_trace naming "a = self.net1(x)" …).
  const dir = tmpDir();
  const out = path.join(dir, 'fx.pickle');
  pythonInline(
    `import pickle,sys
gen='fx_generated_3a4b5c6d7e8f9a0.py'
def fx(node, target, line, src, ln):
    return {'filename': gen, 'name': 'forward', 'line': line, 'fx_node_op': 'call_function', 'fx_node_name': node,
            'fx_node_target': target, 'fx_original_trace': f'  File "/home/user/project/model.py", line {ln}, in forward\\n    {src}\\n'}
outer={'filename': '/home/user/project/train.py', 'name': 'main', 'line': 40}
lib={'filename': '/usr/lib/python3.12/site-packages/torch/_dynamo/eval_frame.py', 'name': '_fn', 'line': 600}
frames={'addmm': [fx('addmm','aten.addmm.default',5,'a = self.net1(x)',12), lib, outer],
        'relu': [fx('relu','aten.relu.default',6,'b = self.relu(a)',13), lib, outer],
        'addmm_1': [fx('addmm_1','aten.addmm.default',7,'c = self.net2(b)',14), lib, outer]}
base=0x7f0000000000; t=[]; time=1000
t.append({'action':'segment_alloc','addr':base,'size':20<<20,'stream':0,'time_us':time,'frames':frames['addmm']})
for k,(node,size) in enumerate([('addmm',4<<20),('relu',4<<20),('addmm_1',2<<20)]):
    time+=10
    t.append({'action':'alloc','addr':base+k*(4<<20),'size':size,'stream':0,'time_us':time,'frames':frames[node],'compile_context':'Torch-Compiled Region: 0/0','user_metadata':''})
blocks=[{'address':base+k*(4<<20),'size':s,'requested_size':s,'state':'active_allocated','frames':frames[n]} for k,(n,s) in enumerate([('addmm',4<<20),('relu',4<<20),('addmm_1',2<<20)])]
blocks.append({'address':base+(10<<20),'size':10<<20,'requested_size':0,'state':'inactive','frames':[]})
seg={'device':0,'address':base,'total_size':20<<20,'allocated_size':10<<20,'active_size':10<<20,'requested_size':10<<20,'stream':0,'segment_type':'large','segment_pool_id':(0,0),'is_expandable':False,'frames':frames['addmm'],'blocks':blocks}
pickle.dump({'segments':[seg],'device_traces':[t],'allocator_settings':{},'external_annotations':[]}, open(sys.argv[1],'wb'), protocol=4)`,
    out,
  );
  const m = openModel(out);
  try {
    const lines = m.lineStats(0).filter((l) => l.selfBytesAtPeak > 0);
    assert.deepEqual(
      lines.map((l) => [l.file, l.line, l.selfBytesAtPeak]),
      [
        ['/home/user/project/model.py', 12, 4 << 20],
        ['/home/user/project/model.py', 13, 4 << 20],
        ['/home/user/project/model.py', 14, 2 << 20],
      ],
    );
    const stack = m.stack(lines[2].topStacks[0].stackId);
    const f = stack.frames[0];
    assert.equal(f.fx.node, 'addmm_1');
    assert.equal(f.fx.op, 'call_function');
    assert.equal(f.fx.target, 'aten.addmm.default');
    assert.match(f.fx.originalTrace, /c = self\.net2\(b\)/);
    assert.deepEqual(f.fx.origin, { file: '/home/user/project/model.py', line: 14, name: 'forward', user: true });
    assert.deepEqual(m.extras().unknownKeys, []);
    assert.deepEqual(m.extras().devices[0].compileContexts.map((c) => [c.value, c.allocs, c.bytes]), [['Torch-Compiled Region: 0/0', 3, 10 << 20]]);
  } finally {
    m.close();
  }
  fs.rmSync(dir, { recursive: true, force: true });
});

test('export writes what memory_viz reads: user_metadata as strings (a dict as its JSON), the trace and segments unchanged', () => {
  const dir = tmpDir();
  const out = path.join(dir, 'exported.pickle');
  const m = openModel(fixture('mlp-user-metadata'));
  try {
    m.exportPickle(out);
  } finally {
    m.close();
  }
  const facts = JSON.parse(
    pythonInline(
      `import pickle,sys,json
sys.path.insert(0, '.')
from snapshot_extras import meta
a=pickle.load(open(sys.argv[1],'rb')); b=pickle.load(open(sys.argv[2],'rb'))
ta=a['device_traces'][0]; tb=b['device_traces'][0]
print(json.dumps({'n': [len(ta), len(tb)], 'types': sorted({type(e['user_metadata']).__name__ for e in tb}),
  'same_meta': all(meta(x.get('user_metadata','')) == y['user_metadata'] for x, y in zip(ta, tb)),
  'keys': sorted(b.keys())}))`,
      fixture('mlp-user-metadata'),
      out,
    ),
  );
  assert.deepEqual(facts.n, [facts.n[0], facts.n[0]]);
  assert.deepEqual(facts.types, ['str']);
  assert.equal(facts.same_meta, true);
  assert.deepEqual(facts.keys, ['allocator_settings', 'device_traces', 'external_annotations', 'segments']);
  fs.rmSync(dir, { recursive: true, force: true });
});
