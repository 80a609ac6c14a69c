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
