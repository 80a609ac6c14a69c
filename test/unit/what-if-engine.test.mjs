// What-if answers against the allocator's own: the native what-if engine (native/allocator's policies on
// the simulated device, through the reader) on real fixtures. The verdict and summary say exactly what it
// answers; the static breakdown agrees with it about empty_cache(); replay is deterministic and its OOM check
// follows the capacity.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { test } from 'node:test';
import { ALLOCATOR_LIB, captureStdout, escape, FIXTURES, root, tmpDir, withModel } from './reader-support.mjs';
import { formatBytes } from '../../src/core/base/units/bytes.ts';
import { POLICIES } from '../../src/core/base/model/whatIf.ts';
import { run as replayCommand } from '../../src/cli/commands/replay.ts';
import { summarizeFile } from '../../src/core/analyses/summary/index.ts';
import { breakdownFromSegments, releasableBytes } from '../../src/core/analyses/breakdown/breakdown.ts';
import { probeRequestSize, verdictSentence } from '../../src/core/analyses/verdicts/verdict.ts';

const CAPTURE = path.join(root, 'test/fixtures/h200-e2e-train.capture');
const RESNET = FIXTURES.find((f) => f.includes('resnet50'));
const EXPANDABLE = FIXTURES.find((f) => f.includes('mlp-expandable'));



