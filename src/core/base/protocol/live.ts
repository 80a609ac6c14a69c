// Messages between the extension host and the live panel webview (webview/live). Plain data only:
// everything here crosses postMessage (structured clone). Discriminated by `type`.
//
// Note [Live update shape]: the host sends the whole view state at most ~10 times a second (throttled in
// src/glue/live), already reduced to what is drawn: one min/max-bucketed series per (process, device) at the
// panel's pixel width. The webview never sees raw events, so a long run costs the same per update as a
// short one, and a hidden-then-restored panel needs nothing but the next update.

import type { Category, CurrentFigures, MarkerKind } from '../model/types';
import { bool, list, map, type MessageIn, num, obj, oneOf, protocol, refine, str, view } from './schema';

export interface LiveMarker {
  /** seconds since the Unix epoch (uPlot's time axis unit) */
  t: number;
  kind: MarkerKind;
  label: string;
}

/** The model's current figures (deviceUsedBytes absent when the capture has no device samples), plus: */
export interface LiveFigures extends Omit<CurrentFigures, 'timeUs'> {
  /** device used − reserved: the CUDA context, other libraries, other processes. Absent without samples. */
  unattributedBytes?: number;
}

/** Time series at bucket resolution; `t` in seconds since the epoch, `null` where a bucket has no data. */
export interface LiveSeries {
  t: number[];
  allocated: (number | null)[];
  reserved: (number | null)[];
  deviceUsed: (number | null)[];
}

/** Categories over time and leak findings of a track (Note [Live categories] in src/core/views/live/categoriesTrack.ts). */
export interface LiveCategories {
  /** sample moments, seconds since the epoch */
  t: number[];
  /** bytes per category at each moment (index-aligned with t) */
  bytes: Record<Category, number[]>;
  hasTags: boolean;
  hasPhases: boolean;
  moduleNote: string;
  /** detected step ends (Note [Steps]), numbered as everywhere */
  steps: { index: number; endS: number }[];
  /** keeper: the line that keeps the memory alive, where the workload found one (Note [Leak keeper]) */
  leaks: { file: string; line: number; growthPerStepBytes: number; category?: Category; sentence: string; keeper?: { file: string; line: number; container: string } }[];
}

/** One chart: a device of one workload process (a torchrun rank is a process). */
export interface LiveTrack {
  /** stable key, e.g. "1234/0" (pid/device) */
  key: string;
  /** "rank 0 · cuda:0 · NVIDIA H200 (pid 1234)" */
  label: string;
  pid: number;
  rank?: number;
  device: number;
  running: boolean;
  figures: LiveFigures;
  series: LiveSeries;
  markers: LiveMarker[];
  /** absent before the capture has two moments, or from hosts before categories */
  categories?: LiveCategories;
}

export interface LiveRunView {
  /** session folder name, shown as the panel's subtitle */
  name: string;
  /**
   * The chart's 0 s, in seconds since the epoch: the run's first event (the first CUDA allocation of
   * its first process), shared by every track so ranks line up. Absent before any capture has an event.
   * Charts show seconds elapsed since it (Note [Elapsed time axis] in webview/live/timeAxis.ts).
   */
  originS?: number;
  running: boolean;
  tracks: LiveTrack[];
  /** problems worth showing (unreadable capture, damaged tail…) */
  problems: string[];
}

export type LiveAction = 'emptyCache' | 'captureSnapshot';
const ACTIONS = ['emptyCache', 'captureSnapshot'] as const satisfies readonly LiveAction[];

// The live panel's messages, one declaration per direction (Note [Message schemas] in schema.ts): the
// message types and the validators their receivers run are both derived from these tables.

/** The chart width the page reports. The host asks the model for one bucket per pixel: a bogus width is capped. */
const widthPx = map(
  refine(num, (w) => w >= 0, 'must not be negative'),
  (w) => Math.min(Math.round(w), 8192),
);

/** Host → webview (checked by webview/live). */
export const liveHostMessages = protocol('live panel, host → webview', {
  update: obj({ run: view<LiveRunView>({ name: str(Infinity), tracks: list<LiveTrack>(), running: bool, problems: list<string>() }) }),
  noRun: obj({}),
  busy: obj({ action: oneOf(ACTIONS), busy: bool }),
});
export type LiveHostMessage = MessageIn<typeof liveHostMessages>;

/** Webview → host (checked by src/glue/live): untrusted input, so every field is checked. */
export const liveWebviewMessages = protocol('live panel, webview → host', {
  ready: obj({ widthPx }),
  resize: obj({ widthPx }),
  action: obj({ action: oneOf(ACTIONS) }),
});
export type LiveWebviewMessage = MessageIn<typeof liveWebviewMessages>;

/** Validates a message from the webview; undefined for anything outside the contract. */
export const parseLiveWebviewMessage = liveWebviewMessages.parse;

/** Validates a message from the host (the webview side uses this; drops anything it does not know). */
export const parseLiveHostMessage = liveHostMessages.parse;
