// Band colours: one per call stack, so the same line keeps its colour across zoom levels and panels.
// Note [Palette]: a fixed qualitative palette (Tableau 10 + lighter tones) reads on dark and light themes;
// theme variables cannot drive per-pixel raster writes, so only overlays use --vscode-* colours.
const HEX = [
  '4e79a7', 'f28e2b', 'e15759', '76b7b2', '59a14f', 'edc948', 'b07aa1', 'ff9da7', '9c755f', 'bab0ac',
  'a0cbe8', 'ffbe7d', 'ff9d9a', '86bcb6', '8cd17d', 'f1ce63', 'd4a6c8', 'fabfd2', 'd7b5a6', '79706e',
];

/** RGBA packed for a little-endian Uint32Array view of ImageData (0xAABBGGRR). */
export const PALETTE32 = Uint32Array.from(HEX, (hex) => {
  const r = parseInt(hex.slice(0, 2), 16);
  const g = parseInt(hex.slice(2, 4), 16);
  const b = parseInt(hex.slice(4, 6), 16);
  return (0xff << 24) | (b << 16) | (g << 8) | r;
});

export const PALETTE_CSS = HEX.map((x) => `#${x}`);

export function colorIndex(stackId: number, index: number): number {
  // Unknown stacks (0) take their band index so neighbours still differ.
  const key = stackId > 0 ? stackId : index;
  return ((key * 2654435761) >>> 0) % HEX.length;
}

// Note [Owner colours]: the timeline's owner groups (TimelineOwners) and the sites table share these:
// group g < 12 is the g-th top line, then "other lines" and "before the trace". No grey among them (grey
// would read as "unknown"), no two alike.
const OWNER_HEX = [
  '4e79a7', 'f28e2b', 'e15759', '76b7b2', '59a14f', 'edc948', 'b07aa1', 'ff9da7', '9c755f', 'a0cbe8',
  'ffbe7d', '8cd17d',
];
const OTHER_LINES_HEX = 'd7b5a6';
const BEFORE_TRACE_HEX = 'd4a6c8';

function pack(hex: string, mix = 0): number {
  // mix > 0 lightens towards white, < 0 darkens (fraction).
  const ch = (k: number) => {
    const v = parseInt(hex.slice(k, k + 2), 16);
    return Math.round(mix >= 0 ? v + (255 - v) * mix : v * (1 + mix));
  };
  return (0xff << 24) | (ch(4) << 16) | (ch(2) << 8) | ch(0);
}

/** The colour of owner group g of `groups` (CSS), e.g. for the sites table's swatches. */
export function ownerCss(g: number, groups: number): string {
  return `#${ownerHex(g, groups)}`;
}

function ownerHex(g: number, groups: number): string {
  if (g === groups - 1) return BEFORE_TRACE_HEX;
  if (g === groups - 2 || g >= OWNER_HEX.length) return OTHER_LINES_HEX;
  return OWNER_HEX[g];
}

/** Raster colours of each owner group: [band, alternate band, aggregate] (0xAABBGGRR). */
export function ownerRaster(groups: number): { band: Uint32Array; alt: Uint32Array; aggregate: Uint32Array } {
  const hex = Array.from({ length: groups }, (_, g) => ownerHex(g, groups));
  return {
    band: Uint32Array.from(hex, (x) => pack(x)),
    // Neighbouring allocations of one owner alternate in shade so their edges stay visible.
    alt: Uint32Array.from(hex, (x) => pack(x, -0.18)),
    // Memory drawn as one band per owner is lighter than the allocations drawn alone.
    aggregate: Uint32Array.from(hex, (x) => pack(x, 0.45)),
  };
}
