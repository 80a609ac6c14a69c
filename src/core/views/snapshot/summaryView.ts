// The Summary tab's figures, in memory_summary()'s vocabulary, computed from a Model.
import { formatBytes } from '../../base/units/bytes';
import type { AllocatorState, Marker, Model } from '../../base/model/types';
import type { MarkerView, SnapshotDetailsView, SummaryView } from '../../base/protocol/snapshot';
import type { Steps } from '../../analyses/steps';
import { breakdownFromSegments } from '../../analyses/breakdown/breakdown';
import { inTimeOrder, mergeByTime, numberSteps } from './stepMarkers';
import { verdictAt } from '../../analyses/verdicts/verdict';
import { snapshotSection } from '../../analyses/summary/snapshotSection';
import { poolLabel } from '../../analyses/pools';

/**
 * Figures at the end of the file: for a PyTorch pickle that is the moment `_snapshot()` ran (its `segments`),
 * for a capture the last recorded event. Peaks come from the whole trace (the replay definition).
 */
export function buildSummary(model: Model, device: number, displayPath: (file: string) => string = (f) => f): SummaryView {
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
    ...detailsOf(model, device, displayPath, state),
  };
}

/**
 * Note [Snapshot section]: the Summary tab's sections past the figures — private pools, pinned host memory, the
 * allocator settings, user metadata, compile contexts, annotations, blocks of unknown history and unknown keys —
 * the same figures `gpumem summary` prints (snapshotSection). Left out when the file has none of them.
 */
function detailsOf(model: Model, device: number, displayPath: (f: string) => string, end: AllocatorState): { details?: SnapshotDetailsView } {
  const section = snapshotSection(model, device, new Map([[device, end]]));
  const d = section.devices.find((x) => x.device === device);
  const tagged = (t: { value: string; allocations: number; bytes: number; first_time_us: number; last_time_us: number }) => ({
    value: t.value,
    allocations: t.allocations,
    bytes: t.bytes,
    firstUs: t.first_time_us,
    lastUs: t.last_time_us,
  });
  const host = model.extras().host;
  const details: SnapshotDetailsView = {
    pools: (d?.pools ?? []).map((p) => ({
      poolId: p.pool_id,
      label: poolLabel(p.pool_id),
      segments: p.segments,
      reservedBytes: p.reserved_bytes,
      activeBytes: p.active_bytes,
      freeBytes: p.free_bytes,
      largestFreeBlockBytes: p.largest_free_block_bytes,
      fragmentation: p.fragmentation,
    })),
    untracedBlocks: d?.untraced_blocks ?? 0,
    untracedBytes: d?.untraced_bytes ?? 0,
    userMetadata: (d?.user_metadata ?? []).map(tagged),
    compileContexts: (d?.compile_contexts ?? []).map(tagged),
    annotations: d?.annotations ?? [],
    allocatorSettings: section.allocator_settings
      ? Object.entries(section.allocator_settings).map(([key, v]) => ({ key, value: typeof v === 'string' ? v : JSON.stringify(v) }))
      : null,
    host:
      section.host && host
        ? {
            segments: section.host.segments,
            blocks: section.host.blocks,
            allocatedBlocks: section.host.allocated_blocks,
            reservedBytes: section.host.reserved_bytes,
            allocatedBytes: section.host.allocated_bytes,
            activeBytes: section.host.active_bytes,
            cachedBytes: section.host.cached_bytes,
            largestFreeBlockBytes: section.host.largest_free_block_bytes,
            peakAllocatedBytes: section.host.peak_allocated_bytes,
            peakAtTimeUs: section.host.peak_at_time_us,
            events: section.host.events,
            rows: host.segments.map((seg) => {
              const allocated = seg.blocks.filter((b) => b.state === 'active_allocated').reduce((n, b) => n + b.size, 0);
              const stackId = seg.blocks.find((b) => b.stackId > 0)?.stackId ?? seg.stackId;
              const f = model.stack(stackId)?.frames.find((x) => x.user) ?? model.stack(stackId)?.frames[0];
              return {
                address: seg.address,
                totalSize: seg.totalSize,
                allocatedBytes: allocated,
                state: allocated > 0 ? 'in use' : 'cached',
                where: f ? `${displayPath(f.file)}:${f.line}` : '',
              };
            }),
          }
        : null,
    unknownKeys: section.unknown_keys,
  };
  const empty =
    !details.pools.length &&
    !details.untracedBlocks &&
    !details.userMetadata.length &&
    !details.compileContexts.length &&
    !details.annotations.length &&
    !details.allocatorSettings &&
    !details.host &&
    !details.unknownKeys.length;
  return empty ? {} : { details };
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
  const parts = markersInParts(model, device, limit, steps, range);
  for (;;) {
    const r = parts.next();
    if (r.done) return r.value;
  }
}

