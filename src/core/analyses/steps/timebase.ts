// Times a user can read: seconds since the process's first allocator event, and the training step.
//
// Note [Time origin]: every time shown (summary text, panel, OOM list) is seconds since the first allocator
// event of the process on any device (FileInfo.originUs: its first CUDA allocation, or for a pickle the
// first trace entry). Raw µs since the epoch (PyTorch's time_us) stay in JSON fields named *_us only.
//
// The step at a moment is the iteration in progress, by the one rule of Note [Steps] (src/core/analyses/steps/detect.ts).
// Markers are process-wide (the writer puts markers not tied to a device on device 0), so the rule reads
// the markers of every device the file has records for.
import type { Marker, Model } from '../../base/model/types';
import { detectSteps, stepAt as stepOf, type Steps, type StepSource as Source } from './detect';

export type StepSource = Exclude<Source, 'none'>;

export interface TimeBase {
  /** µs since the epoch of the first allocator event; 0 when the file has none */
  originUs: number;
  /** where steps come from (Note [Steps]); undefined: no step is known anywhere */
  stepSource: StepSource | undefined;
  /** the process's steps, detected once (Note [Steps]); the step table and categories use the same ones */
  steps: Steps;
  /** seconds since the origin */
  seconds(tUs: number): number;
  /** the step in progress at tUs (Note [Steps]), or undefined */
  stepAt(tUs: number): number | undefined;
  /** "12.345 s" or "12.345 s (step 7)" */
  label(tUs: number): string;
}

/** Builds the time base from the file's origin and its markers on every device. */
export function timeBaseOf(model: Model, originUs?: number): TimeBase {
  const info = model.fileInfo();
  const markers: Marker[] = [];
  // a loop, not push(...): a 2-minute run of 5 ms steps has ~700 k markers, past V8's argument limit
  // ("Maximum call stack size exceeded" in gpumem summary on an H100)
  for (const d of info.recordDevices) for (const m of model.markersShared?.(d) ?? model.markers(d)) markers.push(m);
  return makeTimeBase(originUs ?? info.originUs ?? 0, markers);
}

export function makeTimeBase(originUs: number, markers: readonly Marker[]): TimeBase {
  const found = detectSteps(markers, originUs);
  const source: StepSource | undefined = found.source === 'none' ? undefined : found.source;
  const stepAt = (tUs: number): number | undefined => stepOf(found.steps, tUs);
  const seconds = (tUs: number) => (tUs - originUs) / 1e6;
  return {
    originUs,
    stepSource: source,
    steps: found,
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
