// `gpumem summary DIR…`: one row per rank of a multi-process run (torchrun, SLURM), from the captures in one or
// more session folders, and the ranks whose peak stands out.
//
// Note [Rank flags]: ranks of one data-parallel job should peak alike; the table flags the ranks that do not, and
// says how far apart they are. A rank is compared with a *reference* peak, the lower median of all the ranks'
// peak allocated bytes (sorted ascending, the element at index ⌊(N − 1) / 2⌋), and flagged when it is more than
// 10 % of the reference AND at least 64 MiB away from it (10 % of a small peak is noise, and 64 MiB of a 70 GiB
// peak is too): ▲ high above it, ▼ low below it. What that gives for small N:
// - N = 1: nothing to compare, no flag.
// - N = 2: the reference is the lower rank, so only the higher one can be flagged, "N MiB (x %) above rank R".
//   With two ranks neither is the odd one out, and flagging both (the midpoint as the bar) says nothing the
//   one flag does not; the higher-peak rank is the one that runs out of memory first, which is what a user
//   debugging DDP imbalance acts on.
// - N = 3: the reference is the middle rank; one rank apart from two that agree is the only one flagged.
// - N ≥ 4: the lower median. With an odd N it is the median; with an even N, the lower of the two middle peaks, so
//   one outlier never moves the bar (it is always one real rank's peak), and a job split in two halves flags the
//   upper half ▲, not all of it (the mean of the two middles would sit between the halves and flag every rank).
//   A single low rank among equal ones is still flagged ▼ (uneven sharding, or a rank that did less work).
// The caption's median stays the usual one (the mean of the two middle peaks for an even N).
import fs from 'node:fs';
import path from 'node:path';
import { captureIndex, openModel } from '../../base/model/open';
import { headerInfoOf } from '../../base/model/header';
import type { Model, PickleOverview } from '../../base/model/types';

export const OUTLIER_SHARE = 0.1;
export const OUTLIER_MIN_BYTES = 64 * 1024 * 1024;

export interface RankRow {
  file: string;
  host: string | null;
  rank: number | null;
  world_size: number | null;
  pid: number | null;
  /** the device this rank allocated on most (its peak's device) */
  device: number | null;
  device_name: string | null;
  peak_allocated_bytes: number;
  peak_reserved_bytes: number;
  ooms: number;
  top_line: { file: string; line: number; bytes_at_peak: number } | null;
  /** Note [Rank flags] */
  flag: 'high' | 'low' | null;
  /** peak allocated minus the reference peak (Note [Rank flags]): how far apart a flagged rank is */
  apart_bytes: number;
  problems: string[];
}

export interface RankTable {
  ranks: RankRow[];
  median_peak_allocated_bytes: number;
  /** the peak flags are measured from (Note [Rank flags]): the lower median */
  reference_peak_allocated_bytes: number;
  /** the rank whose peak that is (the first in rank order with it); null when the table is empty */
  reference_rank: number | null;
}

const CAPTURE = /\.(gpumem|capture)$/;

/** Capture files named by the arguments: files as given; folders searched (session folders, up to 3 levels). */
export function captureFiles(args: readonly string[]): string[] {
  const out: string[] = [];
  const walk = (dir: string, depth: number) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      const p = path.join(dir, e.name);
      if (e.isDirectory() && depth < 3) walk(p, depth + 1);
      else if (e.isFile() && CAPTURE.test(e.name)) out.push(p);
    }
  };
  for (const a of args) {
    if (fs.statSync(a).isDirectory()) walk(a, 0);
    else out.push(a);
  }
  return [...new Set(out)];
}

export function rankRow(file: string): RankRow {
  // Note [Rank row from the index]: a capture whose index carries the row is not opened at all.
  const fromIndex = rankRowOfIndex(file, captureIndex(file, 0));
  if (fromIndex) return fromIndex;
  const model = openModel(file);
  try {
    return rankRowOf(file, model);
  } finally {
    model.close();
  }
}

/** A rank's row from its open model (the panel reads captures on the reader's worker thread, then calls this). */
export function rankRowOf(file: string, model: Model): RankRow {
  const h = model.header();
  const summary = model.summary();
  // Note [Rank figures]: the devices with events, and those whose figures are PyTorch's samples (figures only, the
  // cudaMallocAsync backend: Note [Figures from stats] in native/addon/src/model.h), which have a peak but no event.
  const counted = summary.devices.filter((d) => d.events > 0 || d.peak_allocated_bytes > 0);
  const top = [...counted].sort((a, b) => b.peak_allocated_bytes - a.peak_allocated_bytes)[0];
  let reserved = 0;
  for (const d of counted) {
    const { t0Us, t1Us } = model.timeRange(d.device);
    const tl = model.timeline(d.device, t0Us, t1Us, 1);
    reserved = Math.max(reserved, tl.reservedMax[0] ?? 0);
  }
  const line = summary.top_lines[0];
  return row(file, h, {
    device: top?.device,
    peakAllocated: top?.peak_allocated_bytes ?? 0,
    peakReserved: reserved,
    ooms: model.ooms().length,
    line: line ? { file: line.file, line: line.line, bytes_at_peak: line.bytes_at_peak } : null,
    problems: model.problems().map((p) => p.message),
  });
}

