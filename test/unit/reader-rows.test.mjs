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
