// The leak keeper on the reader's side (Note [Leak keeper]): a capture written by the real allocator (simulated
// device) for a loop that keeps one tensor per step in `history`, with the keeper notice the bootstrap writes,
// made by the bootstrap's own functions (sim_training.py --keeper, Note [Leak keeper search]).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { ALLOCATOR_LIB, captureRecords, needsAllocator, openModel, pythonInline, root, simTraining, tmpDir, withModel } from './reader-support.mjs';

const { stepReport, keepers } = await import('../../src/core/analyses/steps/index.ts');
const { summarizeFile } = await import('../../src/core/analyses/summary/index.ts');
const { timeBaseOf } = await import('../../src/core/analyses/steps/timebase.ts');
const { categoriesView } = await import('../../src/core/views/snapshot/categoriesView.ts');
const { LiveCategoriesCache } = await import('../../src/core/views/live/categoriesTrack.ts');

const skip = needsAllocator;
const KiB = 1024;
const LEAK = 64 * KiB;
const STEPS = 8;

test('the keeper notice: its sentence is the marker, its JSON the keeper, on the device of the kept tensors', { skip }, () => {
  const { cap, info } = simTraining(STEPS, ['--leak', String(LEAK), '--keeper']);
  withModel(cap, (m) => {
    const notices = m.markers(0).filter((x) => x.kind === 'notice');
    assert.equal(notices.length, 1);
    assert.equal(
      notices[0].label,
      `gpumem: history (a list) keeps 4 tensors with autograd graphs alive across steps (256 KiB at step 5); stores them at sim_training.py:${info.lines.keeper}: history.append(kept)`,
    );
    const [k] = keepers(m, 0);
    assert.deepEqual(
      [k.container, k.containerType, k.scope, k.how, path.basename(k.file), k.line, k.tensors, k.bytes, k.complete, k.step],
      ['history', 'list', 'main', 'stores', 'sim_training.py', info.lines.keeper, 4, 4 * LEAK, true, 5],
    );
    assert.equal(k.timeUs, notices[0].timeUs);
    assert.equal(k.addrs.length, 4);
    assert.deepEqual(keepers(m, 1), [], 'no keeper names another device');
  });
});

test('a leak finding carries the keeper tied by the kept blocks\' allocating line, in the summary text and --json', { skip }, () => {
  const { cap, info } = simTraining(STEPS, ['--leak', String(LEAK), '--keeper']);
  assert.notEqual(info.lines.keeper, info.lines.leak, 'the keeping line is not the allocating line');
  withModel(cap, (m) => {
    const r = stepReport(m, 0, timeBaseOf(m).steps);
    assert.equal(r.leaks.length, 1);
    const [leak] = r.leaks;
    assert.equal(leak.line, info.lines.leak, 'the finding stays on the allocating line');
    assert.equal(leak.keeperMatch, 'address');
    assert.equal(leak.keeper.line, info.lines.keeper);
    // each kept address lies in a block allocated on the finding's line (the allocator state, an independent path)
    const blocks = m.stateAt(0, leak.keeper.timeUs).segments.flatMap((s) => s.blocks);
    for (const a of leak.keeper.addrs) {
      const b = blocks.find((x) => a >= x.address && a < x.address + x.size);
      assert.equal(m.stack(b.stackId).frames.find((f) => f.user).line, info.lines.leak);
    }
  });
  const s = summarizeFile(cap);
  const [dev] = s.summary.steps;
  const [j] = dev.leaks;
  assert.deepEqual(
    [j.line, j.keeper.line, j.keeper.container, j.keeper.container_type, j.keeper.tensors, j.keeper.bytes, j.keeper.how, j.keeper.match, j.keeper.step],
    [info.lines.leak, info.lines.keeper, 'history', 'list', 4, 4 * LEAK, 'stores', 'address', 5],
  );
  assert.match(
    s.text,
    new RegExp(
      `Leak: \\S*sim_training\\.py:${info.lines.leak} keeps 64\\.0 KiB more at each step end \\(steps 1–${STEPS}, [^)]*\\); ` +
        `kept alive by history \\(a list: 4 tensors with autograd graphs, 256 KiB at step 5\\), stored at \\S*sim_training\\.py:${info.lines.keeper}: history\\.append\\(kept\\)`,
    ),
  );
});

