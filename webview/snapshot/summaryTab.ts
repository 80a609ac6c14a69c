// Summary tab: memory_summary()'s figures, where reserved − requested went, and the verdict sentence.
import { formatBytes } from '../../src/core/format/bytes';
import type { BreakdownView, SummaryView } from '../../src/core/protocol/snapshot';
import { clear, h } from './dom';

export function renderSummary(root: HTMLElement, s: SummaryView, t0Us: number, onPeak: () => void): void {
  clear(root);
  root.append(h('p', { class: 'verdict', 'data-testid': 'verdict', role: 'status' }, s.verdict));
  const fig = (key: string, label: string, bytes: number, note?: string) =>
    h(
      'div',
      { class: 'figure', 'data-figure': key, 'data-bytes': bytes },
      h('div', { class: 'figure-label' }, label),
      h('div', { class: 'figure-value', title: `${bytes.toLocaleString('en-US')} bytes` }, formatBytes(bytes)),
      ...(note ? [h('div', { class: 'figure-note' }, note)] : []),
    );
  const count = (key: string, label: string, n: number) =>
    h('div', { class: 'figure', 'data-figure': key, 'data-count': n }, h('div', { class: 'figure-label' }, label), h('div', { class: 'figure-value' }, n.toLocaleString('en-US')));

  const peakLink = h('vscode-link', { href: '#', 'data-testid': 'peak-link' }, `at ${((s.peakAtTimeUs - t0Us) / 1e6).toFixed(3)} s`);
  peakLink.addEventListener('click', (e) => {
    e.preventDefault();
    onPeak();
  });
  const peak = fig('peakAllocated', 'Peak allocated', s.peakAllocatedBytes);
  peak.append(h('div', { class: 'figure-note' }, peakLink));

  root.append(
    h('h3', {}, 'At the end of the file'),
    h(
      'div',
      { class: 'figures' },
      fig('allocated', 'Allocated', s.allocatedBytes, 'handed to live tensors'),
      fig('reserved', 'Reserved', s.reservedBytes, 'held from the driver'),
      fig('active', 'Active', s.activeBytes, 'allocated + waiting on streams'),
      fig('requested', 'Requested', s.requestedBytes, 'what the program asked for'),
    ),
    h('h3', {}, 'Over the whole trace'),
    h('div', { class: 'figures' }, peak, fig('peakReserved', 'Peak reserved', s.peakReservedBytes), count('ooms', 'Out-of-memory errors', s.oomCount), count('events', 'Trace events', s.events)),
    h('h3', {}, 'Allocator state'),
    h(
      'div',
      { class: 'figures' },
      count('segments', 'Segments', s.segments),
      count('blocks', 'Blocks', s.blocks),
      count('allocatedBlocks', 'Allocated blocks', s.allocatedBlocks),
      count('freeBlocks', 'Free blocks', s.breakdown.freeBlocks),
      fig('largestFree', 'Largest free block', s.breakdown.largestFreeBlockBytes),
    ),
    h('h3', {}, 'Why reserved exceeds what was requested'),
    breakdownBar(s.breakdown),
  );
}

interface Part {
  key: keyof BreakdownView;
  label: string;
  css: string;
  why: string;
  /** which segments the part exists in (Note [Breakdown]): shown only when the state has such segments */
  kind: 'any' | 'fixed' | 'expandable';
}

const PARTS: Part[] = [
  { key: 'requestedBytes', label: 'Requested', css: 'part-requested', why: 'bytes the program asked for', kind: 'any' },
  { key: 'roundingWasteBytes', label: 'Rounding waste', css: 'part-rounding', why: 'inside allocated blocks: sizes round up (512 B, whole small blocks)', kind: 'any' },
  { key: 'pendingFreeBytes', label: 'Pending free', css: 'part-pending', why: 'freed, but another stream still uses them (record_stream)', kind: 'any' },
  { key: 'splitRemainderBytes', label: 'Split remainders', css: 'part-split', why: 'free pieces of fixed segments that still hold tensors: released only with the whole segment', kind: 'fixed' },
  { key: 'subPageRemainderBytes', label: 'Sub-page remainders', css: 'part-subpage', why: 'free bytes of expandable segments smaller than a page (2 MiB small, 20 MiB large): stay mapped', kind: 'expandable' },
  { key: 'releasablePageBytes', label: 'Releasable free pages', css: 'part-pages', why: 'whole free pages of expandable segments that still hold tensors: torch.cuda.empty_cache() unmaps them', kind: 'expandable' },
  { key: 'cachedFreeBytes', label: 'Cached free segments', css: 'part-cached', why: 'segments holding no tensor: torch.cuda.empty_cache() releases them', kind: 'any' },
];

function applies(p: Part, b: BreakdownView): boolean {
  if (p.kind === 'fixed') return b.fixedSegments > 0 || b[p.key] !== 0;
  if (p.kind === 'expandable') return b.expandableSegments > 0 || b[p.key] !== 0;
  return true;
}

/** A stacked bar of reserved: requested | rounding | pending | remainders | releasable, then the same as a table. */
export function breakdownBar(b: BreakdownView): HTMLElement {
  const total = Math.max(1, b.reservedBytes);
  const bar = h('div', { class: 'breakdown-bar', role: 'img', 'aria-label': 'Reserved memory by kind' });
  const rows = h('div', { class: 'breakdown-rows' });
  for (const p of PARTS) {
    if (!applies(p, b)) continue;
    const bytes = b[p.key] as number;
    if (bytes > 0) bar.append(h('div', { class: `breakdown-part ${p.css}`, style: `flex-grow:${bytes / total}`, title: `${p.label}: ${formatBytes(bytes)}` }));
    rows.append(
      h(
        'div',
        { class: 'breakdown-row', 'data-part': p.key, 'data-bytes': bytes },
        h('span', { class: `swatch ${p.css}` }),
        h('span', { class: 'breakdown-label' }, p.label),
        h('span', { class: 'breakdown-value' }, formatBytes(bytes)),
        h('span', { class: 'breakdown-pct' }, `${((100 * bytes) / total).toFixed(1)}%`),
        h('span', { class: 'breakdown-why' }, p.why),
      ),
    );
  }
  const unallocated = b.cachedFreeBytes + b.releasablePageBytes + b.subPageRemainderBytes + b.splitRemainderBytes + b.pendingFreeBytes;
  rows.append(
    h(
      'div',
      { class: 'breakdown-row total', 'data-part': 'unallocated', 'data-bytes': unallocated },
      h('span', { class: 'swatch' }),
      h('span', { class: 'breakdown-label' }, 'Reserved − allocated'),
      h('span', { class: 'breakdown-value' }, formatBytes(unallocated)),
      h('span', { class: 'breakdown-pct' }, `${((100 * unallocated) / total).toFixed(1)}%`),
      h('span', { class: 'breakdown-why' }, 'pending free + remainders + releasable'),
    ),
  );
  return h('div', { class: 'breakdown' }, bar, rows);
}
