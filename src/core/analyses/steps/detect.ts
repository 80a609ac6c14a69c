// Which moments end a training step, from the step facts the bootstrap writes (no user code needed).
//
// Note [Steps]: the workload states facts, the reader decides (so the rule can improve without re-running):
//   - every backward() / autograd.grad() end writes a MARK_STEP "backward";
//   - every Optimizer.step() end writes a MARK_STEP "optimizer.step" (global post hook);
//   - gpumem.step(name) writes a MARK_STEP with the user's name; gpumem.mark("step …") / ("iter …") count too;
//   - PyTorch's own record_function ranges, which the bootstrap records and pickles carry as annotations:
//     `ProfilerStep#N` (torch.profiler's step ranges) and `Optimizer.step#<Class>.step` around every step().
// Steps are numbered from 1, as users count iterations: step k is the k-th iteration, in progress until its
// end. The rule, first match wins:
//   0. numbered:  instant marks or range begins named `ProfilerStep#N`, `step N` (`step=N`, `step:N`,
//                 `step#N`, `step_N`; any case) start step N; it ends 1 µs before the next one starts (the
//                 last at its range end, else at the last event), so a boundary moment is in the new step;
//   1. user:      any user step mark exists → the steps end exactly at those marks (the override);
//   2. optimizer: an "optimizer.step" that follows at least one "backward" since the previous step end ends a
//                 step. Gradient accumulation (k backwards, one step) gives one step per optimizer step; two
//                 optimizers stepped after one backward (e.g. a shared loss) give one step. A GAN's D and G
//                 steps, each after its own backward, count as two steps — stated, not hidden. Captures with
//                 optimizer steps but no backward facts (e.g. backward outside autograd.backward) take every
//                 optimizer step;
//      Captures without step facts (older bootstraps, pickles) use the ends of PyTorch's
//      `Optimizer.step#…` ranges of the first optimizer class seen (so a GAN's two optimizers count once);
//   3. backward:  no optimizer steps → every backward end ends a step (manual SGD loops);
//   4. none.
// A step runs from the previous step's end (or the first event) to its own end; events after the last end
// belong to no step (an unfinished step is not a step).
import type { Marker } from '../../base/model/types';

export type StepSource = 'numbered' | 'user' | 'optimizer' | 'backward' | 'none';

export interface Step {
  /** 1-based, as users count iterations */
  index: number;
  startUs: number;
  endUs: number;
}

export interface Steps {
  source: StepSource;
  steps: Step[];
}

const FACT_BACKWARD = 'backward';
const FACT_OPTIMIZER = 'optimizer.step';
const USER_MARK = /^(step|iter(ation)?)\b/i;
const NUMBERED = /^\s*(?:ProfilerStep#|step[\s#:=_-]*)(\d+)\s*$/i;
const OPTIMIZER_RANGE = /^Optimizer\.step#.+\.step$/;

function isUserStep(m: Marker): boolean {
  if (m.kind === 'step') return m.label !== FACT_BACKWARD && m.label !== FACT_OPTIMIZER;
  return m.kind === 'user' && USER_MARK.test(m.label) && !NUMBERED.test(m.label);
}

/**
 * `markers` of one process (any devices, any order); `startUs`: the first event's time; `endUs`: the last
 * event's (where the last numbered step ends when no range end closes it).
 */
export function detectSteps(markers: readonly Marker[], startUs: number, endUs = Infinity): Steps {
  const sorted = [...markers].sort((a, b) => a.timeUs - b.timeUs);
  const numbered = numberedSteps(sorted, endUs);
  if (numbered.length) return { source: 'numbered', steps: numbered };
  const user = sorted.filter(isUserStep).map((m) => m.timeUs);
  if (user.length) return build('user', user, startUs);
  const facts = sorted.filter((m) => m.kind === 'step');
  const optimizer = facts.filter((m) => m.label === FACT_OPTIMIZER);
  const sawBackward = facts.some((m) => m.label === FACT_BACKWARD);
  if (optimizer.length) {
    if (!sawBackward) return build('optimizer', optimizer.map((m) => m.timeUs), startUs);
    const ends: number[] = [];
    let backwardSinceEnd = false;
    for (const m of facts) {
      if (m.label === FACT_BACKWARD) backwardSinceEnd = true;
      else if (m.label === FACT_OPTIMIZER && backwardSinceEnd) {
        ends.push(m.timeUs);
        backwardSinceEnd = false;
      }
    }
    return build('optimizer', ends, startUs);
  }
  const firstRange = sorted.find((m) => m.kind === 'range_end' && OPTIMIZER_RANGE.test(m.label));
  if (firstRange) {
    return build('optimizer', sorted.filter((m) => m.kind === 'range_end' && m.label === firstRange.label).map((m) => m.timeUs), startUs);
  }
  const backward = facts.filter((m) => m.label === FACT_BACKWARD).map((m) => m.timeUs);
  if (backward.length) return build('backward', backward, startUs);
  return { source: 'none', steps: [] };
}

function numberedSteps(sorted: readonly Marker[], endUs: number): Step[] {
  const starts: { t: number; n: number; label: string }[] = [];
  for (const m of sorted) {
    if (m.kind !== 'user' && m.kind !== 'range_begin') continue;
    const hit = NUMBERED.exec(m.label);
    if (hit) starts.push({ t: m.timeUs, n: Number(hit[1]), label: m.label });
  }
  return starts.map((s, i) => {
    let end = i + 1 < starts.length ? Math.max(s.t, starts[i + 1].t - 1) : endUs;
    if (i + 1 === starts.length) {
      const close = sorted.find((m) => m.kind === 'range_end' && m.label === s.label && m.timeUs >= s.t);
      if (close) end = close.timeUs;
    }
    return { index: s.n, startUs: s.t, endUs: end };
  });
}

function build(source: StepSource, ends: number[], startUs: number): Steps {
  const unique = ends.filter((t, i) => i === 0 || t !== ends[i - 1]);
  const steps = unique.map((endUs, i) => ({ index: i + 1, startUs: i === 0 ? Math.min(startUs, endUs) : unique[i - 1], endUs }));
  return { source, steps };
}

/** The step a moment falls in (1-based), or undefined before the first step's start / after the last end. */
export function stepAt(steps: readonly Step[], tUs: number): number | undefined {
  let lo = 0;
  let hi = steps.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const s = steps[mid];
    if (tUs > s.endUs) lo = mid + 1;
    else if (tUs < s.startUs) hi = mid - 1;
    else return s.index;
  }
  return undefined;
}
