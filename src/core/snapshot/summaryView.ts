// The Summary tab's figures, in memory_summary()'s vocabulary, computed from a Model.
import type { Model } from '../model/types';
import type { MarkerView, SummaryView } from '../protocol/snapshot';
import { breakdownFromSegments } from './breakdown';
import { verdictAt } from './verdict';

/**
 * Figures at the end of the file: for a PyTorch pickle that is the moment `_snapshot()` ran (its `segments`),
 * for a capture the last recorded event. Peaks come from the whole trace (issue 4's replay definition).
 */
export function buildSummary(model: Model, device: number): SummaryView {
  const state = model.stateAt(device, Infinity);
  const b = breakdownFromSegments(state.segments);
  let blocks = 0;
  let allocatedBlocks = 0;
  for (const seg of state.segments) {
    blocks += seg.blocks.length;
    for (const block of seg.blocks) if (block.state === 'active_allocated') allocatedBlocks++;
  }
  const dev = model.summary().devices.find((d) => d.device === device);
  const current = model.current(device);
  const ooms = model.ooms().filter((o) => o.device === device);
  return {
    device,
    allocatedBytes: b.allocatedBytes,
    reservedBytes: b.reservedBytes,
    activeBytes: b.allocatedBytes + b.pendingFreeBytes,
    requestedBytes: b.requestedBytes,
    segments: state.segments.length,
    blocks,
    allocatedBlocks,
    peakAllocatedBytes: dev?.peak_allocated_bytes ?? current.peakAllocatedBytes,
    peakAtTimeUs: dev?.peak_at_time_us ?? current.timeUs,
    // Never below what is reserved now: a pickle's trace may start after segments were already reserved.
    peakReservedBytes: Math.max(current.peakReservedBytes, b.reservedBytes),
    oomCount: ooms.length,
    events: dev?.events ?? 0,
    breakdown: b,
    verdict: verdictAt(model, device, Infinity, b, ooms[ooms.length - 1]),
  };
}

/**
 * Markers for the timeline. A long run can hold tens of thousands of user ranges, so past `limit` the user
 * markers are thinned to an evenly spaced subset; OOM, empty-cache and snapshot markers are always kept.
 */
export function buildMarkers(model: Model, device: number, limit = 5000): { markers: MarkerView[]; truncated: boolean } {
  const all = model.markers(device);
  let pick = all;
  if (all.length > limit) {
    const isKey = (k: string) => k === 'oom' || k === 'empty_cache' || k === 'snapshot';
    const key = all.filter((m) => isKey(m.kind));
    const rest = all.filter((m) => !isKey(m.kind));
    const room = Math.max(0, limit - key.length);
    const thinned = Array.from({ length: Math.min(room, rest.length) }, (_, i) => rest[Math.floor((i * rest.length) / room)]);
    pick = [...key, ...thinned].sort((a, b) => a.timeUs - b.timeUs);
  }
  return {
    markers: pick.map((m) => ({ timeUs: m.timeUs, kind: m.kind, label: m.label })),
    truncated: pick.length < all.length,
  };
}
