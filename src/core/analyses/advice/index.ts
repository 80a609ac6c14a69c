// `gpumem advise`: advice backed by the run's own numbers. Only what the data shows: the allocator
// policy from the what-if replay, an OOM the replay says another policy avoids, where empty_cache() would hand
// idle reserved memory back, which module to checkpoint (./checkpoint.ts), the largest batch that fits from
// two runs (./batch.ts), zero_grad(set_to_none=True) when gradients stay allocated through the forward, and
// the leak findings of the step table. Each item carries its evidence, its predicted effect, how sure it is,
// and what it assumes; `apply` says, machine-readably, what to change (the GPU check applies it).
//
// Note [Advice honesty]: an item is offered only when the data shows a difference worth acting on
// (MIN_GAIN), and its confidence drops when the replay of the policy that ran does not reproduce the
// recorded peak (FIDELITY): then the simulation is not trusted to predict the others either. Advice that
// needs data this file lacks is not offered, and `notOffered` says why. A prediction is given only where
// test/gpu/advice_check.py checks it on a GPU (policy, checkpointing, batch size); the others (set_to_none
// when the peak is in backward, empty_cache, leaks) state their evidence and no predicted peak.
import { formatBytes } from '../../base/units/bytes';
import type { Model } from '../../base/model/types';
import type { Advice, AdviceItem, Predicted } from '../../base/protocol/advice';
import type { AdviseOptions } from './options';
import { trainingAdvice } from './training';
import type { Policy, ReplayResult } from '../../base/model/whatIf';
import { POLICIES, POLICY_LABELS, POLICY_SOURCE_WORDS } from '../../base/model/whatIf';
import { replayPolicies } from '../replay';

/** A policy is advised only when it saves at least this share of the peak and this many bytes. */
const MIN_GAIN_SHARE = 0.05;
const MIN_GAIN_BYTES = 64 * 1024 * 1024;
/** The replay of the policy that ran must land this close to the recorded peak for 'high' confidence. */
const FIDELITY = 0.03;
/** empty_cache() at a marker is worth saying when it releases at least this share of the peak. */
const MARKER_SHARE = 0.1;

const HOW: Record<Policy, string> = {
  pytorch: "run with PyTorch's default allocator (leave PYTORCH_CUDA_ALLOC_CONF without expandable_segments)",
  'pytorch-expandable': 'set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True before the process starts',
  lens: 'run the script with `gpumem run` (the GPU Memory Lens allocator, default expandable segments with trim)',
  'lens-no-trim': 'run with `gpumem run` and GPUMEM_TRIM=0',
};

function applyPolicy(policy: Policy): AdviceItem['apply'] {
  const env: Record<Policy, string | undefined> = {
    pytorch: undefined,
    'pytorch-expandable': 'PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True',
    lens: undefined,
    'lens-no-trim': 'GPUMEM_TRIM=0',
  };
  return env[policy] ? { policy, env: env[policy] } : { policy };
}

const ASSUMPTIONS = [
  'the run makes the same allocations in the same order on the same streams (the replay reuses this trace)',
  "the simulated policy behaves as the real allocator does (checked on a GPU against native runs: peak reserved within 3 %, `bash test/gpu/run_all.sh varlen`)",
];

