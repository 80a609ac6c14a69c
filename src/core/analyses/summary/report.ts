// The readable `gpumem summary FILE` report, in the spirit of torch.cuda.memory_summary(): a boxed table
// per device, then the lines holding the most memory at the peak.
// Note [Report figures]: the table shows exactly the `--json` figures (the definitions), plus the
// fragmentation split of reserved − allocated, so the text and the JSON never disagree. Times are seconds
// since the time origin (Note [Time origin]); raw time_us values appear only in `--json`.
import { formatBytes } from '../../base/units/bytes';
import type { AllocatorState } from '../../base/model/types';
import { allocatorLine, deviceLine, processLine } from './identity';
import type { SummaryDocument } from './document';
import { oomWhere } from './ooms';
import { formatSeconds } from '../steps/timebase';
import { breakdownFromSegments } from '../breakdown/breakdown';

const WIDTH = 77;

function rule(ch: string): string {
  return `|${ch.repeat(WIDTH - 2)}|`;
}

function row(text: string): string {
  const body = text.length > WIDTH - 4 ? text.slice(0, WIDTH - 5) + '…' : text;
  return `| ${body.padEnd(WIDTH - 4)} |`;
}

/** Rows of a long sentence, wrapped at word boundaries inside the box; `indent` on continuation rows. */
function wrapped(text: string, first = '', indent = '  '): string[] {
  const max = WIDTH - 4;
  const out: string[] = [];
  let line = first;
  for (const word of text.split(/\s+/).filter(Boolean)) {
    const sep = line === '' || line.endsWith(' ') ? '' : ' ';
    if (line.length + sep.length + word.length > max && line.trim() !== '') {
      out.push(row(line));
      line = indent + word;
    } else {
      line += sep + word;
    }
  }
  if (line.trim() !== '') out.push(row(line));
  return out;
}

function when(seconds: number | null, step: number | null): string {
  if (seconds === null) return '';
  return `at ${formatSeconds(seconds)}${step === null ? '' : ` (step ${step})`}`;
}

function cells(label: string, value: string, note = ''): string {
  return row(`${label.padEnd(32)}${value.padStart(12)}  ${note}`);
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

// Where the step numbers come from (Note [Steps]): said once, so "step 3" is never ambiguous.
const STEP_SOURCE_TEXT = {
  numbered: 'step N from your numbered step markers',
  user: 'step N = the iteration before your N-th gpumem.step()',
  optimizer: 'step N = the N-th iteration, ending at its optimizer.step()',
  backward: 'step N = the N-th iteration, ending at its backward()',
} as const;

export interface ReportInput {
  fileName: string;
  summary: SummaryDocument;
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
  const proc = processLine(summary.identity);
  if (proc) out.push(row(`Process: ${proc}`));
  const alloc = allocatorLine(summary.identity, true);
  if (alloc) out.push(...wrapped(alloc.charAt(0).toUpperCase() + alloc.slice(1)));
  for (const sentence of summary.identity.not_recorded ?? []) out.push(...wrapped(sentence, 'Not recorded: '));
  if (summary.devices.some((d) => d.events > 0)) {
    const steps = summary.time.step_source ? `; ${STEP_SOURCE_TEXT[summary.time.step_source]}` : '';
    out.push(...wrapped(`Times: seconds since the process's first allocation${steps}`));
  }
  out.push(rule('='));
  if (summary.integrity.sentences.length) {
    for (const sentence of summary.integrity.sentences) out.push(...wrapped(sentence, '! '));
    out.push(rule('='));
  }
  if (summary.devices.length === 0) out.push(row('No device memory was recorded in this file.'));
  for (const d of summary.devices) {
    out.push(row(`Device ${deviceLine(summary.identity, d.device)}`));
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
    out.push(cells('Peak allocated memory', formatBytes(d.peak_allocated_bytes), when(d.peak_t_s, d.peak_step)));
    out.push(cells('Trace events', String(d.events)));
    out.push(rule('-'));
  }
  if (summary.ooms.length) {
    out.push(row(`Out-of-memory errors: ${summary.ooms.length}`));
    out.push(rule('-'));
    for (const o of summary.ooms) {
      out.push(row(`${when(o.t_s, o.step)} on cuda:${o.device}: ${formatBytes(o.requested_bytes)} requested`));
      out.push(row(`  by ${shorten(oomWhere(o), WIDTH - 9)}`));
      const device = o.device_total_bytes > 0 ? `${formatBytes(o.device_free_bytes)} free of ${formatBytes(o.device_total_bytes)}` : `${formatBytes(o.device_free_bytes)} free`;
      out.push(...wrapped(`device: ${device}; verdict: ${o.verdict}. ${o.sentence}`, '  ', '  '));
    }
    out.push(rule('-'));
  }
  if (summary.user_metadata?.length) {
    // Labels set with torch.cuda.memory._set_memory_metadata (a trace entry's user_metadata).
    out.push(row('Memory labels (_set_memory_metadata): at the peak, allocations, allocated'));
    out.push(rule('-'));
    for (const u of summary.user_metadata) {
      const dev = summary.devices.length > 1 ? `cuda:${u.device} ` : '';
      const figures = `${formatBytes(u.bytes_at_peak).padStart(10)} ${String(u.allocations).padStart(7)} ${formatBytes(u.allocated_bytes).padStart(10)}  `;
      out.push(row(figures + dev + u.label)); // row() cuts a long label with …
    }
    out.push(rule('-'));
  }
  const n = input.topLines ?? 10;
  const total = summary.top_lines.reduce((s, l) => s + l.bytes_at_peak, 0);
  out.push(row('Top lines at the peak (allocations made in the trace, live at the peak)'));
  out.push(rule('-'));
  if (summary.top_lines.length === 0) {
    // Note [Figures only]: a file without events has no line to name, and the sentence above says why
    const unrecorded = summary.devices.every((d) => d.events === 0) && (summary.identity.not_recorded?.length ?? 0) > 0;
    out.push(row(unrecorded ? 'none: allocations were not recorded one by one (Not recorded, above)' : 'none: no allocation of the trace was live at the peak'));
  }
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
