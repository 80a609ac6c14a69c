// gpumem_compare: two recordings side by side at their peaks: the figures, what the memory is, and the lines whose
// memory live at the peak changed. The snapshot panel compares two files at their ends; an assistant is asked about
// peaks (the peak decides an OOM), so this compares each file's lines at its own peak, by the per-line statistics.
import type { Model } from '../../../base/model/types';
import { timeBaseOf } from '../../../analyses/steps/timebase';
import { categoryFields, commandLine, pickDevice, when } from './common';
import type { Recording } from './subject';

const LINES_SHOWN = 10;

function side(rec: Recording, device: number) {
  const model = rec.model;
  const time = timeBaseOf(model);
  const dev = model.summary().devices.find((d) => d.device === device);
  const figures = model.current(device);
  const report = model.categories(device, [], false);
  const argv = model.header().argv;
  return {
    file: rec.file,
    ...(rec.note ? { about: rec.note } : {}),
    ...(argv?.length ? { command: commandLine(argv) } : {}),
    device,
    peak_allocated_bytes: dev?.peak_allocated_bytes ?? figures.peakAllocatedBytes,
    peak_reserved_bytes: figures.peakReservedBytes,
    ...(dev && dev.events > 0 ? { peak: when(time, dev.peak_at_time_us) } : {}),
    ...(report.peak ? { at_peak: categoryFields(report.peak.bytes) } : {}),
    ...(time.steps.steps.length ? { steps: time.steps.steps.length } : {}),
  };
}

function delta(a: Record<string, number> | undefined, b: Record<string, number> | undefined): Record<string, number> {
  const out: Record<string, number> = {};
  for (const k of new Set([...Object.keys(a ?? {}), ...Object.keys(b ?? {})])) {
    const d = (b?.[k] ?? 0) - (a?.[k] ?? 0);
    if (d) out[k] = d;
  }
  return out;
}

export function compareAnswer(before: Recording, after: Recording, asked: { device?: number }): object {
  const da = pickDevice(before.model, before.file, asked.device);
  const db = pickDevice(after.model, after.file, asked.device);
  const a = side(before, da);
  const b = side(after, db);
  const rows = diffAtPeaks(before.model, da, after.model, db);
  let grew = 0;
  let shrank = 0;
  for (const r of rows) {
    if (r.deltaBytes > 0) grew += r.deltaBytes;
    else shrank -= r.deltaBytes;
  }
  return {
    before: a,
    after: b,
    change: {
      peak_allocated_bytes: b.peak_allocated_bytes - a.peak_allocated_bytes,
      peak_reserved_bytes: b.peak_reserved_bytes - a.peak_reserved_bytes,
      ...(Object.keys(delta(a.at_peak, b.at_peak)).length ? { at_peak: delta(a.at_peak, b.at_peak) } : {}),
    },
    lines_at_peak: {
      grew_bytes: grew,
      shrank_bytes: shrank,
      most_changed: rows.slice(0, LINES_SHOWN).map((r) => ({
        file: r.file,
        line: r.line,
        before_bytes: r.beforeBytes,
        after_bytes: r.afterBytes,
        change_bytes: r.deltaBytes,
      })),
      ...(rows.length > LINES_SHOWN ? { lines_changed: rows.length } : {}),
      ...(rows.length === 0 ? { no_change: "no line's memory live at the peak differs" } : {}),
    },
  };
}

/** Bytes live at each file's peak by line (the lines' self bytes at the peak, as gpumem_peak_lines gives them), compared. */
function diffAtPeaks(a: Model, da: number, b: Model, db: number): { file: string; line: number; beforeBytes: number; afterBytes: number; deltaBytes: number }[] {
  const rows = new Map<string, { file: string; line: number; beforeBytes: number; afterBytes: number; deltaBytes: number }>();
  const row = (file: string, line: number) => {
    const key = `${file}\0${line}`;
    let r = rows.get(key);
    if (!r) rows.set(key, (r = { file, line, beforeBytes: 0, afterBytes: 0, deltaBytes: 0 }));
    return r;
  };
  for (const l of a.lineStats(da)) if (l.selfBytesAtPeak) row(l.file, l.line).beforeBytes = l.selfBytesAtPeak;
  for (const l of b.lineStats(db)) if (l.selfBytesAtPeak) row(l.file, l.line).afterBytes = l.selfBytesAtPeak;
  const out = [...rows.values()].filter((r) => (r.deltaBytes = r.afterBytes - r.beforeBytes) !== 0);
  return out.sort((x, y) => Math.abs(y.deltaBytes) - Math.abs(x.deltaBytes) || x.file.localeCompare(y.file) || x.line - y.line);
}
