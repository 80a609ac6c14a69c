// What the live panel and the status bar show, computed from a Model (no vscode, no DOM).
import type { Model } from '../../base/model/types';
import type { LiveFigures, LiveMarker, LiveSeries, LiveTrack } from '../../base/protocol/live';

/**
 * Figures of one device; device used and the unattributed remainder only when the capture has NVML samples, both
 * from one sample with its own reserved (Note [Device samples of a moment] in native/addon/src/samples.cpp): the
 * remainder is that sample's device used − its reserved, and device used is shown only while that sample is of now
 * (reserved has not changed since), so it never reads below the reserved shown beside it; until the next sample it
 * is "—" (deviceUsedPending).
 */
export function figuresOf(model: Model, device: number): LiveFigures {
  const c = model.current(device);
  const f: LiveFigures = {
    allocatedBytes: c.allocatedBytes,
    reservedBytes: c.reservedBytes,
    peakAllocatedBytes: c.peakAllocatedBytes,
    peakReservedBytes: c.peakReservedBytes,
  };
  if (c.deviceSample) {
    if (c.deviceUsedBytes !== undefined) f.deviceUsedBytes = c.deviceUsedBytes;
    else f.deviceUsedPending = true;
    f.unattributedBytes = c.deviceSample.usedBytes - c.deviceSample.reservedBytes;
  }
  if (c.deviceTotalBytes !== undefined) f.deviceTotalBytes = c.deviceTotalBytes;
  return f;
}

function finiteOrNull(v: number | undefined): number | null {
  return v === undefined || !Number.isFinite(v) ? null : v;
}

/**
 * The device's whole timeline in `buckets` buckets. Each bucket reports its maximum, so a short spike
 * (the peak a user is hunting for) survives any zoom level; t is the bucket's start in epoch seconds.
 */
export function seriesOf(model: Model, device: number, buckets: number): LiveSeries {
  const { t0Us, t1Us } = model.timeRange(device);
  const empty: LiveSeries = { t: [], allocated: [], reserved: [], deviceUsed: [] };
  if (!(t1Us >= t0Us) || !Number.isFinite(t0Us)) return empty;
  // A capture with one event has t0 == t1: one bucket still shows it.
  const n = t1Us > t0Us ? Math.max(1, Math.floor(buckets)) : 1;
  const tl = model.timeline(device, t0Us, Math.max(t1Us, t0Us + 1), n);
  const width = (tl.t1Us - tl.t0Us) / tl.buckets;
  const s: LiveSeries = { t: [], allocated: [], reserved: [], deviceUsed: [] };
  for (let i = 0; i < tl.buckets; i++) {
    s.t.push((tl.t0Us + i * width) / 1e6);
    s.allocated.push(finiteOrNull(tl.allocatedMax[i]));
    s.reserved.push(finiteOrNull(tl.reservedMax[i]));
    s.deviceUsed.push(finiteOrNull(tl.deviceUsedMax?.[i]));
  }
  return s;
}

/** The model's markers plus its OOMs (a reader may report those only through ooms()). */
export function markersOf(model: Model, device: number): LiveMarker[] {
  const out: LiveMarker[] = model.markers(device).map((m) => ({ t: m.timeUs / 1e6, kind: m.kind, label: m.label }));
  const oomTimes = new Set(out.filter((m) => m.kind === 'oom').map((m) => m.t));
  for (const o of model.ooms()) {
    if (o.device !== device || oomTimes.has(o.timeUs / 1e6)) continue;
    out.push({ t: o.timeUs / 1e6, kind: 'oom', label: 'OOM' });
  }
  return out.sort((a, b) => a.t - b.t);
}

export interface TrackIdentity {
  pid: number;
  rank?: number;
  running: boolean;
}

export function trackOf(model: Model, device: number, id: TrackIdentity, buckets: number): LiveTrack {
  const name = model.header().devices.find((d) => d.index === device)?.name;
  const parts = [] as string[];
  if (id.rank !== undefined) parts.push(`rank ${id.rank}`);
  parts.push(`cuda:${device}${name ? ` ${name}` : ''}`);
  parts.push(`pid ${id.pid}`);
  const track: LiveTrack = {
    key: `${id.pid}/${device}`,
    label: parts.join(' · '),
    pid: id.pid,
    device,
    running: id.running,
    figures: figuresOf(model, device),
    series: seriesOf(model, device, buckets),
    markers: markersOf(model, device),
  };
  if (id.rank !== undefined) track.rank = id.rank;
  return track;
}
