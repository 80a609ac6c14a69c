// The training advice of `gpumem advise`: checkpointing, batch size, zero_grad(set_to_none=True)
// and leaks, from the capture's categories, steps and stacks (the allocator-policy items are in ./index.ts).
import { CATEGORY_LABELS } from '../../base/protocol/categories';
import { formatBytes } from '../../base/units/bytes';
import type { CategoryMoment, Model } from '../../base/model/types';
import { stepReport, type Steps } from '../steps';
import { timeBaseOf, type TimeBase } from '../steps/timebase';
import type { AdviceItem, BatchFit } from '../../base/protocol/advice';
import { batchFromArgv, batchRun, describeFit, fitBatch, MARGIN } from './batch';
import { moduleCalls } from './checkpoint';
import type { AdviseOptions } from './options';

/** A training change is advised when it lowers the peak by this share of it (and at least MIN_BYTES). */
export const MIN_SHARE = 0.05;
const MIN_BYTES = 1024 * 1024;
/** Leak findings shown as items (the largest growth first). */
const MAX_LEAKS = 3;

/** the last path component (no node:path: the webview bundle shares this module's types) */
const baseName = (p: string) => p.slice(Math.max(p.lastIndexOf('/'), p.lastIndexOf('\\')) + 1);
const pct = (part: number, whole: number) => `${whole > 0 ? ((100 * part) / whole).toFixed(1) : '0.0'} %`;
const worth = (saved: number, peak: number) => saved >= MIN_SHARE * peak && saved >= MIN_BYTES;

export function trainingAdvice(model: Model, device: number, opts: AdviseOptions, notOffered: string[]): { items: AdviceItem[]; batchFit?: BatchFit } {
  const items: AdviceItem[] = [];
  const tb = timeBaseOf(model);
  const report = model.categories(device, [], false);
  const peak = report.peak;
  if (!peak) {
    notOffered.push('checkpointing, batch size, set_to_none and leaks: this device has no allocations');
    return { items };
  }
  const at = `at the peak (${tb.label(peak.timeUs)})`;
  if (!report.hasPhases) {
    notOffered.push('checkpointing and batch size: no backward() was seen, so activations are not told apart (run the training under `gpumem run`)');
  } else {
    const c = checkpointItem(model, device, peak, tb.steps, at);
    if (typeof c === 'string') notOffered.push(c);
    else items.push(c);
  }
  const batch = batchItem(model, device, peak, report.hasPhases, opts, at, notOffered);
  if (batch.item) items.push(batch.item);
  if (!report.hasTags) {
    notOffered.push('zero_grad(set_to_none=True): no optimizer step was seen under the lens bootstrap, so gradients are not known');
  } else {
    const g = setToNoneItem(model, device, peak, tb, at);
    if (typeof g === 'string') notOffered.push(g);
    else items.push(g);
  }
  const leaks = stepReport(model, device, tb.steps).leaks;
  if (!tb.steps.steps.length) notOffered.push('leaks: no training steps were found (Note [Steps])');
  for (const l of leaks.slice(0, MAX_LEAKS)) {
    items.push({
      kind: 'leak',
      title: `${baseName(l.file)}:${l.line} keeps ${formatBytes(l.growthPerStepBytes)} more at every step end`,
      action: `look at what ${baseName(l.file)}:${l.line} allocates and who keeps it across steps: store a Python number (loss.item()) or a detached CPU copy instead of the tensor, or clear the list`,
      evidence: [
        `bytes allocated on ${l.file}:${l.line} and live at step end grew at each of ${l.growingSteps} consecutive step ends (steps ${l.fromStep}–${l.toStep}), ${formatBytes(l.bytesAtLastEnd)} at the last`,
      ],
      predicted: null,
      confidence: l.growingSteps >= 5 ? 'high' : 'medium',
      assumptions: ['training holds the same bytes per line at every step end once settled (Note [Leak rule]); a cache that fills up over a few steps and stops is not a leak'],
      apply: { file: l.file, line: l.line },
    });
  }
  if (tb.steps.steps.length && !leaks.length) notOffered.push(`leaks: no line grows at ${3} or more consecutive step ends`);
  return { items, ...(batch.fit ? { batchFit: batch.fit } : {}) };
}

