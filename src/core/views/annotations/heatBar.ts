// The heat bar drawn at the start of an annotated line (the pseudo-gutter): from a line's share of the
// device's peak to one of a small fixed set of bar kinds, so the glue creates each decoration type once and
// only hands out ranges. No vscode import.
import { tierFor, type AnnotationTier } from './annotate';

/** How many lengths a bar can have; each step stands for 1/BAR_STEPS of the peak. */
export const BAR_STEPS = 8;

// The pseudo-gutter's geometry, in ch of the editor font (the glue draws it; the E2E test measures it).
/** one step of the bar */
export const BAR_STEP_CH = 0.3;
/** gap between the editor's left edge and the bar */
export const BAR_LEFT_CH = 0.2;
/** the room every line gets: the gap, the longest bar, a gap before the code */
export const GUTTER_CH = BAR_LEFT_CH + BAR_STEPS * BAR_STEP_CH + 0.6;

export interface HeatBar {
  /**
   * Length in steps, 1..BAR_STEPS: a line holding a share s of the peak (0 < s) gets ⌈s × BAR_STEPS⌉ steps,
   * so a full bar is the whole peak and any line that holds bytes at the peak shows at least one step.
   * 0: the line allocated but held nothing at the peak (a transient): drawn as a hollow one-step outline,
   * like the text's hollow marker △.
   */
  steps: number;
  /** the colour: the same tier as the line's end-of-line text (Note [Annotation tiers]) */
  tier: AnnotationTier;
}

// Note [Heat bar buckets]: the length is linear in the share of the peak (a bar twice as long holds twice
// the memory; a log scale would make a 2% line look like a 30% one), and rounds *up*, so a visible bar
// never understates a line: a line of 13% shows two steps of 12.5%. The colour follows the text's tier
// thresholds (≥25% high, 5–25% medium, <5% low) rather than a ramp of its own, so bar and text never
// disagree about how heavy a line is. Both together make a small fixed set (HEAT_BAR_KINDS).
export function heatBarFor(shareOfPeak: number): HeatBar {
  if (!(shareOfPeak > 0)) return { steps: 0, tier: 'low' }; // 0, negative or NaN: nothing live at the peak
  const steps = Math.min(BAR_STEPS, Math.max(1, Math.ceil(shareOfPeak * BAR_STEPS - 1e-9)));
  return { steps, tier: tierFor(Math.min(1, shareOfPeak)) };
}

/** Stable key of a bar kind (one decoration type per key). */
export function heatBarKey(bar: HeatBar): string {
  return `${bar.tier}-${bar.steps}`;
}

/**
 * Every bar kind heatBarFor can return, in increasing order of share: the decoration types to create.
 * Found by walking the share through every step's bounds and every tier threshold.
 */
export const HEAT_BAR_KINDS: readonly HeatBar[] = (() => {
  const shares = new Set<number>([0]);
  const eps = 1e-6;
  for (let k = 1; k <= BAR_STEPS; k++) for (const s of [(k - 1) / BAR_STEPS + eps, k / BAR_STEPS]) shares.add(s);
  for (const s of [0.05, 0.25]) for (const d of [-eps, 0]) shares.add(s + d);
  const seen = new Map<string, HeatBar>();
  for (const s of [...shares].sort((a, b) => a - b)) {
    const bar = heatBarFor(s);
    seen.set(heatBarKey(bar), bar);
  }
  return [...seen.values()];
})();
