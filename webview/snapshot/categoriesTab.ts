// Categories tab: what the memory is — parameters, gradients, optimizer state, activations by module,
// temporaries, other — plus the allocator's cache by cause and what is not from the allocator, so every byte the
// device shows is accounted; at the peak and at the chosen moment (the timeline's / segment map's moment, or a
// step end picked in the step table). Then the per-step table and the leak findings (Note [Categories]).
import { CATEGORY_LABELS, shownCategories, type Category } from '../../src/core/base/protocol/categories';
import { formatBytes } from '../../src/core/base/units/bytes';
import type { CategoriesView, CategoryMomentView } from '../../src/core/base/protocol/snapshot';
import { newRequestId, send } from './api';
import { clear, h } from './dom';
import { stackWhenTooWide } from './fit';
import { PALETTE_CSS } from './palette';

export interface CategoriesHost {
  device(): number;
  originUs(): number;
  /** the panel's chosen moment (µs), undefined = none */
  momentUs(): number | undefined;
  onMoment(tUs: number): void;
  openLine(file: string, line: number): void;
}

// Fixed colours per part (Note [Palette]); cache and not-from-allocator in neutral tones.
const PART_COLOURS: Record<Category | 'cache' | 'outside', string> = {
  parameter: PALETTE_CSS[0],
  buffer: PALETTE_CSS[3],
  gradient: PALETTE_CSS[1],
  optimizer_state: PALETTE_CSS[2],
  activation: PALETTE_CSS[4],
  kv_cache: PALETTE_CSS[7],
  temporary: PALETTE_CSS[5],
  other: PALETTE_CSS[6],
  block_overhead: PALETTE_CSS[8],
  cache: PALETTE_CSS[9],
  outside: PALETTE_CSS[19],
};

const TOP_MODULES = 12;

export class CategoriesPanel {
  private pending = 0;
  private shownFor: string | undefined;
  private readonly result: HTMLElement;

  constructor(
    root: HTMLElement,
    private readonly host: CategoriesHost,
  ) {
    clear(root);
    this.result = h('div', { 'data-testid': 'categories-result' });
    root.append(
      h(
        'p',
        { class: 'muted' },
        'What the memory is: tensors the optimizer holds (parameters, gradients, optimizer state), activations kept for backward by module, temporaries, and the rest; then the allocator\'s cache and what the device uses outside the allocator. Pick a moment on the timeline or a step below.',
      ),
      this.result,
    );
  }

  /** Asks for the view if the device or moment changed since it was drawn (or `force`). */
  show(force = false): void {
    const key = `${this.host.device()}@${this.host.momentUs() ?? ''}`;
    if (!force && key === this.shownFor) return;
    this.shownFor = key;
    this.pending = newRequestId();
    if (!this.result.firstChild) this.result.append(h('div', { class: 'loading' }, h('vscode-progress-ring'), h('span', {}, 'Categorising…')));
    const timeUs = this.host.momentUs();
    send({ type: 'requestCategories', requestId: this.pending, device: this.host.device(), ...(timeUs === undefined ? {} : { timeUs }) });
  }

  /** A new device or a grown capture makes the shown view stale. */
  reset(): void {
    this.shownFor = undefined;
  }

  failed(requestId: number, message: string): boolean {
    if (requestId !== this.pending || requestId === 0) return false;
    clear(this.result);
    this.result.append(h('p', { class: 'error', 'data-testid': 'categories-error' }, message));
    return true;
  }

  onData(view: CategoriesView): void {
    if (view.requestId !== this.pending) return;
    clear(this.result);
    const notes: string[] = [];
    if (!view.hasTags) notes.push('No optimizer step was seen: parameters, gradients and optimizer state are counted as other.');
    if (!view.hasPhases) notes.push('No backward() was seen: activations and temporaries are counted as other.');
    for (const n of notes) this.result.append(h('p', { class: 'warning', 'data-testid': 'categories-caveat' }, n));
    const moments = h('div', { class: 'cat-moments' });
    if (view.peak) moments.append(this.moment(view.peak, view, 'peak'));
    if (view.moment) moments.append(this.moment(view.moment, view, 'moment'));
    this.result.append(moments);
    this.result.append(this.stepTable(view), this.leaks(view));
  }

