// Binary units everywhere, like PyTorch's memory_summary (KiB = 1024 B, MiB = 1024 KiB, …).
// Note [Byte formatting]: three significant digits (1.50 GiB, 312 MiB, 20.0 KiB); plain bytes below 1 KiB.
const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'] as const;

export function formatBytes(bytes: number): string {
  if (!Number.isFinite(bytes)) return String(bytes);
  const sign = bytes < 0 ? '-' : '';
  let v = Math.abs(bytes);
  if (v < 1024) return `${sign}${Math.round(v)} B`;
  let u = 0;
  while (v >= 1024 && u < UNITS.length - 1) {
    v /= 1024;
    u++;
  }
  // Rounding can carry into the next unit (1023.99 KiB → "1024 KiB"); move up instead.
  let text = v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2);
  if (Number(text) >= 1024 && u < UNITS.length - 1) {
    u++;
    text = (v / 1024).toFixed(2);
  }
  return `${sign}${text} ${UNITS[u]}`;
}

/** Signed delta with an explicit + for growth (for diffs). */
export function formatBytesDelta(bytes: number): string {
  return bytes > 0 ? `+${formatBytes(bytes)}` : formatBytes(bytes);
}