function checkpointItem(model: Model, device: number, peak: CategoryMoment, steps: Steps, at: string): AdviceItem | string {
  const all = moduleCalls(model, device, peak, steps);
  if (!all.length) return 'checkpointing: the stacks of the peak step have no module forward frames (a PyTorch pickle, or stacks off)';
  const repeated = all.filter((m) => m.calls.length >= 2);
  const best = repeated[0];
  const saved = best ? peak.allocatedBytes - best.predictedPeakAllocatedBytes : 0;
  if (!best || !worth(saved, peak.allocatedBytes)) {
    return `checkpointing: no module class called more than once holds enough at the peak to lower it by ${(MIN_SHARE * 100).toFixed(0)} % (Note [Checkpoint prediction])`;
  }
  const top = peak.modules.slice(0, 3).map((m) => `${m.module} ${formatBytes(m.bytes)}`).join(', ');
  return {
    kind: 'checkpoint',
    title: `Checkpoint ${best.module}: predicted peak allocated ${formatBytes(best.predictedPeakAllocatedBytes)}, ${formatBytes(saved)} (${pct(saved, peak.allocatedBytes)}) lower`,
    action: `wrap the forward of every ${best.module} in torch.utils.checkpoint.checkpoint(..., use_reentrant=False) (Hugging Face models: model.gradient_checkpointing_enable())`,
    evidence: [
      `${at}: ${best.calls.length} calls of ${best.module} hold ${formatBytes(best.heldBytes)} of the ${formatBytes(peak.allocatedBytes)} allocated (${pct(best.heldBytes, peak.allocatedBytes)}); activations in all: ${formatBytes(peak.bytes.activation)}`,
      `checkpointed, each call keeps only its output (the next call's input): ${formatBytes(best.keptBytes)} in all`,
      `the largest call holds ${formatBytes(best.transientBytes)}: recomputed during its backward`,
      `predicted peak = ${formatBytes(peak.allocatedBytes)} − ${formatBytes(best.heldBytes)} + ${formatBytes(best.keptBytes)} + ${formatBytes(best.transientBytes)} (Note [Checkpoint prediction])`,
      ...(top ? [`activations by module class (innermost forward): ${top}`] : []),
    ],
    predicted: { peakAllocatedBytes: best.predictedPeakAllocatedBytes, currentPeakAllocatedBytes: peak.allocatedBytes },
    confidence: 'medium',
    assumptions: [
      `the calls of ${best.module} are told apart by their stacks (Note [Forward calls]); ${best.calls.length} were found in the peak's step`,
      'the peak stays in the backward of the checkpointed module; a peak elsewhere (the optimizer step, the loss) is not lowered',
      'each forward recomputes the same tensors (no data-dependent shapes); the step time grows by about one forward',
    ],
    apply: { checkpointModule: best.module },
  };
}

function batchItem(
  model: Model,
  device: number,
  peak: CategoryMoment,
  hasPhases: boolean,
  opts: AdviseOptions,
  at: string,
  notOffered: string[],
): { item?: AdviceItem; fit?: BatchFit } {
  const name = opts.file ?? baseName(model.path);
  if (!opts.other) {
    if (!hasPhases || !worth(peak.bytes.activation, peak.allocatedBytes)) {
      notOffered.push('batch size: activations are not a large share of the peak, so the batch does not decide it');
      return {};
    }
    notOffered.push('batch size: one run cannot tell fixed from per-sample memory (the capture does not record the batch of each step); a second run at another batch size can');
    return {
      item: {
        kind: 'measure-batch',
        title: `Find the largest batch that fits: activations are ${pct(peak.bytes.activation, peak.allocatedBytes)} of the peak; measure a second batch size`,
        action: `run the script again under \`gpumem run\` with another batch size and the same sequence length, then \`gpumem advise ${name} OTHER.gpumem\` (add --batches B1,B2 unless the command lines say --batch N)`,
        evidence: [`${at}: activations ${formatBytes(peak.bytes.activation)} of ${formatBytes(peak.allocatedBytes)} allocated`],
        predicted: null,
        confidence: 'high',
        assumptions: ['activations grow linearly with the batch at a fixed sequence length (Note [Batch prediction])'],
      },
    };
  }
  const b1 = opts.batch ?? batchFromArgv(model.header().argv);
  const b2 = opts.other.batch ?? batchFromArgv(opts.other.model.header().argv);
  if (b1 === undefined || b2 === undefined) {
    notOffered.push(`batch size: the batch of ${b1 === undefined ? name : opts.other.file} is not known: pass --batches B1,B2`);
    return {};
  }
  if (b1 === b2) {
    notOffered.push(`batch size: both runs have batch ${b1}; the line needs two different batch sizes`);
    return {};
  }
  if (!opts.other.model.devices().includes(device)) {
    notOffered.push(`batch size: ${opts.other.file} has no device ${device}; compare runs on the same device`);
    return {};
  }
  const otherPeak = opts.other.model.categories(device, [], false).peak;
  let fit: BatchFit;
  try {
    fit = fitBatch(
      batchRun(model, device, name, b1, peak.notFromAllocatorBytes),
      batchRun(opts.other.model, device, opts.other.file, b2, otherPeak?.notFromAllocatorBytes),
      opts.capacityBytes,
    );
  } catch (e) {
    notOffered.push(`batch size: ${(e as Error).message}`);
    return {};
  }
  if (fit.maxBatch === null) {
    notOffered.push(`batch size: the peak does not grow with the batch between ${b1} and ${b2}, so the line predicts nothing`);
    return { fit };
  }
  const cur = model.current(device);
  return {
    fit,
    item: {
      kind: 'batch-size',
      title: `The largest batch that fits: ${fit.maxBatch} (predicted peak reserved ${formatBytes(fit.predictedPeakReservedBytes as number)} of ${formatBytes(fit.capacityBytes)})`,
      action: `run with batch size ${fit.maxBatch} (same sequence length and model); beyond it the predicted peak reserved exceeds the usable memory`,
      evidence: describeFit(fit),
      predicted: {
        peakAllocatedBytes: fit.predictedPeakAllocatedBytes as number,
        currentPeakAllocatedBytes: cur.peakAllocatedBytes,
        peakReservedBytes: fit.predictedPeakReservedBytes as number,
        currentPeakReservedBytes: cur.peakReservedBytes,
      },
      confidence: fit.maxBatch <= 4 * fit.runs[1].batch ? 'medium' : 'low',
      assumptions: [
        'peak memory is linear in the batch: fixed + batch × per-sample, through the two runs (Note [Batch prediction])',
        `the same script, model, sequence length and allocator settings; a ${(MARGIN * 100).toFixed(0)} % margin is left for fragmentation`,
        'extrapolating far beyond the measured batches is less sure (confidence drops beyond 4× the larger one)',
      ],
      apply: { batch: fit.maxBatch },
    },
  };
}

