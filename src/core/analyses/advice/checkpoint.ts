// Gradient checkpointing advice: which module class to checkpoint and the peak that would leave.
//
// Note [Forward calls]: the capture has the Python stack of every forward allocation, innermost first, with
// co_qualnames (`GPT2Block.forward`). A module class C *holds* an allocation when a `C.forward` frame is in
// its stack (inclusive: GPT2Block holds what its GPT2MLP and Conv1D made). The calls of C in one forward
// are told apart from the stacks alone, since frames carry no instance: walking C's allocations in time
// order, a new call begins when the line of the outermost `C.forward` frame goes back (a forward runs its
// lines top to bottom), when the caller's line (the frame outside it) changes, or when an allocation outside
// C comes between. A forward with a loop over allocating lines, or one that allocates on a single line,
// merges consecutive calls (fewer, larger calls: the prediction then over-states the recompute and
// under-states the saving, so it errs on the safe side).
//
// Note [Checkpoint prediction]: checkpointing every call of C (torch.utils.checkpoint, non-reentrant)
// keeps only what each call is given and returns, and recomputes a call's forward during its backward:
//   predicted peak allocated = peak − held(C) + Σ outputs(C) + max over calls of held(call)
// where, at the run's peak, held(C) is what C's calls of the peak's step still hold, outputs(C) the last
// live allocation of each call (the next call's input: a block's inputs are its predecessor's output, and
// the first call's input was allocated outside C so it is already in `peak − held(C)`), and the last term
// the recompute transient of the largest call. It assumes the peak stays in C's backward after the change
// (a peak elsewhere, e.g. the optimizer step or the loss, is not lowered) and the same allocations.
import type { AllocationSpan, CategoryMoment, Model, Stack } from '../../base/model/types';
import type { Steps } from '../steps';

export interface ModuleCalls {
  module: string;
  calls: { startUs: number; heldBytes: number; outputBytes: number }[];
  heldBytes: number;
  keptBytes: number;
  transientBytes: number;
  predictedPeakAllocatedBytes: number;
}

const FORWARD = '.forward';
/** frames of nn.Module's call machinery, skipped when naming a call's caller */
const CALL_MACHINERY = /(^|\.)(_call_impl|_wrapped_call_impl|__call__|inner)$/;

interface Alloc {
  span: AllocationSpan;
  /** module classes in the stack, outermost first, with the line of their outermost frame and its caller */
  chain: Map<string, { line: number; caller: string }>;
  liveAtPeak: boolean;
}

function chainOf(stack: Stack | undefined): Map<string, { line: number; caller: string }> {
  const chain = new Map<string, { line: number; caller: string }>();
  if (!stack || stack.backward) return chain;
  const f = stack.frames;
  for (let i = f.length - 1; i >= 0; i--) {
    if (!f[i].name.endsWith(FORWARD)) continue;
    const cls = f[i].name.slice(0, -FORWARD.length);
    if (chain.has(cls)) continue;
    let j = i + 1;
    while (j < f.length && CALL_MACHINERY.test(f[j].name)) j++;
    chain.set(cls, { line: f[i].line, caller: j < f.length ? `${f[j].file}:${f[j].line}` : '' });
  }
  return chain;
}

/**
 * Every module class of the peak step's forward with its calls and the checkpoint prediction (Note
 * [Checkpoint prediction]), best predicted peak first. `peak`: the categories report's peak moment.
 */
export function moduleCalls(model: Model, device: number, peak: CategoryMoment, steps: Steps): ModuleCalls[] {
  const tPeak = peak.timeUs;
  const step = steps.steps.find((s) => s.startUs <= tPeak && tPeak <= s.endUs);
  const t0 = step ? step.startUs : model.timeRange(device).t0Us;
  const stacks = new Map<number, Map<string, { line: number; caller: string }>>();
  const allocs: Alloc[] = [];
  for (const span of model.spans(device, t0, tPeak, Number.MAX_SAFE_INTEGER)) {
    if (span.startUs < t0 || span.startUs > tPeak) continue;
    let chain = stacks.get(span.stackId);
    if (!chain) stacks.set(span.stackId, (chain = chainOf(model.stack(span.stackId))));
    allocs.push({ span, chain, liveAtPeak: span.endUs > tPeak });
  }
  allocs.sort((a, b) => a.span.startUs - b.span.startUs || a.span.address - b.span.address);
  const forward = allocs.filter((a) => a.chain.size > 0);
  const classes = new Set<string>();
  for (const a of forward) if (a.liveAtPeak) for (const c of a.chain.keys()) classes.add(c);

  const out: ModuleCalls[] = [];
  for (const module of classes) {
    const calls: ModuleCalls['calls'] = [];
    let prev: { line: number; caller: string } | undefined;
    for (const a of forward) {
      const at = a.chain.get(module);
      if (!at) {
        prev = undefined; // an allocation outside the module: the next one of the module starts a call
        continue;
      }
      if (!prev || at.line < prev.line || at.caller !== prev.caller) calls.push({ startUs: a.span.startUs, heldBytes: 0, outputBytes: 0 });
      prev = at;
      const call = calls[calls.length - 1];
      if (a.liveAtPeak) {
        call.heldBytes += a.span.size;
        call.outputBytes = a.span.size;
      }
    }
    const live = calls.filter((c) => c.heldBytes > 0);
    const heldBytes = live.reduce((s, c) => s + c.heldBytes, 0);
    const keptBytes = live.reduce((s, c) => s + c.outputBytes, 0);
    const transientBytes = live.reduce((m, c) => Math.max(m, c.heldBytes), 0);
    out.push({
      module,
      calls: live,
      heldBytes,
      keptBytes,
      transientBytes,
      predictedPeakAllocatedBytes: peak.allocatedBytes - heldBytes + keptBytes + transientBytes,
    });
  }
  return out.sort((a, b) => a.predictedPeakAllocatedBytes - b.predictedPeakAllocatedBytes || b.heldBytes - a.heldBytes);
}
