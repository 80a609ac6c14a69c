// Times as the snapshot panel writes them (axis ticks, moments): pure, so unit tests import it without a page.

/**
 * "12.345 s", "850 ms" or "120 µs", precise enough for the visible span (a span of a few µs gets tenths, so its
 * ticks do not all read "0 µs"). A tick a hair before the trace's start reads "0.0 s", not "-0.0 s".
 */
export function formatSeconds(us: number, spanUs: number): string {
  const fixed = (v: number, digits: number) => v.toFixed(digits).replace(/^-(0(\.0+)?)$/, '$1');
  if (spanUs >= 2e6) return `${fixed(us / 1e6, spanUs >= 2e7 ? 1 : 3)} s`;
  if (spanUs >= 2e3) return `${fixed(us / 1e3, 1)} ms`;
  return `${fixed(us, spanUs >= 20 ? 0 : 1)} µs`;
}

/** A moment since the start of the trace, in seconds (ms precision). */
export function atTime(us: number): string {
  return `${(us / 1e6).toFixed(3)} s`;
}
