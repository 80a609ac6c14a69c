// `gpumem summary DIR…`: one row per rank of a multi-process run (torchrun, SLURM), from the captures in one or
// more session folders, and the ranks whose peak stands out.
//
// Note [Rank outliers]: ranks of one data-parallel job should peak alike. A rank is flagged when its peak
// allocated memory is more than 10 % and at least 64 MiB away from the median of the ranks (both: 10 % of a
// small peak is noise, and 64 MiB of a 70 GiB peak is too). High ranks are where an OOM will come first; low
// ranks often mean uneven sharding or a rank that did less work. The median (not the mean) keeps one outlier
// from moving the bar it is measured against.
import fs from 'node:fs';
import path from 'node:path';
import { openModel } from '../../base/model/open';
import type { Model } from '../../base/model/types';

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
  /** Note [Rank outliers] */
  flag: 'high' | 'low' | null;
  problems: string[];
}

export interface RankTable {
  ranks: RankRow[];
  median_peak_allocated_bytes: number;
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
  const top = summary.devices.filter((d) => d.events > 0).sort((a, b) => b.peak_allocated_bytes - a.peak_allocated_bytes)[0];
  let reserved = 0;
  for (const d of summary.devices) {
    if (d.events === 0) continue;
    const { t0Us, t1Us } = model.timeRange(d.device);
    const tl = model.timeline(d.device, t0Us, t1Us, 1);
    reserved = Math.max(reserved, tl.reservedMax[0] ?? 0);
  }
  const line = summary.top_lines[0];
  return {
    file,
    host: h.host ?? null,
    rank: h.rank ?? null,
    world_size: h.worldSize ?? null,
    pid: h.pid ?? null,
    device: top?.device ?? null,
    device_name: (top && h.devices.find((d) => d.index === top.device)?.name) ?? null,
    peak_allocated_bytes: top?.peak_allocated_bytes ?? 0,
    peak_reserved_bytes: reserved,
    ooms: model.ooms().length,
    top_line: line ? { file: line.file, line: line.line, bytes_at_peak: line.bytes_at_peak } : null,
    flag: null,
    problems: model.problems().map((p) => p.message),
  };
}

export function rankTable(files: readonly string[]): RankTable {
  return tableOf(files.map(rankRow));
}

/** The rows in rank order, with the outliers flagged (Note [Rank outliers]). */
export function tableOf(rows: readonly RankRow[]): RankTable {
  const ranks = [...rows].sort((a, b) => (a.rank ?? Infinity) - (b.rank ?? Infinity) || a.file.localeCompare(b.file));
  const peaks = ranks.map((r) => r.peak_allocated_bytes).sort((a, b) => a - b);
  const median = peaks.length === 0 ? 0 : peaks.length % 2 ? peaks[(peaks.length - 1) / 2] : (peaks[peaks.length / 2 - 1] + peaks[peaks.length / 2]) / 2;
  if (ranks.length > 1) {
    for (const r of ranks) {
      const d = r.peak_allocated_bytes - median;
      if (Math.abs(d) > OUTLIER_SHARE * median && Math.abs(d) >= OUTLIER_MIN_BYTES) r.flag = d > 0 ? 'high' : 'low';
    }
  }
  return { ranks, median_peak_allocated_bytes: median };
}