  private moment(m: CategoryMomentView, view: CategoriesView, id: string): HTMLElement {
    const box = h('section', { class: 'cat-moment', 'data-testid': `categories-${id}`, 'data-time-us': m.timeUs });
    box.append(h('h3', {}, `At ${m.label}`));
    const parts: [Category | 'cache' | 'outside' | 'untraced', string, number, string][] = shownCategories([m.bytes]).map((c) => [c, CATEGORY_LABELS[c], m.bytes[c], '']);
    if (m.untracedBytes) parts.push(['untraced', 'before the trace began', m.untracedBytes, '']);
    const b = m.beyond;
    const causes = [
      b.cachedFreeBytes ? `${formatBytes(b.cachedFreeBytes)} in free segments (empty_cache() releases)` : '',
      b.splitRemainderBytes ? `${formatBytes(b.splitRemainderBytes)} split remainders` : '',
      b.pendingFreeBytes ? `${formatBytes(b.pendingFreeBytes)} awaiting streams` : '',
    ].filter(Boolean);
    parts.push(['cache', 'cache (reserved − allocated)', b.cacheBytes, causes.join(', ')]);
    if (b.notFromAllocatorBytes !== undefined) {
      parts.push(['outside', 'not from the allocator', b.notFromAllocatorBytes, 'CUDA context, cuBLAS/cuDNN workspaces, NCCL, other processes (device used − reserved)']);
    }
    const total = parts.reduce((a, p) => a + p[2], 0);
    const bar = h('div', { class: 'cat-bar', 'data-testid': `categories-${id}-bar`, role: 'img', 'aria-label': parts.filter((p) => p[2] > 0).map((p) => `${p[1]} ${formatBytes(p[2])}`).join(', ') });
    for (const [key, label, bytes] of parts) {
      if (bytes <= 0 || total <= 0) continue;
      const colour = key === 'untraced' ? PALETTE_CSS[10] : PART_COLOURS[key];
      bar.append(h('span', { class: 'cat-part', 'data-part': key, title: `${label}: ${formatBytes(bytes)}`, style: `width:${((100 * bytes) / total).toFixed(3)}%;background:${colour}` }));
    }
    box.append(bar);
    const table = h('table', { class: 'replay-table cat-table', 'data-testid': `categories-${id}-table` });
    const body = h('tbody');
    for (const [key, label, bytes, detail] of parts) {
      const colour = key === 'untraced' ? PALETTE_CSS[10] : PART_COLOURS[key];
      body.append(
        h(
          'tr',
          { 'data-part': key, 'data-bytes': bytes },
          // a no-break space: in a narrow panel the swatch stays on the line of its name
          h('th', { scope: 'row' }, h('span', { class: 'cat-swatch', style: `background:${colour}` }), `\u00a0${label}`),
          h('td', { class: 'num', title: `${bytes.toLocaleString('en-US')} bytes` }, formatBytes(bytes)),
          h('td', { class: 'num' }, total > 0 ? `${Math.round((100 * bytes) / total)}%` : ''),
          h('td', { class: 'muted' }, detail),
        ),
      );
    }
    const allocatedRow = h('tr', { class: 'cat-total' }, h('th', { scope: 'row' }, 'allocated · reserved'), h('td', { class: 'num' }, formatBytes(m.allocatedBytes)), h('td', { class: 'num' }, formatBytes(m.reservedBytes)), h('td', {}, ''));
    if (b.deviceUsedBytes !== undefined) allocatedRow.lastElementChild?.append(`device used ${formatBytes(b.deviceUsedBytes)} (what nvidia-smi shows)`);
    body.append(allocatedRow);
    table.append(body);
    box.append(table);
    stackWhenTooWide(table);
    if (m.modules.length) {
      box.append(h('h4', {}, `Activations by module ${view.moduleSource}`));
      const mt = h('table', { class: 'replay-table', 'data-testid': `categories-${id}-modules` });
      const mb = h('tbody');
      for (const x of m.modules.slice(0, TOP_MODULES)) mb.append(h('tr', { 'data-module': x.module }, h('th', { scope: 'row' }, x.module), h('td', { class: 'num' }, formatBytes(x.bytes))));
      if (m.modules.length > TOP_MODULES) mb.append(h('tr', {}, h('th', { scope: 'row', class: 'muted' }, `${m.modules.length - TOP_MODULES} more modules`), h('td', { class: 'num' }, formatBytes(m.modules.slice(TOP_MODULES).reduce((a, x) => a + x.bytes, 0)))));
      mt.append(mb);
      box.append(mt, h('p', { class: 'muted', 'data-testid': 'categories-module-note' }, view.moduleNote));
      stackWhenTooWide(mt);
    }
    return box;
  }

