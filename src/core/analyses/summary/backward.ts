// `gpumem summary`'s backward peak: the highest point allocated memory reached while a backward ran, and the forward
// lines whose ops' backward made what was live then (Note [Linked backward stacks] in
// src/core/base/model/types.ts), in text and in --json.
//
// Note [Backward peak in the summary]: per device, `backward_peak_bytes` (null when no backward ran) and
// `backward_by_forward_line` (file, line, module, bytes, count, recomputed_bytes, and name where the reader gives it;
// largest first, as the reader gives them: at most 20, the bytes no forward op is linked to on the backward() line
// with module "") are always there; the moment and the split of what backward made come only with a backward peak.
// The text shows exactly these fields (Note [Report figures] in ./report.ts).
import type { Model } from '../../base/model/types';
import { formatBytes } from '../../base/units/bytes';
import { formatSeconds, jsonSeconds, type TimeBase } from '../steps/timebase';

export interface BackwardLineJson {
  file: string;
  line: number;
  /** the line's function, where the reader gives it */
  name?: string;
  /** the forward op's module path, "" when unknown (and for the bytes no forward op is linked to) */
  module: string;
  bytes: number;
  count: number;
  recomputed_bytes: number;
}

export interface BackwardPeakJson {
  /** allocated bytes at the highest point reached while a backward ran; null: no backward ran */
  backward_peak_bytes: number | null;
  backward_by_forward_line: BackwardLineJson[];
  backward_peak_time_us?: number;
  backward_peak_t_s?: number;
  backward_peak_step?: number | null;
  /** of backward_peak_bytes, bytes made during backward and live then */
  backward_made_bytes?: number;
  /** of those, bytes linked to a forward op */
  backward_linked_bytes?: number;
  /** of those, bytes made by recomputation under activation checkpointing */
  backward_recomputed_bytes?: number;
}

export function backwardPeakJson(model: Model, device: number, time: TimeBase): BackwardPeakJson {
  const p = model.backwardPeak(device);
  if (!p) return { backward_peak_bytes: null, backward_by_forward_line: [] };
  return {
    backward_peak_bytes: p.peakBytes,
    backward_by_forward_line: p.lines.map((l) => ({
      file: l.file,
      line: l.line,
      ...(l.name ? { name: l.name } : {}),
      module: l.module,
      bytes: l.bytes,
      count: l.count,
      recomputed_bytes: l.recomputedBytes,
    })),
    backward_peak_time_us: p.timeUs,
    backward_peak_t_s: jsonSeconds(time.seconds(p.timeUs)),
    backward_peak_step: time.stepAt(p.timeUs) ?? null,
    backward_made_bytes: p.madeInBackwardBytes,
    backward_linked_bytes: p.linkedBytes,
    backward_recomputed_bytes: p.recomputedBytes,
  };
}

/** Adds the backward peak's fields to every device of `summary` (the hook summarizeFile calls). */
export function addBackwardPeak(model: Model, summary: { devices: ({ device: number } & Partial<BackwardPeakJson>)[] }, time: TimeBase): void {
  for (const d of summary.devices) Object.assign(d, backwardPeakJson(model, d.device, time));
}

const WIDTH = 77;

/** The "Backward peak" section: one block per device where a backward ran. */
export function backwardPeakText(summary: { devices: ({ device: number } & Partial<BackwardPeakJson>)[] }, topLines = 10): string[] {
  const out: string[] = [];
  for (const d of summary.devices) {
    if (d.backward_peak_bytes === null || d.backward_peak_bytes === undefined) continue;
    const step = d.backward_peak_step === null || d.backward_peak_step === undefined ? '' : ` (step ${d.backward_peak_step})`;
    const at = d.backward_peak_t_s === undefined ? '' : ` at ${formatSeconds(d.backward_peak_t_s)}${step}`;
    out.push(`Backward peak on device ${d.device}: ${formatBytes(d.backward_peak_bytes)} allocated${at}, while a backward ran`);
    const made = d.backward_made_bytes ?? 0;
    const parts = [`${formatBytes(d.backward_linked_bytes ?? 0)} by the backward of forward lines`];
    if (d.backward_recomputed_bytes) parts.push(`${formatBytes(d.backward_recomputed_bytes)} recomputed (activation checkpointing)`);
    out.push(`  made during backward and live then: ${formatBytes(made)}, of it ${parts.join(', ')}`);
    const lines = d.backward_by_forward_line ?? [];
    if (!lines.length) continue;
    out.push('  By forward line (the line whose op\'s backward made them; share of what backward made, module, recomputed):');
    for (const l of lines.slice(0, topLines)) {
      const share = made > 0 ? `${((100 * l.bytes) / made).toFixed(1)}%` : '';
      const recomputed = l.recomputed_bytes > 0 ? `  recomputed ${Math.round((100 * l.recomputed_bytes) / l.bytes)}%` : '';
      const tail = `  ${l.module || '—'}${recomputed}`;
      const where = shorten(`${l.file}:${l.line}`, Math.max(24, WIDTH - 22 - tail.length));
      out.push(`  ${formatBytes(l.bytes).padStart(10)} ${share.padStart(6)}  ${where}${tail}`);
    }
    if (lines.length > topLines) out.push(`  … ${lines.length - topLines} more lines (--json lists them)`);
  }
  return out;
}

/** Keeps the end of a long path (the file name and line matter most). */
function shorten(s: string, max: number): string {
  return s.length <= max ? s : '…' + s.slice(s.length - max + 1);
}