/** One rank's row from its header and figures, however they were read (a full open or the index). */
function row(
  file: string,
  h: ReturnType<typeof headerInfoOf>,
  x: { device: number | undefined; peakAllocated: number; peakReserved: number; ooms: number; line: RankRow['top_line']; problems: string[] },
): RankRow {
  return {
    file,
    host: h.host ?? null,
    rank: h.rank ?? null,
    world_size: h.worldSize ?? null,
    pid: h.pid ?? null,
    device: x.device ?? null,
    device_name: (x.device !== undefined ? h.devices.find((d) => d.index === x.device)?.name : undefined) ?? null,
    peak_allocated_bytes: x.peakAllocated,
    peak_reserved_bytes: x.peakReserved,
    ooms: x.ooms,
    top_line: x.line,
    flag: null,
    apart_bytes: 0,
    problems: x.problems,
  };
}

/**
 * Note [Rank row from the index] (native/addon/src/capture_overview.cpp): the row rankRowOf gives, from a capture's
 * index alone (its overview with `row`, openCaptureIndexAsync); undefined when the index cannot give the same row: no
 * index or an older one without the row's sections, or a capture whose recorder lost events (the full open reports
 * each loss as a problem). The same figures by the same rules: the devices with events (a REC_OOM is an event of the
 * full open's) or with a peak from PyTorch's samples (Note [Rank figures]), the one with the highest peak allocated
 * first in device order, the highest peak reserved of those, every OOM, the first of the lines at the peak.
 * test/unit/rank-index.test.mjs holds it to rankRowOf on real captures.
 */
export function rankRowOfIndex(file: string, overview: PickleOverview | undefined): RankRow | undefined {
  const x = overview?.source === 'index' ? overview.row : undefined;
  if (!x || x.lostRecords > 0) return undefined;
  const h = headerInfoOf(
    x.header,
    x.deviceNames.map((d) => ({ index: d.device, name: d.name, totalBytes: d.totalBytes })),
  );
  const counted = x.devices.filter((d) => d.events + d.ooms > 0 || d.peakAllocatedBytes > 0); // Note [Rank figures]
  const top = [...counted].sort((a, b) => b.peakAllocatedBytes - a.peakAllocatedBytes)[0];
  const line = x.topLines[0];
  return row(file, h, {
    device: top?.device,
    peakAllocated: top?.peakAllocatedBytes ?? 0,
    peakReserved: counted.reduce((m, d) => Math.max(m, d.peakReservedBytes), 0),
    ooms: x.devices.reduce((n, d) => n + d.ooms, 0),
    line: line ? { file: line.file, line: line.line, bytes_at_peak: line.bytesAtPeak } : null,
    problems: [],
  });
}

export function rankTable(files: readonly string[]): RankTable {
  return tableOf(files.map(rankRow));
}

/** The rows in rank order, with the ranks that stand out flagged (Note [Rank flags]). */
export function tableOf(rows: readonly RankRow[]): RankTable {
  const ranks = [...rows]
    .sort((a, b) => (a.rank ?? Infinity) - (b.rank ?? Infinity) || a.file.localeCompare(b.file))
    .map((r) => ({ ...r, flag: null, apart_bytes: 0 }) as RankRow);
  const peaks = ranks.map((r) => r.peak_allocated_bytes).sort((a, b) => a - b);
  const median = peaks.length === 0 ? 0 : peaks.length % 2 ? peaks[(peaks.length - 1) / 2] : (peaks[peaks.length / 2 - 1] + peaks[peaks.length / 2]) / 2;
  const reference = peaks.length === 0 ? 0 : peaks[Math.floor((peaks.length - 1) / 2)];
  for (const r of ranks) {
    const d = r.peak_allocated_bytes - reference;
    r.apart_bytes = d;
    if (ranks.length > 1 && Math.abs(d) > OUTLIER_SHARE * reference && Math.abs(d) >= OUTLIER_MIN_BYTES) r.flag = d > 0 ? 'high' : 'low';
  }
  const ref = ranks.find((r) => r.peak_allocated_bytes === reference);
  return { ranks, median_peak_allocated_bytes: median, reference_peak_allocated_bytes: reference, reference_rank: ref?.rank ?? null };
}
