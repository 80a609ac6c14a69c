// What a budgeted capture kept (FORMAT.md §5, Note [Capture budget] in native/allocator/src/compactor.cc): which
// part of the run is in full detail and which only as aggregates. Said once, in the integrity sentences, so the
// summary text, `--json`, the snapshot panel's banner and the live panel all say it.
import { formatBytes } from '../../base/units/bytes';
import type { FileInfo } from '../../base/model/types';
import { formatSeconds, jsonSeconds } from '../steps/timebase';

/** `integrity.budget` of `gpumem summary --json`: null when the whole run is in full detail. */
export interface BudgetInfo {
  budget_bytes: number;
  /** compacted ranges, each from/to seconds since the time origin */
  aggregated: { from_s: number; to_s: number; events: number }[];
  /** block events compacted away, over all ranges */
  events_compacted: number;
  /** every event after this moment (seconds since the origin) is in the file */
  full_detail_from_s: number;
}

/** `seconds`: a time in µs as seconds since the origin (TimeBase.seconds). */
export function budgetOf(info: FileInfo, seconds: (us: number) => number): BudgetInfo | null {
  const ranges = info.aggregated ?? [];
  if (ranges.length === 0) return null;
  const s = (us: number): number => jsonSeconds(seconds(us));
  return {
    budget_bytes: ranges[ranges.length - 1].budgetBytes,
    aggregated: ranges.map((r) => ({ from_s: s(r.fromUs), to_s: s(r.toUs), events: r.events })),
    events_compacted: ranges.reduce((n, r) => n + r.events, 0),
    full_detail_from_s: s(Math.max(...ranges.map((r) => r.toUs))),
  };
}

export function budgetSentence(b: BudgetInfo): string {
  // A range may begin with a record before the first allocator event (the time origin): say 0, not −0.000 s.
  const from = Math.max(0, Math.min(...b.aggregated.map((r) => r.from_s)));
  return (
    `Budgeted capture (${formatBytes(b.budget_bytes)}): every event from ${formatSeconds(b.full_detail_from_s)} on is kept; ` +
    `${formatSeconds(from)}–${formatSeconds(b.full_detail_from_s)} is kept as aggregates (${b.events_compacted.toLocaleString('en-US')} block events compacted: ` +
    `timeline as min/max, per-line counts and totals), with full detail at each new peak, OOM and snapshot. ` +
    `Peaks, top lines at the peak, OOMs, markers and segment events cover the whole run.`
  );
}