/** trim_state.py: a state made by the lens allocator itself, and what the real allocator then does. */
function trimState(...flags) {
  const dir = tmpDir();
  const cap = path.join(dir, 'trim.gpumem');
  const r = spawnSync('python3', [path.join(root, 'test/unit/reference/trim_state.py'), ALLOCATOR_LIB, cap, ...flags.map(String)], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  return { cap, real: JSON.parse(r.stdout) };
}

test('expandable + trim, where the old wording said a request "would fail from fragmentation": the engine answers what the real allocator then does', () => {
  const { cap } = trimState();
  withModel(cap, (m) => {
    const b = breakdownFromSegments(m.stateAt(0, Infinity).segments);
    const request = probeRequestSize(b);
    assert.ok(request > b.largestFreeBlockBytes, 'free bytes split: the old verdict named this request as failing');
    // The old model: no segment is free of tensors, so nothing was releasable and every free byte a split remainder.
    assert.equal(b.cachedFreeBytes, 0);
    const w = m.whatIf(0, Infinity, { requests: [request] });
    assert.deepEqual([w.policy, w.policySource], ['lens', 'capture-header']);
    assert.equal(w.reservedBytes, b.reservedBytes);
    // Ground truth: the same steps on the real allocator (simulated device), then the request / empty_cache().
    const withTrim = trimState('--then-malloc', request).real;
    const noTrim = trimState('--no-trim', '--then-malloc', request).real;
    const emptied = trimState('--then-empty-cache').real;
    assert.equal(withTrim.reserved_before, b.reservedBytes);
    assert.equal(w.requests[0].outcome, withTrim.reserved_after === withTrim.reserved_before ? 'from-cache' : 'grows');
    assert.equal(w.requests[0].outcome, 'from-cache', 'trim on growth serves it');
    const nt = m.whatIf(0, Infinity, { policy: 'lens-no-trim', requests: [request] });
    assert.equal(nt.requests[0].outcome, 'grows');
    assert.equal(nt.requests[0].growsByBytes, noTrim.reserved_after - noTrim.reserved_before);
    assert.equal(w.emptyCacheReleasesBytes, emptied.reserved_before - emptied.reserved_after);
    assert.equal(w.emptyCacheReleasesBytes, releasableBytes(b), 'the breakdown names the same releasable bytes');
    const v = verdictSentence(b, w);
    assert.doesNotMatch(v, /would fail/);
    assert.match(v, new RegExp(`a ${escape(formatBytes(request))} request, larger than any free block, would still be served without reserving more: trim on growth remaps free pages`));
    assert.match(v, new RegExp(`empty_cache\\(\\) would release ${escape(formatBytes(emptied.reserved_before - emptied.reserved_after))}\\.`));
    // Without trim the same state's verdict is the growth the real allocator made.
    assert.match(verdictSentence(b, nt), new RegExp(`so the allocator would reserve ${escape(formatBytes(noTrim.reserved_after - noTrim.reserved_before))} more for it`));
  });
});

test('the H200 lens capture at its end: no request "fails"; the free tail grows by one page, and empty_cache() releases whole free pages', () =>
  withModel(CAPTURE, (m) => {
    const b = breakdownFromSegments(m.stateAt(0, Infinity).segments);
    const request = probeRequestSize(b);
    const w = m.whatIf(0, Infinity, { requests: [request] });
    assert.deepEqual([w.policy, w.policySource], ['lens', 'capture-header']);
    const [answer] = w.requests;
    assert.equal(answer.outcome, 'grows');
    assert.ok(answer.growsByBytes < request, 'an existing free block is extended: no new segment of the request\'s size');
    assert.equal(w.emptyCacheReleasesBytes, releasableBytes(b));
    assert.ok(w.emptyCacheReleasesBytes > 0 && b.cachedFreeBytes === 0, 'the old model said nothing was releasable');
    const v = verdictSentence(b, w);
    assert.doesNotMatch(v, /would fail/);
    assert.match(v, new RegExp(`so the allocator would reserve ${escape(formatBytes(answer.growsByBytes))} more for it`));
  }));

test('the same state under PyTorch policies: the engine, not a wording, decides (no trim: the request needs more memory)', () =>
  withModel(CAPTURE, (m) => {
    const b = breakdownFromSegments(m.stateAt(0, Infinity).segments);
    const request = probeRequestSize(b);
    for (const policy of ['pytorch-expandable', 'lens-no-trim']) {
      const w = m.whatIf(0, Infinity, { policy, requests: [request] });
      assert.equal(w.policy, policy);
      assert.equal(w.requests[0].outcome, 'grows', policy);
      assert.ok(w.requests[0].growsByBytes > 0, policy);
      assert.match(verdictSentence(b, w), new RegExp(`so the allocator would reserve ${escape(formatBytes(w.requests[0].growsByBytes))} more for it`), policy);
    }
  }));

for (const [file, policy] of [
  [RESNET, 'pytorch'],
  [EXPANDABLE, 'pytorch-expandable'],
]) {
  test(`${path.basename(file)}: the data's own policy is ${policy}, and empty_cache()'s answer equals the breakdown's releasable parts`, () =>
    withModel(file, (m) => {
      const b = breakdownFromSegments(m.stateAt(0, Infinity).segments);
      const request = probeRequestSize(b);
      const w = m.whatIf(0, Infinity, request === undefined ? undefined : { requests: [request] });
      assert.equal(w.policy, policy);
      assert.notEqual(w.policySource, 'assumed');
      assert.equal(w.reservedBytes, b.reservedBytes);
      assert.equal(w.emptyCacheReleasesBytes, releasableBytes(b));
      assert.ok(w.largestWithoutGrowthBytes >= b.largestFreeBlockBytes);
      const v = verdictSentence(b, w);
      if (request !== undefined) {
        const answer = w.requests.find((r) => r.bytes === request);
        assert.ok(answer, 'the engine answers the asked request');
        if (answer.outcome === 'grows') assert.match(v, /fits in the free bytes but in no free block, so the allocator would reserve/);
      }
      assert.match(v, new RegExp(w.emptyCacheReleasesBytes > 0 ? `empty_cache\\(\\) would release ${escape(formatBytes(w.emptyCacheReleasesBytes))}` : 'empty_cache\\(\\) would release nothing'));
    }));
}

test('summary --json: every device has what_if with the keys test/gpu/what_if_check.py reads, equal to the engine', () => {
  for (const file of [CAPTURE, ...FIXTURES]) {
    const { summary, text } = summarizeFile(file);
    withModel(file, (m) => {
      for (const d of summary.devices) {
        const w = m.whatIf(d.device, Infinity);
        assert.deepEqual(d.what_if, {
          policy: w.policy,
          policy_source: w.policySource,
          reserved_bytes: w.reservedBytes,
          empty_cache_releases_bytes: w.emptyCacheReleasesBytes,
          largest_without_growth_bytes: w.largestWithoutGrowthBytes,
        });
        assert.equal(d.what_if.reserved_bytes, d.reserved_bytes, path.basename(file));
        assert.match(text, new RegExp(`empty_cache\\(\\) would release ${escape(formatBytes(w.emptyCacheReleasesBytes))} of ${escape(formatBytes(w.reservedBytes))} reserved`));
      }
    });
  }
});

test('replay is deterministic, its peaks are the trace\'s, and its OOM check follows the capacity', () =>
  withModel(CAPTURE, (m) => {
    const peakAllocated = m.summary().devices[0].peak_allocated_bytes;
    for (const policy of POLICIES) {
      const a = m.replay(0, policy);
      assert.deepEqual(m.replay(0, policy), a, `${policy} twice`);
      assert.equal(a.policy, policy);
      assert.equal(a.peakAllocatedBytes, peakAllocated, policy);
      assert.ok(a.peakReservedBytes >= a.peakAllocatedBytes, policy);
      assert.ok(Math.abs(a.ratio - a.peakReservedBytes / a.peakAllocatedBytes) < 1e-9, policy);
      assert.equal(a.oom, null, `${policy} fits its own peak`);
      assert.equal(m.replay(0, policy, a.peakReservedBytes).oom, null, `${policy} at capacity = its peak reserved`);
      const short = m.replay(0, policy, a.peakAllocatedBytes - 1);
      assert.ok(short.oom, `${policy} cannot fit below peak allocated`);
      assert.equal(short.capacityBytes, a.peakAllocatedBytes - 1);
      assert.ok(short.oom.requestedBytes > 0 && short.oom.sentence.length > 0);
    }
    // The lens default defends its reserved peak better than PyTorch's fixed segments on this trace.
    assert.ok(m.replay(0, 'lens').peakReservedBytes <= m.replay(0, 'pytorch').peakReservedBytes);
  }));

test('`gpumem replay --json` prints the engine\'s replays; the text names every policy with its peak and OOM', async () => {
  const expected = withModel(CAPTURE, (m) => POLICIES.map((p) => m.replay(0, p, 80 * 2 ** 30)));
  const json = await captureStdout(() => replayCommand([CAPTURE, '--policy', 'all', '--capacity', '80GiB', '--json']));
  assert.equal(json.code, 0, json.err);
  const doc = JSON.parse(json.out);
  assert.equal(doc.capacity_bytes, 80 * 2 ** 30);
  assert.deepEqual(doc.replays.map((r) => [r.policy, r.peak_reserved_bytes, r.peak_allocated_bytes, r.oom]), expected.map((r) => [r.policy, r.peakReservedBytes, r.peakAllocatedBytes, null]));
  assert.deepEqual(doc.replays[0].empty_cache_at_markers.map((x) => x.releases_bytes), expected[0].emptyCacheAtMarkers.map((x) => x.releasesBytes));
  const text = await captureStdout(() => replayCommand([CAPTURE]));
  // The fixture announces its GPU by REC_DEVICE: its total is the capacity.
  assert.match(text.out, /capacity 140 GiB \(the capture's device record\)/);
  for (const r of withModel(CAPTURE, (m) => POLICIES.map((p) => m.replay(0, p)))) assert.match(text.out, new RegExp(escape(formatBytes(r.peakReservedBytes))));
  // Below the peak: the engine's OOM, in the table and in its own words.
  const small = withModel(CAPTURE, (m) => m.replay(0, 'pytorch', 126 * 2 ** 20));
  assert.ok(small.oom);
  const one = await captureStdout(() => replayCommand([CAPTURE, '--policy', 'pytorch', '--capacity', '126MiB']));
  assert.equal(one.code, 0, one.err);
  assert.match(one.out, new RegExp(`PyTorch \\(fixed segments\\)\\s+${escape(formatBytes(small.peakReservedBytes))}\\s+${escape(formatBytes(small.peakAllocatedBytes))}.*yes, at \\d+\\.\\d{3} s`));
  assert.ok(one.out.includes(`out of memory (${small.oom.cause}): ${small.oom.sentence}`), one.out);
});



test('advise: every item carries evidence, a confidence and assumptions; a policy is advised only with the replay\'s lower peak', async () => {
  const { advise } = await import('../../src/core/analyses/advice/index.ts');
  for (const file of [CAPTURE, RESNET]) {
    withModel(file, (m) => {
      const a = advise(m, 0);
      const own = m.whatIf(0, Infinity).policy;
      assert.equal(a.ownPolicy, own);
      const mine = m.replay(0, own);
      for (const item of a.items) {
        assert.ok(item.evidence.length > 0 && item.assumptions.length > 0, item.title);
        assert.ok(['high', 'medium', 'low'].includes(item.confidence));
        if (item.kind === 'allocator-policy') {
          assert.equal(item.predicted.currentPeakReservedBytes, mine.peakReservedBytes);
          assert.ok(item.predicted.peakReservedBytes <= mine.peakReservedBytes - 64 * 2 ** 20, 'only a gain worth acting on');
          const best = Math.min(...POLICIES.map((p) => m.replay(0, p).peakReservedBytes));
          assert.equal(item.predicted.peakReservedBytes, best);
        }
      }
      // No policy advice when nothing beats the policy that ran by the threshold.
      const gain = mine.peakReservedBytes - Math.min(...POLICIES.map((p) => m.replay(0, p).peakReservedBytes));
      assert.equal(a.items.some((i) => i.kind === 'allocator-policy'), gain >= Math.max(64 * 2 ** 20, 0.05 * mine.peakReservedBytes), path.basename(file));
    });
  }
});