test('the snapshot panel\'s leak view names the keeper line apart from the sentence, for its link', { skip }, () => {
  const { cap, info } = simTraining(STEPS, ['--leak', String(LEAK), '--keeper']);
  withModel(cap, (m) => {
    const v = categoriesView(m, 0, timeBaseOf(m), 1, undefined, (f) => path.basename(f));
    const [l] = v.leaks;
    assert.deepEqual([l.keeper.displayFile, l.keeper.line, l.keeper.container, l.keeper.tensors, l.keeper.match], ['sim_training.py', info.lines.keeper, 'history', 4, 'address']);
    assert.ok(l.sentence.endsWith(`; ${l.keeper.text}`), l.sentence);
    assert.ok(l.keeper.text.includes(`sim_training.py:${info.lines.keeper}: history.append(kept)`), l.keeper.text);
  });
});

test('a keeper whose addresses match no finding goes to the largest finding as "probably"; none without a keeper', { skip }, () => {
  const { cap, info } = simTraining(STEPS, ['--leak', String(LEAK), '--keeper']);
  const m = openModel(cap);
  try {
    // the same capture read through a model whose keeper lists no address (a pickle-less search, say)
    const noAddrs = Object.create(m);
    noAddrs.markers = (d) =>
      m.markers(d).map((x) => (x.detail?.keeper ? { ...x, detail: { ...x.detail, keeper: JSON.stringify({ ...JSON.parse(x.detail.keeper), addrs: [] }) } } : x));
    const [leak] = stepReport(noAddrs, 0, timeBaseOf(m).steps).leaks;
    assert.deepEqual([leak.line, leak.keeperMatch, leak.keeper.line], [info.lines.leak, 'largest', info.lines.keeper]);
  } finally {
    m.close();
  }
  const plain = simTraining(STEPS, ['--leak', String(LEAK)]);
  withModel(plain.cap, (m2) => {
    const [leak] = stepReport(m2, 0, timeBaseOf(m2).steps).leaks;
    assert.deepEqual([leak.line, leak.keeper, leak.keeperMatch], [plain.info.lines.leak, undefined, undefined]);
  });
});

test('live: a keeper notice that arrives alone, inside the 2 s categories interval, reaches the leak at the trailing edge', { skip }, () => {
  // Note [Live categories], Note [Poll counts records]: the notice is written after the step end that confirms it,
  // and at a run's end nothing may come after it; the live panel must still get it.
  const { cap, info } = simTraining(STEPS, ['--leak', String(LEAK), '--keeper']);
  const full = fs.readFileSync(cap);
  const notice = captureRecords(full).find((r) => r.type === 42); // REC_NOTICE
  const growing = path.join(path.dirname(cap), 'growing.gpumem');
  fs.writeFileSync(growing, full.subarray(0, notice.offset));
  let now = 0;
  const cache = new LiveCategoriesCache(2000, 40, () => now);
  withModel(growing, (m) => {
    let generation = 0;
    const before = cache.get(m, 0, generation);
    assert.equal(before.leaks.length, 1, 'the finding is there before the notice (3 growing step ends)');
    assert.equal(before.leaks[0].keeper, undefined);
    fs.appendFileSync(growing, full.subarray(notice.offset, notice.end));
    const added = m.poll();
    assert.equal(added, 1, 'the notice alone is one record');
    generation += added;
    now = 1000;
    assert.equal(cache.owes(m, generation), false, 'not due inside the interval');
    assert.equal(cache.get(m, 0, generation).leaks[0].keeper, undefined, 'inside the interval the last answer is sent again');
    now = 2500;
    assert.equal(cache.owes(m, generation), true, 'stale and due: the session pushes one more update');
    assert.equal(cache.owes(m, generation), false, 'said once: a hidden panel asks for no view, and no refresh after it is a change');
    const after = cache.get(m, 0, generation);
    assert.deepEqual(after.leaks[0].keeper, { file: after.leaks[0].keeper.file, line: info.lines.keeper, container: 'history' });
    assert.equal(path.basename(after.leaks[0].keeper.file), 'sim_training.py');
    assert.equal(cache.owes(m, generation), false, 'answered: nothing more is owed');
    assert.equal(cache.computed, 2);
  });
});