export function advise(model: Model, device: number, capacityOrOptions?: number | AdviseOptions): Advice {
  const opts: AdviseOptions = typeof capacityOrOptions === 'number' ? { capacityBytes: capacityOrOptions } : (capacityOrOptions ?? {});
  const capacityBytes = opts.capacityBytes;
  const own = model.whatIf(device, Infinity);
  const set = replayPolicies(model, device, POLICIES, capacityBytes);
  const by = new Map<Policy, ReplayResult>(set.results.map((r) => [r.policy, r]));
  const mine = by.get(own.policy) as ReplayResult;
  const recorded = Math.max(model.current(device).peakReservedBytes, mine.peakAllocatedBytes);
  const fidelity = recorded > 0 ? Math.abs(mine.peakReservedBytes - recorded) / recorded : 1;
  const trusted = fidelity <= FIDELITY;
  const fidelityNote = `the replay of the policy that ran (${POLICY_LABELS[own.policy]}) peaks at ${formatBytes(mine.peakReservedBytes)}; the run recorded ${formatBytes(recorded)} (${(fidelity * 100).toFixed(1)} % apart)`;
  const items: AdviceItem[] = [];

  // Note [Advice honesty]: another policy "avoids" an OOM only when the replay of the policy that ran runs out
  // too. A recorded OOM's failed request never happened, so it is not in the trace; when the replay of the
  // run's own policy fits, the replay says nothing about the OOM and no policy is offered against it.
  const ranOom = model.ooms().some((o) => o.device === device);
  const oomNotReplayed = ranOom && !mine.oom;
  if (mine.oom) {
    const fits = set.results.filter((r) => r.policy !== own.policy && !r.oom).sort((a, b) => a.peakReservedBytes - b.peakReservedBytes);
    if (fits.length && set.capacity.bytes !== undefined) {
      const best = fits[0];
      items.push({
        kind: 'avoid-oom',
        title: `Avoid the out-of-memory error: switch to ${POLICY_LABELS[best.policy]}`,
        action: HOW[best.policy],
        evidence: [
          `replayed at ${formatBytes(set.capacity.bytes)} (${set.capacity.source}), ${POLICY_LABELS[best.policy]} peaks at ${formatBytes(best.peakReservedBytes)} and fits`,
          mine.oom ? `${POLICY_LABELS[own.policy]} runs out: ${mine.oom.sentence}` : 'the recorded run ran out of memory',
          fidelityNote,
        ],
        predicted: { peakReservedBytes: best.peakReservedBytes, currentPeakReservedBytes: mine.peakReservedBytes },
        confidence: trusted ? 'high' : 'low',
        assumptions: [...ASSUMPTIONS, 'the device has no more memory taken by other processes than during the recorded run'],
        apply: applyPolicy(best.policy),
      });
    }
  }

  const better = set.results
    .filter((r) => r.policy !== own.policy && !r.oom)
    .filter((r) => mine.peakReservedBytes - r.peakReservedBytes >= Math.max(MIN_GAIN_BYTES, MIN_GAIN_SHARE * mine.peakReservedBytes))
    .sort((a, b) => a.peakReservedBytes - b.peakReservedBytes);
  if (better.length && !items.some((i) => i.kind === 'avoid-oom')) {
    const best = better[0];
    const saved = mine.peakReservedBytes - best.peakReservedBytes;
    items.push({
      kind: 'allocator-policy',
      title: `Switch the allocator policy to ${POLICY_LABELS[best.policy]}: ${formatBytes(saved)} less reserved at the peak`,
      action: HOW[best.policy],
      evidence: [
        ...set.results.map((r) => `${POLICY_LABELS[r.policy]}: peak reserved ${formatBytes(r.peakReservedBytes)} (×${r.ratio.toFixed(3)} of peak allocated ${formatBytes(r.peakAllocatedBytes)})`),
        fidelityNote,
      ],
      predicted: { peakReservedBytes: best.peakReservedBytes, currentPeakReservedBytes: mine.peakReservedBytes },
      confidence: trusted ? 'high' : 'medium',
      assumptions: ASSUMPTIONS,
      apply: applyPolicy(best.policy),
    });
  }

  const marker = [...mine.emptyCacheAtMarkers].sort((a, b) => b.releasesBytes - a.releasesBytes)[0];
  if (marker && marker.releasesBytes >= MARKER_SHARE * mine.peakReservedBytes && marker.releasesBytes >= MIN_GAIN_BYTES) {
    items.push({
      kind: 'empty-cache-at-marker',
      title: `Reserved memory sits idle at "${marker.name}": empty_cache() there would release ${formatBytes(marker.releasesBytes)}`,
      action: `call torch.cuda.empty_cache() right after "${marker.name}" if another process or library (NCCL, cuDNN workspaces, a second model) needs device memory then`,
      evidence: [`replaying ${POLICY_LABELS[own.policy]}, empty_cache() at "${marker.name}" (${((marker.tUs - set.t0Us) / 1e6).toFixed(3)} s) releases ${formatBytes(marker.releasesBytes)}`, fidelityNote],
      predicted: null,
      confidence: trusted ? 'medium' : 'low',
      assumptions: [
        "it does not lower this process's own peak: the allocator reserves the memory again when it is next needed, at the cost of driver calls",
        ...ASSUMPTIONS.slice(0, 1),
      ],
    });
  }

  const notOffered = oomNotReplayed
    ? [`the run ran out of memory, but the replay of ${POLICY_LABELS[own.policy]}${set.capacity.bytes !== undefined ? ` at ${formatBytes(set.capacity.bytes)}` : ''} does not (the failed request is not in the trace), so no policy is said to avoid it`]
    : [];
  if (!better.length) notOffered.push(`no other allocator policy lowers the peak by at least ${(MIN_GAIN_SHARE * 100).toFixed(0)} % and ${formatBytes(MIN_GAIN_BYTES)} on this trace`);
  const training = trainingAdvice(model, device, opts, notOffered);
  return {
    device,
    ownPolicy: own.policy,
    ownPolicySource: own.policySource,
    recordedPeakReservedBytes: recorded,
    recordedPeakAllocatedBytes: model.current(device).peakAllocatedBytes,
    capacityBytes: set.capacity.bytes ?? null,
    items: [...items, ...training.items],
    notOffered,
    ...(training.batchFit ? { batchFit: training.batchFit } : {}),
  };
}

export function adviceText(fileName: string, a: Advice): string {
  const out = [`Advice for ${fileName}, device ${a.device} (it ran under ${POLICY_LABELS[a.ownPolicy]}, per ${POLICY_SOURCE_WORDS[a.ownPolicySource]}):`];
  if (!a.items.length) out.push('', 'Nothing to advise that this data shows.');
  a.items.forEach((item, i) => {
    out.push('', `${i + 1}. ${item.title}  [confidence: ${item.confidence}]`, `   Do: ${item.action}`);
    out.push(...predictedLines(item.predicted).map((l) => `   ${l}`));
    out.push('   Evidence:', ...item.evidence.map((e) => `     - ${e}`), '   Assumes:', ...item.assumptions.map((e) => `     - ${e}`));
  });
  out.push('', 'Not offered:', ...a.notOffered.map((n) => `  - ${n}`));
  return out.join('\n');
}

/** "Predicted peak allocated: X (now Y)" and the same for reserved, for the figures an item predicts. */
export function predictedLines(p: Predicted | null): string[] {
  if (!p) return [];
  const out: string[] = [];
  if (p.peakAllocatedBytes !== undefined) out.push(`Predicted peak allocated: ${formatBytes(p.peakAllocatedBytes)} (now ${formatBytes(p.currentPeakAllocatedBytes ?? 0)})`);
  if (p.peakReservedBytes !== undefined) out.push(`Predicted peak reserved: ${formatBytes(p.peakReservedBytes)} (now ${formatBytes(p.currentPeakReservedBytes ?? 0)})`);
  return out;
}
