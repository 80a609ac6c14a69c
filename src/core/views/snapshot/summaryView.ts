// The Summary tab's figures, in memory_summary()'s vocabulary, computed from a Model.
import { formatBytes } from '../../base/units/bytes';
import type { Marker, Model } from '../../base/model/types';
import type { MarkerView, SummaryView } from '../../base/protocol/snapshot';
import type { Steps } from '../../analyses/steps';
import { breakdownFromSegments } from '../../analyses/breakdown/breakdown';
import { numberSteps } from './stepMarkers';
import { verdictAt } from '../../analyses/verdicts/verdict';

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
 * Markers for the timeline. A long run can hold tens of thousands of user ranges and step facts, so past
 * `limit` the other markers are thinned to an evenly spaced subset; OOM, empty-cache and snapshot markers are
 * always kept. With `steps`, step ends are numbered first (numberSteps) and thinned with the rest: numbering after
 * thinning gave back a marker for every step (23 k for an hour's capture, 1.5 MB in the panel's first answer).
 */
export function buildMarkers(
  model: Model,
  device: number,
  limit = 5000,
  steps?: Steps,
  range?: { t0Us: number; t1Us: number },
): { markers: MarkerView[]; truncated: boolean } {
  const sorted = withOomDetail(model, device, [...model.markers(device), ...processWideMarkers(model, device)])
    .sort((a, b) => a.timeUs - b.timeUs)
    .map((m): MarkerView => ({ timeUs: m.timeUs, kind: m.kind, label: m.label }));
  const numbered = steps ? numberSteps(sorted, steps) : sorted;
  // a window of the run (the zoomed timeline asks for its own, Note [Markers by range]): numbered over the whole run first
  const all = range ? numbered.filter((m) => m.timeUs >= range.t0Us && m.timeUs <= range.t1Us) : numbered;
  let pick = all;
  if (all.length > limit) {
    const isKey = (k: string) => k === 'oom' || k === 'empty_cache' || k === 'snapshot';
    const key = all.filter((m) => isKey(m.kind));
    const rest = all.filter((m) => !isKey(m.kind));
    const room = Math.max(0, limit - key.length);
    const thinned = Array.from({ length: Math.min(room, rest.length) }, (_, i) => rest[Math.floor((i * rest.length) / room)]);
    pick = [...key, ...thinned].sort((a, b) => a.timeUs - b.timeUs);
  }
  return { markers: pick, truncated: pick.length < all.length };
}

// The writer puts markers that belong to no device (user marks, record_function ranges, notices) on device
// 0 (FORMAT.md RecordHeader.device); they belong on every device's timeline, including when device 0 has no
// events of its own and is left out (Note [Devices with no events]).
const PROCESS_WIDE = new Set<Marker['kind']>(['user', 'range_begin', 'range_end', 'notice']);

function processWideMarkers(model: Model, device: number): Marker[] {
  if (device === 0 || model.format !== 'gpumem-capture' || !model.fileInfo().recordDevices.includes(0)) return [];
  return model.markers(0).filter((m) => PROCESS_WIDE.has(m.kind));
}

/** OOM markers name the request and the line that asked ("OOM: 2.50 GiB at train.py:29"). */
function withOomDetail(model: Model, device: number, markers: Marker[]): Marker[] {
  const ooms = model.ooms().filter((o) => o.device === device);
  if (!ooms.length) return markers;
  return markers.map((m) => {
    if (m.kind !== 'oom') return m;
    const o = ooms.find((x) => x.timeUs === m.timeUs);
    if (!o) return m;
    const base = o.file.slice(Math.max(o.file.lastIndexOf('/'), o.file.lastIndexOf('\\')) + 1);
    const where = o.line > 0 ? ` at ${base}:${o.line}` : '';
    return { ...m, label: `OOM: ${formatBytes(o.requestedBytes)}${where}` };
  });
}