// The leaky convnet: backward(retain_graph=True) then history.append(loss). The kept losses' graphs hold every step's
// activations (Attention 3 × 6 MiB and MLP 6 MiB a step) past the backward that would have freed them; the
// keeper notice lists every storage held (Note [Keeper graph walk]: 4 losses + 16 activations = 20, more than the
// 16 it used to list), so the keeper is named on every line whose bytes it keeps, and the categories count those
// bytes as activations kept by the container, not "other" (Note [Categories] 4).
test('retained graphs: the keeper is named on every line they keep, and their bytes are kept activations', { skip }, () => {
  const MiB = 1024 * KiB;
  const { cap, info } = simTraining(STEPS, ['--retain', '--keeper']);
  withModel(cap, (m) => {
    const [k] = keepers(m, 0);
    assert.equal(k.addrs.length, 20);
    assert.equal(k.bytes, 4 * (24 * MiB + 512));
    const r = stepReport(m, 0, timeBaseOf(m).steps);
    assert.deepEqual(
      r.leaks.map((l) => [l.line, l.growthPerStepBytes, l.keeper?.line, l.keeperMatch]),
      [
        [info.lines.act, 18 * MiB, info.lines.keeper, 'address'],
        [info.lines.act_mlp, 6 * MiB, info.lines.keeper, 'address'],
        [info.lines.loss, 512, info.lines.keeper, 'address'],
      ],
    );
  });
  const s = summarizeFile(cap);
  const [dev] = s.summary.steps;
  const last = dev.steps[dev.steps.length - 1].categories;
  // at the last step end: 8 steps' activations, kept by history through the losses' graphs; the losses themselves
  // (the notice's "own") stay "other": a kept loss is no activation
  assert.equal(last.activation, STEPS * 24 * MiB);
  assert.equal(last.other, STEPS * 512);
  assert.deepEqual(
    dev.leaks.map((l) => [l.line, l.category, l.kept_bytes]),
    [
      [info.lines.act, 'activation', STEPS * 18 * MiB],
      [info.lines.act_mlp, 'activation', STEPS * 6 * MiB],
      [info.lines.loss, 'other', undefined],
    ],
  );
  const [cats] = s.summary.categories;
  assert.equal(cats.peak.kept_activation_bytes, STEPS * 24 * MiB);
  assert.match(
    s.text,
    new RegExp(
      `Leak: \\S*sim_training\\.py:${info.lines.act} keeps 18\\.0 MiB more at each step end \\(steps 1–${STEPS}, 144 MiB at the last step end, ` +
        `saved activations kept past their backward\\); kept alive by history \\(a list: 4 tensors with autograd graphs, 96\\.0 MiB at step 5\\), ` +
        `stored at \\S*sim_training\\.py:${info.lines.keeper}: history\\.append\\(loss\\)`,
    ),
  );
  assert.match(s.text, /\n {4}kept by a container +192 MiB +79%/);

  // the same loop without a keeper notice: nothing is called kept, the bytes stay "other" as before
  const plain = summarizeFile(simTraining(STEPS, ['--retain']).cap);
  const [pdev] = plain.summary.steps;
  assert.equal(pdev.steps[pdev.steps.length - 1].categories.other, STEPS * (24 * MiB + 512));
  assert.equal(plain.summary.categories[0].peak.kept_activation_bytes, undefined);
});

