// Trace entries decoded into rows while the pickle VM runs (Note [Trace entries as rows] in
// native/addon/src/pickle_reader.h): the rollback may only forget what nothing else can reach. These
// pickles share objects the way a pickle may (memo references) and must read exactly as the Python
// reference reads them.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { test } from 'node:test';
import { FIXTURES, openModel, python, tmpDir } from './reader-support.mjs';

const RESNET = FIXTURES.find((f) => f.includes('resnet50'));

// Each variant edits the loaded snapshot `d` (its first device's trace is `t`) before it is re-dumped.
const VARIANTS = {
  // One frames list object for every entry of a stack, as a deduplicating dumper would write it.
  'shared frames lists': `
seen = {}
for e in t:
    if 'frames' in e:
        k = tuple((f['filename'], f['line'], f['name']) for f in e['frames'])
        e['frames'] = seen.setdefault(k, e['frames'])`,
  // One dict per distinct frame, shared by every list naming it (a fresh frame dict is memoised once and
  // named again by later entries: the rollback must keep what they refer to).
  'shared frame dicts': `
seen = {}
for e in t:
    if 'frames' in e:
        e['frames'] = [seen.setdefault((f['filename'], f['line'], f['name']), f) for f in e['frames']]`,
  // The same entry object twice in the trace, and one entry also reachable from outside the trace.
  'entries named twice': `
t.insert(len(t) // 2, t[len(t) // 3])
d['also'] = t[5]`,
  // An entry whose value is a container built inside it (not a frames list).
  'nested values in entries': `
for e in t[::7]:
    e['user_metadata'] = {'step': 3, 'tags': ['a', 'b']}`,
  // Note [Shared pair tuples]: 2.12+'s pool_id, a fresh (int, int) tuple per entry, as PyTorch writes it.
  'pool_id pairs, one per entry': `
for e in t:
    e['pool_id'] = tuple([0, 0])`,
  // The same pair object everywhere (memo gets after the first), several pools, and a pair also named from outside.
  'pool_id pairs shared and named elsewhere': `
pools = [(0, 0), tuple([1, 0]), tuple([0, 1])]
for k, e in enumerate(t):
    e['pool_id'] = pools[k % 3] if k % 5 else tuple([0, k % 3])
d['also_pool'] = t[4]['pool_id']
d['also_pools'] = [t[7]['pool_id'], pools[1]]`,
  // A frames list also used by a segment's block.
  'frames shared with segments': `
for s in d['segments']:
    for b in s['blocks']:
        if b.get('frames') is not None and t:
            t[0]['frames'] = b['frames']
            break`,
};

for (const [name, edit] of Object.entries(VARIANTS)) {
  for (const proto of [2, 4]) {
    test(`rows: ${name} (protocol ${proto}) summarise like the Python reference`, () => {
      const out = path.join(tmpDir(), 'v.pickle');
      const code = `import pickle, sys
d = pickle.load(open(sys.argv[1], 'rb'))
t = d['device_traces'][0]
${edit}
pickle.dump(d, open(sys.argv[2], 'wb'), protocol=${proto})`;
      const r = spawnSync('python3', ['-c', code, RESNET, out]);
      assert.equal(r.status, 0, String(r.stderr));
      const m = openModel(out);
      try {
        assert.deepEqual(m.summary(), python('snapshot_summary.py', out));
        // Stacks survive the rollback: the top line of the peak has the fixture's own file.
        const top = m.lineStats(0)[0];
        assert.match(top.file, /train_bench\.py$/);
        assert.ok(top.selfBytesAtPeak > 1 << 30, `top line holds ${top.selfBytesAtPeak} bytes at the peak`);
      } finally {
        m.close();
      }
    });
  }
}

// Note [Shared pair tuples]: 2.12+ entries (pool_id after frames) take the flat path, as 2.11's do: every entry a row
// made without building its dict (the reader's own count, GPUMEM_READER_TIMINGS).
test('rows: 2.12+ entries with pool_id are all read by the flat path', () => {
  const out = path.join(tmpDir(), 'pool.pickle');
  const code = `import pickle, sys
d = pickle.load(open(sys.argv[1], 'rb'))
for t in d['device_traces']:
    for e in t:
        e['pool_id'] = tuple([0, 0])
pickle.dump(d, open(sys.argv[2], 'wb'), protocol=4)`;
  const made = spawnSync('python3', ['-c', code, RESNET, out]);
  assert.equal(made.status, 0, String(made.stderr));
  const open = `const { openModel } = await import(${JSON.stringify(path.resolve('src/core/base/model/open.ts'))}); openModel(process.argv[1]).close();`;
  const r = spawnSync(process.execPath, ['--import', './test/tools/ts-loader.mjs', '--input-type=module', '-e', open, out], {
    encoding: 'utf8',
    env: { ...process.env, GPUMEM_READER_TIMINGS: '1' },
  });
  assert.equal(r.status, 0, r.stderr);
  const m = /rows (\d+) taken \((\d+) flat\), (\d+) kept/.exec(r.stderr);
  assert.ok(m, r.stderr);
  assert.equal(Number(m[1]), 55681, 'every trace entry of the fixture is a row');
  assert.equal(Number(m[2]), Number(m[1]), 'all of them by the flat path');
});
