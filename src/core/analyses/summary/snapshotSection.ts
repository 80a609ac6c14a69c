// `gpumem summary`'s `snapshot` section: what a PyTorch snapshot carries beyond the figures —
// private pools, pinned host memory, the allocator settings the run used, user metadata, compile contexts,
// annotations, blocks whose history is unknown, and the keys this reader does not know, shown raw.
// Note [Snapshot section]: every figure comes from the model (the segments at the snapshot's moment, the reader's
// extras: Note [Snapshot extras] in native/addon/src/model.h); nothing is said of what the file does not hold, so a
// section with nothing in it is left out of the text, and `--json` says null / [] for it.
import { formatBytes } from '../../base/units/bytes';
import type { AllocatorState, Marker, Model, UnknownKey } from '../../base/model/types';
import { hostFigures, poolLabel, privatePools, untracedBlocks, type PoolKind } from '../pools';

export interface PoolJson {
  pool_id: [number, number];
  kind: PoolKind;
  segments: number;
  blocks: number;
  reserved_bytes: number;
  allocated_bytes: number;
  active_bytes: number;
  requested_bytes: number;
  free_bytes: number;
  largest_free_block_bytes: number;
  /** 1 − largest free / free (Note [Private pools]) */
  fragmentation: number;
}

export interface TaggedJson {
  value: string;
  allocations: number;
  bytes: number;
  first_time_us: number;
  last_time_us: number;
}

export interface SnapshotDeviceJson {
  device: number;
  pools: PoolJson[];
  /** allocated at the end with no allocation in the trace (Note [Untraced blocks]) */
  untraced_blocks: number;
  untraced_bytes: number;
  user_metadata: TaggedJson[];
  compile_contexts: TaggedJson[];
  /** record_function ranges of external_annotations, by name (START markers) */
  annotations: { name: string; ranges: number }[];
}

export interface HostJson {
  segments: number;
  blocks: number;
  allocated_blocks: number;
  reserved_bytes: number;
  allocated_bytes: number;
  active_bytes: number;
  requested_bytes: number;
  cached_bytes: number;
  largest_free_block_bytes: number;
  peak_allocated_bytes: number;
  peak_at_time_us: number;
  events: number;
}

export interface SnapshotSectionJson {
  allocator_settings: Record<string, unknown> | null;
  devices: SnapshotDeviceJson[];
  host: HostJson | null;
  unknown_keys: UnknownKey[];
}

const tagged = (t: { value: string; allocs: number; bytes: number; firstUs: number; lastUs: number }): TaggedJson => ({
  value: t.value,
  allocations: t.allocs,
  bytes: t.bytes,
  first_time_us: t.firstUs,
  last_time_us: t.lastUs,
});

/** Ranges per name from a device's markers (a START each), in order of first appearance. */
export function annotationRanges(markers: readonly Marker[]): { name: string; ranges: number }[] {
  const counts = new Map<string, number>();
  for (const m of markers) if (m.kind === 'range_begin') counts.set(m.label, (counts.get(m.label) ?? 0) + 1);
  return [...counts].map(([name, ranges]) => ({ name, ranges }));
}

/**
 * only: that device's part alone (the panel's summary of one device), else every device's; ends: the devices' states
 * at the end when the caller has them (a live capture's replay to its end is not done twice)
 */
export function snapshotSection(model: Model, only?: number, ends?: ReadonlyMap<number, AllocatorState>): SnapshotSectionJson {
  const extras = model.extras();
  const chosen = model.devices().filter((d) => only === undefined || d === only);
  const devices = chosen.map((device): SnapshotDeviceJson => {
    const segments = (ends?.get(device) ?? model.stateAt(device, Infinity)).segments;
    const mine = extras.devices.find((d) => d.device === device);
    const untraced = untracedBlocks(segments);
    return {
      device,
      pools: privatePools(segments).map((p) => ({
        pool_id: p.poolId,
        kind: p.kind,
        segments: p.segments,
        blocks: p.blocks,
        reserved_bytes: p.reservedBytes,
        allocated_bytes: p.allocatedBytes,
        active_bytes: p.activeBytes,
        requested_bytes: p.requestedBytes,
        free_bytes: p.freeBytes,
        largest_free_block_bytes: p.largestFreeBlockBytes,
        fragmentation: p.fragmentation,
      })),
      untraced_blocks: untraced.blocks,
      untraced_bytes: untraced.bytes,
      user_metadata: (mine?.userMetadata ?? []).map(tagged),
      compile_contexts: (mine?.compileContexts ?? []).map(tagged),
      annotations: annotationRanges(model.markersShared?.(device) ?? model.markers(device)),
    };
  });
  const h = extras.host && hostFigures(extras.host);
  return {
    allocator_settings: extras.allocatorSettings,
    devices,
    host: h && {
      segments: h.segments,
      blocks: h.blocks,
      allocated_blocks: h.allocatedBlocks,
      reserved_bytes: h.reservedBytes,
      allocated_bytes: h.allocatedBytes,
      active_bytes: h.activeBytes,
      requested_bytes: h.requestedBytes,
      cached_bytes: h.cachedBytes,
      largest_free_block_bytes: h.largestFreeBlockBytes,
      peak_allocated_bytes: h.peakAllocatedBytes,
      peak_at_time_us: h.peakAtTimeUs,
      events: h.events,
    },
    unknown_keys: extras.unknownKeys,
  };
}

