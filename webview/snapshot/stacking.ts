// Active-memory stacking, memory_viz style: at any time the live allocations are stacked in the order they
// were allocated, so when one is freed everything allocated after it drops by its size.
//
// Note [Column rasterisation]: instead of one polygon per allocation with a vertex at every event (memory_viz;
// its cost grows with events × live allocations and reaches 379 M characters of SVG at 4 M events), the view
// is sampled once per pixel column: a sweep over bands sorted by start keeps the live list in allocation
// order, so a frame costs O(columns × live bands) plus one pass over the pixels, whatever the trace length.
import type { SpanColumns } from '../../src/core/base/protocol/snapshot';

/** Called per column with the bands live at that column's time, bottom to top. */
export type ColumnVisitor = (column: number, live: readonly number[]) => void;

/**
 * Visits `columns` columns covering [v0, v1): column c samples time v0 + (c + 0.5) · (v1 − v0) / columns,
 * or timeOf(c) when given (non-decreasing in c). Bands must be sorted by start time. A band is live at t
 * when start ≤ t < end (or live at the end).
 */
export function sweepColumns(spans: SpanColumns, v0: number, v1: number, columns: number, visit: ColumnVisitor, timeOf?: (column: number) => number): void {
  const n = spans.startUs.length;
  const dt = (v1 - v0) / columns;
  let next = 0;
  let live: number[] = [];
  for (let c = 0; c < columns; c++) {
    const t = timeOf ? timeOf(c) : v0 + (c + 0.5) * dt;
    while (next < n && spans.startUs[next] <= t) live.push(next++);
    // Drop ended bands; allocation order of the survivors is kept.
    let w = 0;
    for (let r = 0; r < live.length; r++) {
      const i = live[r];
      if (spans.liveAtEnd[i] || spans.endUs[i] > t) live[w++] = i;
    }
    live.length = w;
    visit(c, live);
  }
  live = [];
}

/** The band under height `bytes` at time `t` (bottom = 0), or −1; with its offset from the bottom. */
export function bandAt(spans: SpanColumns, t: number, bytes: number): { index: number; baseBytes: number } {
  let base = 0;
  for (let i = 0; i < spans.startUs.length && spans.startUs[i] <= t; i++) {
    if (!(spans.liveAtEnd[i] || spans.endUs[i] > t)) continue;
    const top = base + spans.size[i];
    if (bytes >= base && bytes < top) return { index: i, baseBytes: base };
    base = top;
  }
  return { index: -1, baseBytes: base };
}

/** Σ sizes of bands live at t (what the drawn bands add up to at that time). */
export function stackedBytesAt(spans: SpanColumns, t: number): number {
  let sum = 0;
  for (let i = 0; i < spans.startUs.length && spans.startUs[i] <= t; i++) {
    if (spans.liveAtEnd[i] || spans.endUs[i] > t) sum += spans.size[i];
  }
  return sum;
}