// The leaky convnet on a real run: test/gpu/workloads/leak_history.py --model convnet --steps 8 under `gpumem run`
// (lens allocator, H100, torch 2.11), paths relocated. backward(retain_graph=True), then history.append(loss): each
// kept loss's graph saves the three ReLU results (392 + 392 + 196 MiB) and the mean of its forward. The keeper's
// notice lists the 28 storages the graph walk found (Note [Node wrappers die] in _keeper_search.py); the moment of the
// notice is rebuilt backwards from the run's last state, through free_completed events that carry no stack.
const CONVNET = path.join(path.dirname(new URL(import.meta.url).pathname), '..', 'fixtures', 'h100-leaky-convnet.capture');
const FORWARD = { conv1: 31, conv2: 32, conv3: 33, mean: 34, loss: 60 };

test('a real retained-graph leak: the keeper is named on every forward line its graphs hold, and those bytes are kept activations', () => {
  withModel(CONVNET, (m) => {
    const [k] = keepers(m, 0);
    assert.deepEqual([k.container, k.line, k.tensors, k.bytes, k.addrs.length], ['history', 61, 4, 4110493696, 28]);
    // the moment of the notice: each held storage lies in a live block that has its alloc's stack (the block's
    // free_completed, undone on the way back from the last state, carries none)
    const blocks = m.stateAt(0, k.timeUs).segments.flatMap((s) => s.blocks);
    const lines = k.addrs.map((a) => {
      const b = blocks.find((x) => a >= x.address && a < x.address + x.size);
      assert.ok(b && b.state === 'active_allocated', `a live block holds ${a}`);
      return m.stack(b.stackId)?.frames.find((f) => f.user)?.line;
    });
    assert.deepEqual([...new Set(lines)].sort((a, b) => a - b), Object.values(FORWARD));
  });
  const { summary } = summarizeFile(CONVNET);
  const leaks = summary.steps[0].leaks;
  assert.deepEqual(leaks.map((l) => l.line).sort((a, b) => a - b), Object.values(FORWARD));
  for (const l of leaks) {
    assert.equal(l.keeper?.match, 'address', `line ${l.line}: the keeper is tied by address`);
    assert.equal(l.keeper.line, 61);
    assert.equal(l.category, 'activation', `line ${l.line}: kept activations, not "other"`);
  }
  // the three ReLU lines: all their bytes at the last step end are activations the kept graphs hold
  for (const line of [FORWARD.conv1, FORWARD.conv2, FORWARD.conv3]) {
    const l = leaks.find((x) => x.line === line);
    assert.equal(l.kept_bytes, l.bytes_at_last_end, `line ${line}`);
  }
  assert.equal(leaks.reduce((s, l) => s + l.growth_per_step_bytes, 0), 2 * 411041792 + 205520896 + 16384 + 2560);
});

test('a notice keeps every byte up to 1 MiB in the capture, so a keeper listing thousands of storages stays whole', { skip }, () => {
  // Note [Long notices]: names are cut at 4096 bytes, a notice at 1 MiB; the real allocator writes, the reader reads
  const cap = path.join(tmpDir(), 'long-notice.gpumem');
  const addrs = Array.from({ length: 20000 }, (_, i) => 0x7f0000000000 + i * 512);
  const text = `gpumem: a long notice\ngpumem-keeper ${JSON.stringify({ v: 1, addrs })}`;
  pythonInline(
    `import sys; sys.path.insert(0, ${JSON.stringify(path.join(root, 'native/python'))})
from gpumem import _native
n = _native.Allocator(sys.argv[1])
n.configure({"capture_path": sys.argv[2], "backend": "sim", "sample_interval_ms": 0})
import ctypes
n.lib.gpumem_malloc.restype, n.lib.gpumem_malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
n.lib.gpumem_malloc(4096, 0, None)  # a device with an event: its markers are read
n.notice(open(sys.argv[3]).read(), 0)
n.shutdown(0)`,
    ALLOCATOR_LIB,
    cap,
    (() => {
      const f = path.join(tmpDir(), 'notice.txt');
      fs.writeFileSync(f, text);
      return f;
    })(),
  );
  assert.ok(Buffer.byteLength(text) > 300_000);
  withModel(cap, (m) => {
    const [k] = keepers(m, 0);
    assert.deepEqual(k.addrs, addrs);
  });
});