  private stepTable(view: CategoriesView): HTMLElement {
    const box = h('section', { class: 'cat-steps', 'data-testid': 'categories-steps' });
    if (!view.steps.length) {
      box.append(h('p', { class: 'muted' }, 'No training steps were found (no optimizer step or backward(), and no gpumem.step()).'));
      return box;
    }
    box.append(h('h3', {}, `Steps (${view.steps.length}, found from ${view.stepSource})`));
    const table = h('table', { class: 'replay-table', 'data-testid': 'step-table' });
    const head = h('tr', {});
    const cats = shownCategories(view.steps.map((s) => s.categories));
    for (const t of ['Step', 'Peak allocated', 'Allocated at end', 'Reserved at end', ...cats.map((c) => `${CATEGORY_LABELS[c]} at end`)]) head.append(h('th', { scope: 'col' }, t));
    table.append(h('thead', {}, head));
    const body = h('tbody');
    const top = view.steps.reduce((a, s) => (s.peakAllocatedBytes > a.peakAllocatedBytes ? s : a));
    for (const s of view.steps) {
      const row = h(
        'tr',
        { 'data-step': s.step, 'data-end-us': s.endUs, class: s === top ? 'cat-top-step' : undefined, tabindex: 0, title: 'Show the categories at this step end' },
        h('th', { scope: 'row' }, String(s.step) + (s === top ? ' (highest peak)' : '')),
        h('td', { class: 'num' }, formatBytes(s.peakAllocatedBytes)),
        h('td', { class: 'num' }, formatBytes(s.allocatedAtEndBytes)),
        h('td', { class: 'num' }, formatBytes(s.reservedAtEndBytes)),
        ...cats.map((c) => h('td', { class: 'num' }, s.categories ? formatBytes(s.categories[c]) : '—')),
      );
      const pick = () => this.host.onMoment(s.endUs);
      row.addEventListener('click', pick);
      row.addEventListener('keydown', (e) => {
        if (e.key === 'Enter' || e.key === ' ') pick();
      });
      body.append(row);
    }
    table.append(body);
    box.append(table);
    stackWhenTooWide(table);
    return box;
  }

  private leaks(view: CategoriesView): HTMLElement {
    const box = h('section', { class: 'cat-leaks', 'data-testid': 'categories-leaks' });
    if (!view.steps.length) return box;
    if (!view.leaks.length) {
      box.append(h('p', { class: 'muted', 'data-testid': 'no-leak' }, "No leak: no line's memory at step end grew for 3 steps in a row."));
      return box;
    }
    for (const l of view.leaks) {
      const link = h('a', { href: '#', 'data-testid': 'leak-line' }, `${l.displayFile}:${l.line}`);
      link.addEventListener('click', (e) => {
        e.preventDefault();
        this.host.openLine(l.file, l.line);
      });
      const rest = l.sentence.slice(`${l.displayFile}:${l.line}`.length).trimStart();
      const k = l.keeper;
      if (!k) {
        box.append(h('p', { class: 'warning', 'data-testid': 'leak-finding', 'data-growth': l.growthPerStepBytes }, 'Leak: ', link, ` ${rest}`));
        continue;
      }
      // Note [Leak keeper]: the line that keeps the memory alive, a link like the finding's own line
      const at = `${k.displayFile}:${k.line}`;
      const text = k.text.indexOf(at);
      const keeperLink = h('a', { href: '#', 'data-testid': 'leak-keeper-line' }, at);
      keeperLink.addEventListener('click', (e) => {
        e.preventDefault();
        this.host.openLine(k.file, k.line);
      });
      const head = rest.slice(0, rest.length - k.text.length);
      const keeper =
        k.line && text >= 0
          ? h('span', { 'data-testid': 'leak-keeper', 'data-match': k.match }, k.text.slice(0, text), keeperLink, k.text.slice(text + at.length))
          : h('span', { 'data-testid': 'leak-keeper', 'data-match': k.match }, k.text);
      box.append(h('p', { class: 'warning', 'data-testid': 'leak-finding', 'data-growth': l.growthPerStepBytes }, 'Leak: ', link, ` ${head}`, keeper));
    }
    return box;
  }
}