const pct = (x: number) => `${(100 * x).toFixed(0)}%`;
const plural = (n: number, word: string) => `${n.toLocaleString('en-US')} ${word}${n === 1 ? '' : 's'}`;
const clip = (s: string, max: number) => (s.length > max ? s.slice(0, max - 1) + '…' : s);

/** "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, max_split_size=-1, …" (nested dicts as JSON). */
export function settingsLine(settings: Record<string, unknown>): string {
  return Object.entries(settings)
    .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
    .join(', ');
}

/** The text report's lines for the section, after the boxed table (empty parts left out). */
export function snapshotSectionText(s: SnapshotSectionJson): string[] {
  const out: string[] = [];
  for (const d of s.devices) {
    if (d.pools.length) {
      out.push(`Private pools on device ${d.device} (at the end; their free bytes serve only their own allocations):`);
      for (const p of d.pools)
        out.push(
          `  ${poolLabel(p.pool_id).padEnd(24)} reserved ${formatBytes(p.reserved_bytes).padStart(10)}  active ${formatBytes(p.active_bytes).padStart(10)}  free ${formatBytes(p.free_bytes).padStart(10)}  fragmentation ${pct(p.fragmentation)}  (${plural(p.segments, 'segment')})`,
        );
    }
    if (d.untraced_blocks)
      out.push(`History unknown on device ${d.device}: ${plural(d.untraced_blocks, 'block')} (${formatBytes(d.untraced_bytes)}) allocated with no allocation in the trace (made before recording began)`);
    // user_metadata's text is the summary's "Memory labels" section (one table for pickles and captures alike);
    // --json keeps it here too, with each value's first and last time.
    if (d.compile_contexts.length) {
      out.push(`Compile contexts on device ${d.device} (torch.compile), allocations tagged:`);
      for (const t of d.compile_contexts) out.push(`  ${clip(t.value, 48).padEnd(48)} ${plural(t.allocations, 'allocation').padStart(16)}  ${formatBytes(t.bytes).padStart(10)}`);
    }
    if (d.annotations.length) out.push(`Annotations on device ${d.device}: ${d.annotations.map((a) => `${a.name} ×${a.ranges}`).join(', ')}`);
  }
  if (s.host) {
    const h = s.host;
    out.push('Pinned host memory (host_segments; not device memory):');
    out.push(`  pinned (reserved)     ${formatBytes(h.reserved_bytes).padStart(10)}  ${plural(h.segments, 'segment')}`);
    out.push(`  allocated             ${formatBytes(h.allocated_bytes).padStart(10)}  ${plural(h.allocated_blocks, 'block')} of ${h.blocks}`);
    out.push(`  cached, not in use    ${formatBytes(h.cached_bytes).padStart(10)}`);
    out.push(`  peak allocated        ${formatBytes(h.peak_allocated_bytes).padStart(10)}  over ${plural(h.events, 'host trace event')}`);
  }
  if (s.allocator_settings) out.push(`Allocator settings: ${settingsLine(s.allocator_settings)}`);
  if (s.unknown_keys.length) {
    out.push('Keys this reader does not know (kept; first value shown raw):');
    for (const u of s.unknown_keys) out.push(`  ${u.where}.${u.key} (${plural(u.count, 'time')}): ${clip(u.raw, 160)}`);
  }
  return out;
}
