// The readable `gpumem summary FILE` report, in the spirit of torch.cuda.memory_summary(): a boxed table
// per device, then the lines holding the most memory at the peak.
// Note [Report figures]: the table shows exactly the `--json` figures (issue #4's definitions), plus the
// fragmentation split of reserved − allocated, so the text and the JSON never disagree.
import { formatBytes } from '../format/bytes';
import type { AllocatorState, SnapshotSummary } from '../model/types';
import { breakdownFromSegments } from '../snapshot/breakdown';

const WIDTH = 77;

function rule(ch: string): string {
  return `|${ch.repeat(WIDTH - 2)}|`;
}

function row(text: string): string {
  const body = text.length > WIDTH - 4 ? text.slice(0, WIDTH - 5) + '…' : text;
  return `| ${body.padEnd(WIDTH - 4)} |`;
}

function cells(label: string, value: string, note = ''): string {
  return row(`${label.padEnd(32)}${value.padStart(12)}  ${note}`);
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

export interface ReportInput {
  fileName: string;
  summary: SnapshotSummary;
  /** allocator state at the end, per device (for the split of reserved − allocated) */
  states?: Map<number, AllocatorState>;
  problems?: string[];
  /** how many top lines to show (default 10) */
  topLines?: number;
}

export function summaryReport(input: ReportInput): string {
  const { summary } = input;
  const out: string[] = [];
  const kind = summary.format === 'pytorch-pickle' ? 'PyTorch snapshot pickle' : 'GPU Memory Lens capture';
  out.push(rule('='));
  out.push(row(`GPU Memory Lens summary: ${input.fileName}`));
  out.push(row(kind));
  out.push(rule('='));
  if (summary.devices.length === 0) out.push(row('No device memory was recorded in this file.'));
  for (const d of summary.devices) {
    out.push(row(`Device ${d.device}`));
    out.push(rule('-'));
    out.push(cells('GPU reserved memory', formatBytes(d.reserved_bytes), plural(d.segments, 'segment')));
    out.push(cells('Allocated memory', formatBytes(d.allocated_bytes), `${plural(d.allocated_blocks, 'block')} of ${d.blocks}`));
    out.push(cells('Reserved but unallocated', formatBytes(d.reserved_bytes - d.allocated_bytes)));
    const st = input.states?.get(d.device);
    if (st) {
      // Named per kind of segment (Note [Breakdown]): an expandable segment's whole free pages are releasable.
      const f = breakdownFromSegments(st.segments);
      out.push(cells('  cached free segments', formatBytes(f.cachedFreeBytes), 'empty_cache() releases'));
      if (f.expandableSegments) out.push(cells('  free pages (expandable)', formatBytes(f.releasablePageBytes), 'empty_cache() unmaps'));
      if (f.expandableSegments) out.push(cells('  sub-page remainders', formatBytes(f.subPageRemainderBytes), 'stay mapped'));
      if (f.fixedSegments) out.push(cells('  split remainders (fixed)', formatBytes(f.splitRemainderBytes), 'stay until the segment empties'));
      if (f.pendingFreeBytes) out.push(cells('  pending free (record_stream)', formatBytes(f.pendingFreeBytes)));
    }
    out.push(cells('Largest free block', formatBytes(d.largest_free_block_bytes)));
    out.push(cells('Peak allocated memory', formatBytes(d.peak_allocated_bytes), d.events ? `at time_us ${d.peak_at_time_us}` : ''));
    out.push(cells('Trace events', String(d.events)));
    out.push(rule('-'));
  }
  const n = input.topLines ?? 10;
  const total = summary.top_lines.reduce((s, l) => s + l.bytes_at_peak, 0);
  out.push(row('Top lines at the peak (allocations made in the trace, live at the peak)'));
  out.push(rule('-'));
  if (summary.top_lines.length === 0) out.push(row('none: no allocation of the trace was live at the peak'));
  for (const l of summary.top_lines.slice(0, n)) {
    const share = total > 0 ? `${((100 * l.bytes_at_peak) / total).toFixed(1)}%` : '';
    const where = l.line > 0 ? `${l.file}:${l.line}` : l.file;
    out.push(row(`${formatBytes(l.bytes_at_peak).padStart(10)} ${share.padStart(6)}  ${shorten(where, WIDTH - 24)}`));
  }
  if (summary.top_lines.length > n) out.push(row(`… ${summary.top_lines.length - n} more lines (--json lists all)`));
  out.push(rule('='));
  for (const p of input.problems ?? []) out.push(`note: ${p}`);
  return out.join('\n');
}

/** Keeps the end of a long path (the file name and line matter most). */
function shorten(s: string, max: number): string {
  return s.length <= max ? s : '…' + s.slice(s.length - max + 1);
}