/**
 * buildMarkers in parts (Note [First answers in turns] in openedCapture.ts): each `yield` is a point where the caller
 * may give the event loop a turn; the result is buildMarkers'.
 */
export function* markersInParts(
  model: Model,
  device: number,
  limit = 5000,
  steps?: Steps,
  range?: { t0Us: number; t1Us: number },
): Generator<void, { markers: MarkerView[]; truncated: boolean }> {
  // Note [Markers answer cost]: the first paint's answer on the extension host's thread (19 k markers at 13 M events:
  // 42-53 ms cold before): one copy of each marker, and sorts only where the order is not already there (the
  // reader's markers come in time order; the stable sorts' results are kept exactly, ties included).
  const own = withOomDetail(model, device, model.markersShared?.(device) ?? model.markers(device));
  const wide = processWideMarkers(model, device);
  const views: MarkerView[] = new Array(own.length + wide.length);
  let k = 0;
  for (const m of own) views[k++] = { timeUs: m.timeUs, kind: m.kind, label: m.label };
  for (const m of wide) views[k++] = { timeUs: m.timeUs, kind: m.kind, label: m.label };
  const sorted = inTimeOrder(views) ? views : views.sort((a, b) => a.timeUs - b.timeUs);
  yield;
  const numbered = steps ? numberSteps(sorted, steps, true) : sorted;
  yield;
  // a window of the run (the zoomed timeline asks for its own, Note [Markers by range]): numbered over the whole run first
  const all = range ? numbered.filter((m) => m.timeUs >= range.t0Us && m.timeUs <= range.t1Us) : numbered;
  let pick = all;
  if (all.length > limit) {
    const isKey = (k: string) => k === 'oom' || k === 'empty_cache' || k === 'snapshot';
    const key = all.filter((m) => isKey(m.kind));
    const rest = all.filter((m) => !isKey(m.kind));
    const room = Math.max(0, limit - key.length);
    const thinned = Array.from({ length: Math.min(room, rest.length) }, (_, i) => rest[Math.floor((i * rest.length) / room)]);
    // both in time order: merged as the stable sort of [...key, ...thinned] orders them (a key first on a tie)
    pick = mergeByTime(key, thinned);
  }
  return { markers: pick, truncated: pick.length < all.length };
}


// The writer puts markers that belong to no device (user marks, record_function ranges, notices) on device
// 0 (FORMAT.md RecordHeader.device); they belong on every device's timeline, including when device 0 has no
// events of its own and is left out (Note [Devices with no events]).
const PROCESS_WIDE = new Set<Marker['kind']>(['user', 'range_begin', 'range_end', 'notice']);

function processWideMarkers(model: Model, device: number): readonly Readonly<Marker>[] {
  if (device === 0 || model.format !== 'gpumem-capture' || !model.fileInfo().recordDevices.includes(0)) return [];
  return (model.markersShared?.(0) ?? model.markers(0)).filter((m) => PROCESS_WIDE.has(m.kind));
}

/** OOM markers name the request and the line that asked ("OOM: 2.50 GiB at train.py:29"). */
function withOomDetail(model: Model, device: number, markers: readonly Readonly<Marker>[]): readonly Readonly<Marker>[] {
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