/**
 * Gradients still allocated when the forward of a later step starts: zero_grad(set_to_none=False), or no
 * zero_grad at all (accumulation on purpose is the user's call; the advice says so).
 */
function setToNoneItem(model: Model, device: number, peak: CategoryMoment, tb: TimeBase, at: string): AdviceItem | string {
  const steps = tb.steps.steps;
  const peakStep = steps.find((s) => s.startUs <= peak.timeUs && peak.timeUs <= s.endUs);
  const step = peakStep && peakStep.index >= 2 ? peakStep : steps.filter((s) => s.index >= 2).pop();
  if (!step) return 'zero_grad(set_to_none=True): fewer than two steps, so no forward runs after a step';
  const first = firstForwardAllocation(model, device, step.startUs, step.endUs);
  if (first === undefined) return 'zero_grad(set_to_none=True): the stacks show no forward in the steps (stacks off, or a pickle)';
  const during = model.categories(device, [first], false).moments[0];
  const grads = during?.bytes.gradient ?? 0;
  if (!worth(grads, peak.allocatedBytes)) return `zero_grad(set_to_none=True): gradients hold ${formatBytes(grads)} when step ${step.index}'s forward begins, too little to matter`;
  const inForward = peakInForward(model, device, peak.timeUs);
  const after = peak.allocatedBytes - peak.bytes.gradient;
  return {
    kind: 'set-to-none',
    title: inForward
      ? `Free gradients between steps (zero_grad(set_to_none=True)): predicted peak allocated ${formatBytes(after)}, ${formatBytes(peak.bytes.gradient)} lower`
      : `Free gradients between steps (zero_grad(set_to_none=True)): ${formatBytes(grads)} less during the forward`,
    action: 'call optimizer.zero_grad(set_to_none=True) (the default since PyTorch 2.0) or model.zero_grad(set_to_none=True) before the forward, unless gradients are accumulated over steps on purpose',
    evidence: [
      `when step ${step.index}'s forward begins (${tb.label(first)}), gradients hold ${formatBytes(grads)}`,
      `${at}: gradients ${formatBytes(peak.bytes.gradient)} of ${formatBytes(peak.allocatedBytes)}, ${CATEGORY_LABELS.activation} ${formatBytes(peak.bytes.activation)}`,
      inForward ? 'the peak is in the forward, where set_to_none leaves no gradients' : 'the peak is in the backward, where gradients are allocated again as activations are freed: the peak may not drop, so no peak is predicted',
    ],
    predicted: inForward ? { peakAllocatedBytes: after, currentPeakAllocatedBytes: peak.allocatedBytes } : null,
    confidence: inForward ? 'medium' : 'low',
    assumptions: ['the gradients are not accumulated over steps on purpose'],
    apply: { setToNone: true },
  };
}

function firstForwardAllocation(model: Model, device: number, t0: number, t1: number): number | undefined {
  let first: number | undefined;
  for (const s of model.spans(device, t0, t1, Number.MAX_SAFE_INTEGER)) {
    if (s.startUs < t0 || s.startUs > t1 || (first !== undefined && s.startUs >= first)) continue;
    const st = model.stack(s.stackId);
    if (st && !st.backward && st.frames.some((f) => f.name.endsWith('.forward'))) first = s.startUs;
  }
  return first;
}

function peakInForward(model: Model, device: number, tPeak: number): boolean {
  const made = model.spans(device, tPeak, tPeak, Number.MAX_SAFE_INTEGER).filter((s) => s.startUs === tPeak);
  if (!made.length) return false;
  return made.every((s) => {
    const st = model.stack(s.stackId);
    return !!st && !st.backward && st.frames.some((f) => f.name.endsWith('.forward'));
  });
}
