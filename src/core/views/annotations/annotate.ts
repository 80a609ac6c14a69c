// From per-line statistics (Model.lineStats) to what the editor shows at the end of each line.
// No vscode import: the glue (src/glue/annotations) turns these into decorations and hovers.
import type { LineStat } from '../../base/model/types';
import { formatBytes } from '../../base/units/bytes';

export type AnnotationTier = 'high' | 'medium' | 'low';

/** gpuMemoryLens.annotations.style: the end-of-line text, the heat bar at the start of the line, or both. */
export type AnnotationStyle = 'text' | 'bar' | 'both';
export const ANNOTATION_STYLES: readonly AnnotationStyle[] = ['text', 'bar', 'both'];

/** The setting's value, or 'both' (its default) for anything else a hand-edited settings.json may hold. */
export function annotationStyle(value: unknown): AnnotationStyle {
  return (ANNOTATION_STYLES as readonly unknown[]).includes(value) ? (value as AnnotationStyle) : 'both';
}

export interface LineAnnotation {
  file: string;
  /** 1-based, as in the capture */
  line: number;
  /** end-of-line text, e.g. "▲ 1.50 GiB at peak · 312 allocs" */
  text: string;
  tier: AnnotationTier;
  /** bytes the text reports (self bytes at peak, or total bytes for lines with nothing live at peak) */
  bytes: number;
  /** selfBytesAtPeak / peak allocated bytes, 0..1 */
  shareOfPeak: number;
  /** among the heaviest lines: gets an overview-ruler mark */
  heavy: boolean;
  stat: LineStat;
}

export interface AnnotateOptions {
  /** the device's peak allocated bytes (the denominator of the colour tier) */
  peakBytes: number;
  /** gpuMemoryLens.annotations.minBytes */
  minBytes: number;
  /** how many lines get an overview-ruler mark (default 10) */
  heavyCount?: number;
}

// Note [Annotation tiers]: the thresholds are the ones the manifest's colour descriptions promise
// (gpuMemoryLens.annotation.high ≥25% of peak, medium 5–25%, low <5%).
export const HIGH_SHARE = 0.25;
export const MEDIUM_SHARE = 0.05;

export function tierFor(shareOfPeak: number): AnnotationTier {
  if (shareOfPeak >= HIGH_SHARE) return 'high';
  if (shareOfPeak >= MEDIUM_SHARE) return 'medium';
  return 'low';
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

// Note [Which lines are annotated]: the headline number is the line's *self* bytes at the peak (its
// allocations still live when the device peaked): that is what a user can shrink by changing this line.
// A line whose allocations were all freed before the peak but that allocated at least minBytes in total
// (a transient, e.g. a temporary inside a loop) is still shown, with a hollow marker and its total, because
// it shapes the curve. Callers-only lines (inclusive but not self) are left to the hover of their callees:
// annotating every `model(x)` with the whole forward pass would drown the lines that allocate.
//
// Note [Forward and backward on one line]: since backward is linked to forward (Note [Linked backward stacks] in
// src/core/base/model/types.ts), a forward line such as `y = self.conv(x)` also holds what its ops' backward made,
// and the text splits the two: "▲ 1.20 GiB at peak · backward 800 MiB · 12 allocs", the first figure being the
// forward part (self − backward). A line whose bytes at the peak are all backward's (the backward() line, or a
// forward line whose own outputs were freed by then) says only "▲ backward 800 MiB at peak". The colour tier and the
// heat bar stay those of the line's self bytes: both parts are memory this line is the place to change.
export function annotationText(stat: LineStat): string {
  const allocs = plural(stat.allocCount, 'alloc');
  if (stat.selfBytesAtPeak > 0) {
    const { forward, backward } = forwardBackwardSplit(stat);
    if (backward === 0) return `▲ ${formatBytes(forward)} at peak · ${allocs}`;
    if (forward === 0) return `▲ backward ${formatBytes(backward)} at peak · ${allocs}`;
    return `▲ ${formatBytes(forward)} at peak · backward ${formatBytes(backward)} · ${allocs}`;
  }
  return `△ ${formatBytes(stat.totalAllocatedBytes)} allocated · ${allocs} · none live at peak`;
}

/** A line's self bytes at the peak in its forward part and the part made during backward (Note [Forward and backward on one line]). */
export function forwardBackwardSplit(stat: Pick<LineStat, 'selfBytesAtPeak' | 'backwardBytesAtPeak'>): { forward: number; backward: number } {
  const backward = Math.min(Math.max(0, stat.backwardBytesAtPeak), stat.selfBytesAtPeak);
  return { forward: stat.selfBytesAtPeak - backward, backward };
}

export function computeAnnotations(stats: readonly LineStat[], opts: AnnotateOptions): LineAnnotation[] {
  const minBytes = Math.max(0, opts.minBytes);
  const shown = stats.filter((s) => (s.selfBytesAtPeak > 0 ? s.selfBytesAtPeak >= minBytes : s.totalAllocatedBytes >= Math.max(minBytes, 1)));
  const heavyCount = opts.heavyCount ?? 10;
  const byWeight = [...shown].sort((a, b) => b.selfBytesAtPeak - a.selfBytesAtPeak);
  const heavy = new Set(byWeight.slice(0, heavyCount).filter((s) => s.selfBytesAtPeak > 0));
  return shown.map((stat) => {
    const shareOfPeak = opts.peakBytes > 0 ? stat.selfBytesAtPeak / opts.peakBytes : 0;
    return {
      file: stat.file,
      line: stat.line,
      text: annotationText(stat),
      tier: tierFor(shareOfPeak),
      bytes: stat.selfBytesAtPeak > 0 ? stat.selfBytesAtPeak : stat.totalAllocatedBytes,
      shareOfPeak,
      heavy: heavy.has(stat),
      stat,
    };
  });
}
