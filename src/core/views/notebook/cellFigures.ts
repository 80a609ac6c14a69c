// What a notebook cell shows of its figures (Note [Cell figures] in native/python/gpumem/_ipython.py): the status-bar
// text, its tooltip, and the names of the top lines at the cell's peak. Pure: the glue (src/glue/notebook) puts them
// on the cell.
import type { CellFigures, CellLine } from '../../base/kernel/protocol';
import { formatBytes, formatBytesDelta } from '../../base/units/bytes';

/**
 * "GPU peak 2.00 MiB above 1.00 MiB · allocated +1.00 MiB · reserved +22.0 MiB": the cell's own peak above what was
 * live at its start (Note [Cell figures]); no figures before CUDA was used: "no memory used".
 */
export function cellStatusText(f: CellFigures): string {
  if (f.device === null) return 'GPU: no memory used';
  return `GPU peak ${formatBytes(f.peak_allocated)} above ${formatBytes(f.allocated_before)} · allocated ${signed(f.added_allocated)} · reserved ${signed(f.added_reserved)}`;
}

function signed(n: number): string {
  return n === 0 ? '+0 B' : formatBytesDelta(n);
}

/**
 * Note [Cell files] (native/python/gpumem/_kernel.py): each execution is compiled as its own file in the session
 * folder. CellFiles remembers which cell (by a key the glue chooses: the cell document's URI) and which execution
 * count each file is, so a frame in a capture names its cell: "cell [3] line 2".
 */
export class CellFiles {
  private readonly byFile = new Map<string, { cell: string; count: number | undefined }>();
  private readonly latest = new Map<string, string>();

  add(file: string, cell: string): void {
    this.byFile.set(file, { cell, count: undefined });
    this.latest.set(cell, file);
  }

  /** the execution count the kernel gave the run compiled as `file` */
  setCount(file: string, count: number): void {
    const e = this.byFile.get(file);
    if (e) e.count = count;
  }

  cellOf(file: string): { cell: string; count: number | undefined } | undefined {
    return this.byFile.get(file);
  }

  /** the file the cell's latest execution was compiled as: its lines' frames in the capture */
  latestFile(cell: string): string | undefined {
    return this.latest.get(cell);
  }

  clear(): void {
    this.byFile.clear();
    this.latest.clear();
  }
}

/** "cell [3] line 2" for a cell's own file, else "train.py:14" (the path's last part). */
export function lineLabel(l: Pick<CellLine, 'file' | 'line'>, files: CellFiles): string {
  const c = files.cellOf(l.file);
  if (c) return `cell [${c.count ?? '?'}] line ${l.line}`;
  const base = l.file.split(/[\\/]/).pop() || l.file;
  return `${base}:${l.line}`;
}

/** The tooltip: the figures in full and the top lines at the cell's peak. */
export function cellTooltip(f: CellFigures, files: CellFiles): string {
  if (f.device === null) return 'This cell used no GPU memory (CUDA was not initialised).';
  const all = f.max_memory_allocated === undefined ? '' : `${formatBytes(f.max_memory_allocated)} in all, `;
  const out = [
    `peak allocated ${formatBytes(f.peak_allocated)} above the ${formatBytes(f.allocated_before)} live at the cell’s start (${all}reserved ${formatBytes(f.peak_reserved)})`,
    `allocated ${formatBytes(f.allocated_before)} → ${formatBytes(f.allocated_after)} (${signed(f.added_allocated)})`,
    `reserved ${formatBytes(f.reserved_before)} → ${formatBytes(f.reserved_after)} (${signed(f.added_reserved)})`,
  ];
  if (f.lines.length > 0) {
    out.push('top lines at the cell’s peak, its own allocations (click to go to one):');
    for (const l of f.lines) out.push(`  ${formatBytes(l.bytes)}  ${lineLabel(l, files)}${l.function && l.function !== '<module>' ? ` in ${l.function}` : ''}`);
  }
  return out.join('\n');
}
