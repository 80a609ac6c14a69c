// Summary tab: memory_summary()'s figures, where reserved − requested went, and the verdict sentence.
import { formatBytes } from '../../src/core/base/units/bytes';
import type { BreakdownView, IntegrityView, OomView, SnapshotDetailsView, SummaryView, TaggedView } from '../../src/core/base/protocol/snapshot';
import { clear, h } from './dom';

/** What the summary shows besides the device's figures: the file's OOMs and how to open their lines. */
export interface SummaryExtras {
  /** Note [Range-first open]: only a time window of the file was read */
  rangeOnly?: boolean;
  ooms: readonly OomView[];
  openLine(file: string, line: number): void;
}

/** `originUs`: Note [Time origin] — times count from the process's first allocator event. */
export function renderSummary(root: HTMLElement, s: SummaryView, originUs: number, onPeak: () => void, extras?: SummaryExtras): void {
  clear(root);
  root.append(h('p', { class: 'verdict', 'data-testid': 'verdict', role: 'status' }, s.verdict));
  if (extras?.ooms.length) root.append(oomList(extras));
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

  const peakLink = h('vscode-link', { href: '#', 'data-testid': 'peak-link' }, `at ${((s.peakAtTimeUs - originUs) / 1e6).toFixed(3)} s`);
  peakLink.addEventListener('click', (e) => {
    e.preventDefault();
    onPeak();
  });
  const peak = fig('peakAllocated', 'Peak allocated', s.peakAllocatedBytes);
  // A peak with no moment (a trace-less file, or a range of the file without events: Note [Range-first open]) has no link.
  if (s.events > 0 || s.peakAtTimeUs >= originUs) peak.append(h('div', { class: 'figure-note' }, peakLink));

  if (s.endFromStats) {
    // Note [Figures at the end] (native/addon/src/aggregate.cpp): PyTorch's figures at the last sample; no allocator
    // state is known there, so neither its counts nor the breakdown are shown (zeros would read as measured)
    const at = `PyTorch's figure at the last sample, ${((s.endFromStats.sampleUs - originUs) / 1e6).toFixed(3)} s`;
    root.append(
      h('h3', {}, extras?.rangeOnly ? 'At the end of the range' : 'At the end of the file'),
      h('div', { class: 'figures' }, fig('allocated', 'Allocated', s.allocatedBytes, at), fig('reserved', 'Reserved', s.reservedBytes, at)),
      h('h3', {}, extras?.rangeOnly ? 'Over the range' : 'Over the whole run'),
      h('div', { class: 'figures' }, peak, fig('peakReserved', 'Peak reserved', s.peakReservedBytes), count('ooms', 'Out-of-memory errors', s.oomCount), count('events', 'Trace events', s.events)),
      h('p', { class: 'muted', 'data-testid': 'no-allocator-state' }, 'No allocation was recorded one by one at the end, so the allocator state (segments, blocks, where reserved − allocated went) is not known.'),
    );
    if (s.details) root.append(...detailSections(s.details, originUs, fig, count));
    return;
  }
  root.append(
    h('h3', {}, extras?.rangeOnly ? 'At the end of the range' : 'At the end of the file'),
    h(
      'div',
      { class: 'figures' },
      fig('allocated', 'Allocated', s.allocatedBytes, 'handed to live tensors'),
      fig('reserved', 'Reserved', s.reservedBytes, 'held from the driver'),
      fig('active', 'Active', s.activeBytes, 'allocated + waiting on streams'),
      fig('requested', 'Requested', s.requestedBytes, 'what the program asked for'),
    ),
    h('h3', {}, extras?.rangeOnly ? 'Over the range' : 'Over the whole trace'),
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
  if (s.details) root.append(...detailSections(s.details, originUs, fig, count));
}

type Fig = (key: string, label: string, bytes: number, note?: string) => HTMLElement;
type Count = (key: string, label: string, n: number) => HTMLElement;

/** A small table: header cells, then rows of cells (each row's attributes first). */
function table(testId: string, head: string[], rows: { attrs: Record<string, string | number>; cells: (string | HTMLElement)[] }[]): HTMLElement {
  return h(
    'table',
    { class: 'details-table', 'data-testid': testId },
    h('thead', {}, h('tr', {}, ...head.map((c) => h('th', {}, c)))),
    h('tbody', {}, ...rows.map((r) => h('tr', r.attrs, ...r.cells.map((c) => h('td', {}, c))))),
  );
}

const secs = (us: number, originUs: number) => `${((us - originUs) / 1e6).toFixed(3)} s`;

function taggedTable(testId: string, rows: readonly TaggedView[], originUs: number): HTMLElement {
  return table(
    testId,
    ['Value', 'Allocations', 'Bytes allocated', 'From', 'To'],
    rows.map((t) => ({
      attrs: { 'data-value': t.value, 'data-allocations': t.allocations, 'data-bytes': t.bytes },
      cells: [h('code', {}, t.value), t.allocations.toLocaleString('en-US'), formatBytes(t.bytes), secs(t.firstUs, originUs), secs(t.lastUs, originUs)],
    })),
  );
}

/**
 * Note [Snapshot section] (src/core/analyses/summary/snapshotSection.ts): what the snapshot carries beyond the figures
 * — private pools, pinned host memory, blocks of unknown history, user metadata, compile contexts, annotations, the
 * allocator settings and the keys this reader does not know — each a section only when the file has it.
 */
function detailSections(d: SnapshotDetailsView, originUs: number, fig: Fig, count: Count): HTMLElement[] {
  const out: HTMLElement[] = [];
  if (d.pools.length)
    out.push(
      h(
        'section',
        { 'data-testid': 'pools' },
        h('h3', {}, `Private pools (${d.pools.length})`),
        h('p', { class: 'muted' }, "A pool's free bytes serve only its own allocations (MemPool, CUDA graphs): fragmentation is the share of them outside its largest free block."),
        table(
          'pools-table',
          ['Pool', 'Segments', 'Reserved', 'Active', 'Free', 'Largest free', 'Fragmentation'],
          d.pools.map((p) => ({
            attrs: { 'data-pool': p.poolId.join(','), 'data-reserved': p.reservedBytes, 'data-active': p.activeBytes, 'data-free': p.freeBytes, 'data-fragmentation': p.fragmentation },
            cells: [p.label, String(p.segments), formatBytes(p.reservedBytes), formatBytes(p.activeBytes), formatBytes(p.freeBytes), formatBytes(p.largestFreeBlockBytes), `${(100 * p.fragmentation).toFixed(0)}%`],
          })),
        ),
      ),
    );
  if (d.host) {
    const x = d.host;
    out.push(
      h(
        'section',
        { 'data-testid': 'host-memory' },
        h('h3', {}, 'Pinned host memory (not device memory)'),
        h(
          'div',
          { class: 'figures' },
          fig('hostReserved', 'Pinned', x.reservedBytes, `${x.segments} segment${x.segments === 1 ? '' : 's'} held by the host allocator`),
          fig('hostAllocated', 'Allocated', x.allocatedBytes, `${x.allocatedBlocks} of ${x.blocks} blocks in use`),
          fig('hostCached', 'Cached, not in use', x.cachedBytes, 'kept pinned for reuse'),
          fig('hostPeak', 'Peak allocated', x.peakAllocatedBytes, x.events ? `at ${secs(x.peakAtTimeUs, originUs)}` : 'no host trace'),
          count('hostEvents', 'Host trace events', x.events),
        ),
        table(
          'host-segments',
          ['Address', 'Size', 'Allocated', 'State', 'Pinned by'],
          x.rows.map((r) => ({
            attrs: { 'data-address': r.address, 'data-size': r.totalSize, 'data-allocated': r.allocatedBytes },
            cells: [`0x${r.address.toString(16)}`, formatBytes(r.totalSize), formatBytes(r.allocatedBytes), r.state, r.where],
          })),
        ),
      ),
    );
  }
  if (d.untracedBlocks)
    out.push(
      h(
        'p',
        { class: 'muted', 'data-testid': 'untraced', 'data-count': d.untracedBlocks, 'data-bytes': d.untracedBytes },
        `History unknown: ${d.untracedBlocks.toLocaleString('en-US')} allocated block${d.untracedBlocks === 1 ? '' : 's'} (${formatBytes(d.untracedBytes)}) have no allocation in the trace (made before recording began, or dropped by max_entries); the segment map hatches them.`,
      ),
    );
  if (d.userMetadata.length) out.push(h('section', { 'data-testid': 'user-metadata' }, h('h3', {}, 'User metadata (_set_memory_metadata)'), taggedTable('user-metadata-table', d.userMetadata, originUs)));
  if (d.compileContexts.length)
    out.push(h('section', { 'data-testid': 'compile-contexts' }, h('h3', {}, 'Compile contexts (torch.compile)'), taggedTable('compile-contexts-table', d.compileContexts, originUs)));
  if (d.annotations.length)
    out.push(
      h(
        'section',
        { 'data-testid': 'annotations' },
        h('h3', {}, 'Annotations (record_function ranges)'),
        table(
          'annotations-table',
          ['Name', 'Ranges'],
          d.annotations.map((a) => ({ attrs: { 'data-name': a.name, 'data-ranges': a.ranges }, cells: [a.name, String(a.ranges)] })),
        ),
      ),
    );
  if (d.allocatorSettings)
    out.push(
      h(
        'section',
        { 'data-testid': 'allocator-settings' },
        h('h3', {}, 'Allocator settings the run used'),
        table(
          'allocator-settings-table',
          ['Setting', 'Value'],
          d.allocatorSettings.map((x) => ({ attrs: { 'data-key': x.key }, cells: [x.key, h('code', {}, x.value)] })),
        ),
      ),
    );
  if (d.unknownKeys.length)
    out.push(
      h(
        'section',
        { 'data-testid': 'unknown-keys' },
        h('h3', {}, 'Keys this reader does not know (kept, shown raw)'),
        table(
          'unknown-keys-table',
          ['Where', 'Key', 'Times', 'First value'],
          d.unknownKeys.map((u) => ({ attrs: { 'data-key': `${u.where}.${u.key}` }, cells: [u.where, u.key, u.count.toLocaleString('en-US'), h('code', { class: 'raw' }, u.raw)] })),
        ),
      ),
    );
  return out;
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

function when(o: OomView): string {
  return `${o.t_s.toFixed(3)} s${o.step === null ? '' : ` (step ${o.step})`}`;
}

/** Every OOM of the file: when, which device, the request, the device's memory, the line (a link) and why. */
function oomList(extras: SummaryExtras): HTMLElement {
  const list = h('ol', { class: 'oom-list', 'data-testid': 'oom-list' });
  for (const o of extras.ooms) {
    const where = o.line > 0 ? `${o.displayFile}:${o.line}` : o.displayFile;
    const link = o.line > 0 ? h('vscode-link', { href: '#', 'data-testid': 'oom-line', title: `Open ${o.file}:${o.line}` }, where) : h('span', {}, where);
    if (o.line > 0) {
      link.addEventListener('click', (e) => {
        e.preventDefault();
        extras.openLine(o.file, o.line);
      });
    }
    const device = o.device_total_bytes > 0 ? `${formatBytes(o.device_free_bytes)} free of ${formatBytes(o.device_total_bytes)}` : `${formatBytes(o.device_free_bytes)} free`;
    list.append(
      h(
        'li',
        { class: 'oom', 'data-testid': 'oom', 'data-verdict': o.verdict, 'data-requested': o.requested_bytes },
        h('div', { class: 'oom-head' }, `${when(o)} on cuda:${o.device}: ${formatBytes(o.requested_bytes)} requested by `, link),
        h('div', { class: 'figure-note' }, `device: ${device} · verdict: ${o.verdict}`),
        h('div', { class: 'oom-sentence' }, o.sentence),
      ),
    );
  }
  return h('section', { class: 'ooms' }, h('h3', { class: 'error' }, `Out-of-memory errors (${extras.ooms.length})`), list);
}

/** The alert shown above every tab when the file does not hold the whole run (Note [Never silent]). */
export function integrityBanner(i: IntegrityView): HTMLElement | undefined {
  if (!i.sentences.length) return undefined;
  return h(
    'div',
    { class: 'integrity-banner', role: 'alert', 'data-testid': 'integrity-banner', 'data-ended': i.ended, 'data-lost': i.lostEvents },
    ...i.sentences.map((t) => h('p', {}, t)),
  );
}
