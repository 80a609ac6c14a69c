// Times a user can read: seconds since the process's first allocator event, and the training step.
//
// Note [Time origin]: every time shown (summary text, panel, OOM list) is seconds since the first allocator
// event of the process on any device (FileInfo.originUs: its first CUDA allocation, or for a pickle the
// first trace entry). Raw µs since the epoch (PyTorch's time_us) stay in JSON fields named *_us only.
//
// Note [Step markers]: the step at a moment t comes from markers, by the first rule that applies:
//   1. Numbered step markers: an instant marker (gpumem.mark) or a range begin (record_function) whose label
//      is `ProfilerStep#N` (torch.profiler's step ranges) or `step N` / `step=N` / `step:N` / `step#N` /
//      `step_N` (any case). The step at t is N of the last such marker at or before t; before the first one
//      there is no step.
//   2. Optimizer steps: PyTorch wraps every optimizer.step() in a record_function named
//      `Optimizer.step#<Class>.step`, which the bootstrap records as a range. The step at t is the number of
//      those ranges that ended at or before t (0 during the first iteration), counting one optimizer class
//      only — the first seen — so two optimizers (a GAN) do not count each iteration twice.
//   3. Otherwise there is no step.
// Markers are process-wide (the writer puts markers not tied to a device on device 0), so the rule reads
// the markers of every device the file has records for.
import type { Marker, Model } from '../model/types';

const NUMBERED = /^\s*(?:ProfilerStep#|step[\s#:=_-]*)(\d+)\s*$/i;
const OPTIMIZER = /^Optimizer\.step#.+\.step$/;

export type StepSource = 'markers' | 'optimizer';

export interface TimeBase {
  /** µs since the epoch of the first allocator event; 0 when the file has none */
  originUs: number;
  /** where steps come from (Note [Step markers]); undefined: no step is known anywhere */
  stepSource: StepSource | undefined;
  /** seconds since the origin */
  seconds(tUs: number): number;
  /** the step at tUs (Note [Step markers]), or undefined */
  stepAt(tUs: number): number | undefined;
  /** "12.345 s" or "12.345 s (step 7)" */
  label(tUs: number): string;
}

/** Builds the time base from the file's origin and its markers on every device. */
export function timeBaseOf(model: Model): TimeBase {
  const info = model.fileInfo();
  const markers: Marker[] = [];
  for (const d of info.recordDevices) markers.push(...model.markers(d));
  return makeTimeBase(info.originUs ?? 0, markers);
}

export function makeTimeBase(originUs: number, markers: readonly Marker[]): TimeBase {
  const sorted = [...markers].sort((a, b) => a.timeUs - b.timeUs);
  const numbered: { t: number; step: number }[] = [];
  for (const m of sorted) {
    if (m.kind !== 'user' && m.kind !== 'range_begin') continue;
    const hit = NUMBERED.exec(m.label);
    if (hit) numbered.push({ t: m.timeUs, step: Number(hit[1]) });
  }
  let source: StepSource | undefined;
  let times: number[] = [];
  let steps: number[] = [];
  if (numbered.length) {
    source = 'markers';
    times = numbered.map((n) => n.t);
    steps = numbered.map((n) => n.step);
  } else {
    const first = sorted.find((m) => m.kind === 'range_end' && OPTIMIZER.test(m.label));
    if (first) {
      source = 'optimizer';
      times = sorted.filter((m) => m.kind === 'range_end' && m.label === first.label).map((m) => m.timeUs);
      steps = times.map((_, i) => i + 1);
    }
  }
  const stepAt = (tUs: number): number | undefined => {
    if (!source) return undefined;
    const i = lastAtOrBefore(times, tUs);
    if (i < 0) return source === 'optimizer' ? 0 : undefined;
    return steps[i];
  };
  const seconds = (tUs: number) => (tUs - originUs) / 1e6;
  return {
    originUs,
    stepSource: source,
    seconds,
    stepAt,
    label(tUs: number): string {
      const step = stepAt(tUs);
      return `${formatSeconds(seconds(tUs))}${step === undefined ? '' : ` (step ${step})`}`;
    },
  };
}

/** "12.345 s" (ms precision: allocator events are µs apart, but a reader cares about ms). */
export function formatSeconds(s: number): string {
  return `${s.toFixed(3)} s`;
}

/** Seconds rounded to µs, for JSON (no 0.30000000000000004). */
export function jsonSeconds(s: number): number {
  return Math.round(s * 1e6) / 1e6;
}

function lastAtOrBefore(sorted: readonly number[], t: number): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (sorted[mid] <= t) lo = mid + 1;
    else hi = mid;
  }
  return lo - 1;
}
