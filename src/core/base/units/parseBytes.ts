// Sizes typed by a user (`--capacity 80GiB`): binary units only, like everything the tool prints.
// Note [Size input]: K/M/G/T and KiB/MiB/GiB/TiB both mean powers of 1024 (PyTorch's and nvidia-smi's
// sense); "GB"-style decimal units are refused rather than guessed, since 80 GB and 80 GiB differ by 5.4 GiB.
const POWERS: Record<string, number> = { '': 0, b: 0, k: 1, kib: 1, m: 2, mib: 2, g: 3, gib: 3, t: 4, tib: 4 };

/** Bytes for "85899345920", "80GiB", "80 GiB", "1.5g"; throws an Error that says what is accepted. */
export function parseBytes(text: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$/.exec(text);
  const unit = m?.[2].toLowerCase() ?? '';
  if (!m || !(unit in POWERS)) {
    const decimal = m && /^[kmgt]b$/.test(unit) ? ` (${m[2]} is decimal; write ${m[2][0].toUpperCase()}iB)` : '';
    throw new Error(`"${text}" is not a size${decimal}: write bytes (85899345920) or a binary unit (80GiB, 512MiB, 1.5TiB)`);
  }
  const bytes = Number(m[1]) * 1024 ** POWERS[unit];
  if (!Number.isSafeInteger(Math.round(bytes)) || bytes <= 0) throw new Error(`"${text}" is not a positive size in range`);
  if (!Number.isInteger(bytes)) throw new Error(`"${text}" is not a whole number of bytes`);
  return bytes;
}
