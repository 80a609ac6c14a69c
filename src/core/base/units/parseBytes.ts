// Sizes typed by a user (`--capacity 80GiB`, `--budget 256MiB`, the gpuMemoryLens.captureBudget setting): binary
// units only, like everything the tool prints.
// Note [Size input]: K/M/G/T and KiB/MiB/GiB/TiB both mean powers of 1024 (PyTorch's and nvidia-smi's
// sense); "GB"-style decimal units are refused rather than guessed, since 80 GB and 80 GiB differ by 5.4 GiB.
// The bootstrap reads sizes by the same rule (readSize in native/python/gpumem/_settings.py), and
// test/unit/settings.test.mjs gives both the same texts.
const POWERS: Record<string, number> = { '': 0, b: 0, k: 1, kib: 1, m: 2, mib: 2, g: 3, gib: 3, t: 4, tib: 4 };
const SIZE = /^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$/;

/** What a size setting's text may look like (package.json's `pattern`): what readSize reads, and `none` if asked. */
export function sizePattern(none: boolean): string {
  return `^\\s*(${none ? '[Nn][Oo][Nn][Ee]|' : ''}\\d+(\\.\\d+)?\\s*([KkMmGgTt]([Ii][Bb])?|[Bb])?)\\s*$`;
}

/** What is wrong with a size text, in a few words (readSize's answer when it is not a size). */
export const SIZE_PROBLEMS = {
  notASize: 'write bytes (85899345920) or a binary unit (80GiB, 512MiB, 1.5TiB)',
  decimal: (unit: string) => `${unit} is decimal; write ${unit[0].toUpperCase()}iB`,
  notWhole: 'not a whole number of bytes',
  tooLarge: 'too large',
} as const;

/** Bytes for "85899345920", "80GiB", "80 GiB", "1.5g", "0"; or, when the text is not a size, why not. */
export function readSize(text: string): number | string {
  const m = SIZE.exec(text);
  const unit = m?.[2].toLowerCase() ?? '';
  if (!m || !(unit in POWERS)) return m && /^[kmgt]b$/.test(unit) ? SIZE_PROBLEMS.decimal(m[2]) : SIZE_PROBLEMS.notASize;
  const bytes = Number(m[1]) * 1024 ** POWERS[unit];
  if (!Number.isSafeInteger(Math.round(bytes))) return SIZE_PROBLEMS.tooLarge;
  if (!Number.isInteger(bytes)) return SIZE_PROBLEMS.notWhole;
  return bytes;
}

/** Bytes for "85899345920", "80GiB", "80 GiB", "1.5g"; throws an Error that says what is accepted. */
export function parseBytes(text: string): number {
  const got = readSize(text);
  if (got === SIZE_PROBLEMS.notASize) throw new Error(`"${text}" is not a size: ${SIZE_PROBLEMS.notASize}`);
  if (typeof got === 'string' && got !== SIZE_PROBLEMS.notWhole && got !== SIZE_PROBLEMS.tooLarge) throw new Error(`"${text}" is not a size (${got}): ${SIZE_PROBLEMS.notASize}`);
  if (got === SIZE_PROBLEMS.tooLarge || got === 0) throw new Error(`"${text}" is not a positive size in range`);
  if (typeof got === 'string') throw new Error(`"${text}" is not a whole number of bytes`);
  return got;
}

/** 1073741824 → "1GiB" (`sep` ' ': "1 GiB"): the largest binary unit that divides the size exactly. */
export function formatSize(bytes: number, sep = ''): string {
  const units = ['', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (i < units.length - 1 && bytes >= 1024 && bytes % 1024 === 0) {
    bytes /= 1024;
    i++;
  }
  return units[i] ? `${bytes}${sep}${units[i]}` : String(bytes);
}
