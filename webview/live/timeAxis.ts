// The live chart's time axis: seconds elapsed since the session's origin (LiveRunView.originS), never
// calendar dates. Pure (no DOM, no uPlot) so unit tests check the labels.
//
// Note [Elapsed time axis]: a run lasts seconds to hours, and a user asks "how far into the run", not "at
// what o'clock". Labels keep one style across an axis, chosen by how long the chart spans: under a minute
// plain seconds ("0 s", "2.5 s"), under an hour m:ss ("1:30"), beyond h:mm:ss ("1:02:00"). Tick spacing
// comes from ELAPSED_INCRS: decimal steps under a second, then steps that divide a minute and an hour.

/** Tick increments in seconds, for uPlot's `incrs`. */
export const ELAPSED_INCRS: readonly number[] = [
  0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.25, 0.5,
  1, 2, 5, 10, 15, 30,
  60, 120, 300, 600, 900, 1800,
  3600, 7200, 3 * 3600, 6 * 3600, 12 * 3600, 24 * 3600,
];

/** Decimals that show an increment exactly (0.25 → 2, 0.5 → 1, 5 → 0). */
function decimalsOf(incr: number): number {
  for (let d = 0; d <= 3; d++) if (Math.abs(Math.round(incr * 10 ** d) - incr * 10 ** d) < 1e-6) return d;
  return 3;
}

function pad2(n: number): string {
  return n < 10 ? `0${n}` : String(n);
}

/** m:ss or h:mm:ss of `seconds` (≥ 0), with `decimals` digits of the seconds. */
function clock(seconds: number, decimals: number, withHours: boolean): string {
  const scale = 10 ** decimals;
  const total = Math.round(seconds * scale) / scale;
  const h = Math.floor(total / 3600);
  const m = Math.floor((total - h * 3600) / 60);
  const s = total - h * 3600 - m * 60;
  const sText = decimals > 0 ? s.toFixed(decimals).padStart(decimals + 3, '0') : pad2(Math.round(s));
  return withHours ? `${h}:${pad2(m)}:${sText}` : `${h * 60 + m}:${sText}`;
}

/**
 * Labels of the ticks `values` (seconds since the origin), `incr` apart, on an axis whose largest value is
 * `spanMax` seconds.
 */
export function elapsedTickLabels(values: readonly number[], incr: number, spanMax: number): string[] {
  const decimals = decimalsOf(incr);
  return values.map((v) => {
    const sign = v < 0 ? '−' : '';
    const a = Math.abs(v);
    if (spanMax < 60) return `${sign}${a.toFixed(decimals)} s`;
    return sign + clock(a, decimals, spanMax >= 3600);
  });
}

/** One moment (the cursor's), to the millisecond: "3.142 s", "1:02.500", "1:02:03.000". */
export function elapsedText(seconds: number): string {
  if (!Number.isFinite(seconds)) return '—';
  const sign = seconds < 0 ? '−' : '';
  const a = Math.round(Math.abs(seconds) * 1000) / 1000; // round first: 59.9996 s is 1:00.000
  if (a < 60) return `${sign}${a.toFixed(3)} s`;
  return sign + clock(a, 3, a >= 3600);
}
