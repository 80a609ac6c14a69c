// Segment map at one moment: one row per segment (largest first), blocks coloured by state, so
// fragmentation is visible at a glance. Rows are virtualised on one canvas: only visible rows are drawn.
import { formatBytes } from '../../src/core/base/units/bytes';
import type { BlockView, SegmentMapView, SegmentView } from '../../src/core/base/protocol/snapshot';
import { send } from './api';
import { clear, h, themeColor } from './dom';
import { atTime } from './timeFormat';
import { cachedStack, getStack, sourceFrame, stackLines } from './stacks';
import { placeTooltip } from './tooltip';
import { breakdownBar } from './summaryTab';

const ROW = 22;
const LABEL = 210;
const VISIBLE_ROWS = 18;

export interface SegmentsHost {
  range(): { t0Us: number; t1Us: number };
  /** Note [Time origin]: times count from this; default: range start */
  originUs?(): number;
  peakUs(): number | undefined;
  momentUs(): number | undefined;
  /** the user moved the slider (undefined = end of trace) */
  onMoment(timeUs: number | undefined): void;
}

export class SegmentsPanel {
  private view: SegmentMapView | undefined;
  private rows: SegmentView[] = [];
  private readonly slider: HTMLInputElement;
  private readonly caption: HTMLElement;
  private readonly canvas: HTMLCanvasElement;
  private readonly scroller: HTMLElement;
  private readonly spacer: HTMLElement;
  private readonly tooltip: HTMLElement;
  private readonly breakdownHost: HTMLElement;
  private hovered: { row: number; block: number } | undefined;
  private readonly rareLegend = new Map<string, HTMLElement>();

  constructor(
    private readonly root: HTMLElement,
    private readonly host: SegmentsHost,
  ) {
    clear(root);
    this.slider = h('input', { type: 'range', min: 0, max: 1000, step: 1, 'aria-label': 'Moment shown in the segment map', 'data-testid': 'segments-slider', class: 'slider' });
    this.slider.addEventListener('change', () => {
      const { t0Us, t1Us } = this.host.range();
      const v = Number(this.slider.value);
      this.host.onMoment(v >= 1000 ? undefined : t0Us + ((t1Us - t0Us) * v) / 1000);
    });
    const button = (label: string, action: () => void, testId: string) => {
      const b = h('vscode-button', { appearance: 'secondary', 'data-testid': testId }, label);
      b.addEventListener('click', action);
      return b;
    };
    this.caption = h('div', { class: 'segments-caption', 'data-testid': 'segments-caption', role: 'status' });
    this.canvas = h('canvas', { class: 'segments-canvas', 'data-testid': 'segments-canvas', tabindex: 0, role: 'img', 'aria-label': 'Segment map' });
    this.spacer = h('div', { class: 'segments-spacer' });
    this.scroller = h('div', { class: 'segments-scroller', style: `height:${ROW * VISIBLE_ROWS}px` }, this.spacer);
    this.tooltip = h('div', { class: 'tooltip', role: 'tooltip', hidden: true });
    this.breakdownHost = h('div');
    root.append(
      h(
        'div',
        { class: 'toolbar' },
        h('label', { class: 'muted' }, 'Moment'),
        this.slider,
        button('Peak', () => this.host.onMoment(this.host.peakUs()), 'segments-peak'),
        button('End', () => this.host.onMoment(undefined), 'segments-end'),
      ),
      this.caption,
      h(
        'div',
        { class: 'legend' },
        ...[
          ['seg-allocated', 'allocated'],
          ['seg-rounding', 'rounding waste'],
          ['seg-pending', 'pending free (record_stream)'],
          ['seg-free', 'free'],
          ['seg-untraced', 'history unknown (hatched)'],
        ].map(([css, label]) => {
          const item = h('span', { class: 'legend-item', 'data-testid': `legend-${css}` }, h('span', { class: `swatch ${css}` }), label);
          // The two rare kinds are listed only when the moment shown has one (onData): a legend names what is drawn.
          if (css === 'seg-pending' || css === 'seg-untraced') {
            item.style.display = 'none';  // (not `hidden`: the legend's CSS display would override it)
            this.rareLegend.set(css, item);
          }
          return item;
        }),
      ),
      h('div', { class: 'segments-wrap' }, this.canvas, this.scroller, this.tooltip),
      this.breakdownHost,
    );
    this.scroller.addEventListener('scroll', () => this.draw());
    this.scroller.addEventListener('pointermove', (e) => this.hover(e));
    this.scroller.addEventListener('pointerleave', () => {
      this.tooltip.hidden = true;
      this.hovered = undefined;
      this.draw();
    });
    this.scroller.addEventListener('click', (e) => this.click(e));
    new ResizeObserver(() => this.draw()).observe(this.scroller);
  }

  onData(view: SegmentMapView): void {
    this.view = view;
    const shown = view.segments.flatMap((s) => s.blocks);
    const show = (css: string, on: boolean) => (this.rareLegend.get(css)!.style.display = on ? '' : 'none');
    show('seg-pending', shown.some((b) => b.state === 'active_pending_free'));
    show('seg-untraced', shown.some((b) => b.untraced));
    this.rows = [...view.segments].sort((a, b) => b.totalSize - a.totalSize || a.address - b.address);
    const { t0Us, t1Us } = this.host.range();
    const moment = this.host.momentUs();
    this.slider.value = String(moment === undefined ? 1000 : Math.round((1000 * (moment - t0Us)) / Math.max(1, t1Us - t0Us)));
    const blocks = view.segments.reduce((n, s) => n + s.blocks.length, 0);
    // Note [Untraced blocks]: allocated blocks whose allocation the trace does not hold are drawn hatched.
    let untraced = 0;
    let untracedBytes = 0;
    for (const s of view.segments)
      for (const b of s.blocks)
        if (b.untraced) {
          untraced++;
          untracedBytes += b.size;
        }
    const when = moment === undefined ? 'at the end of the trace' : `at ${atTime(moment - (this.host.originUs?.() ?? t0Us))}`;
    clear(this.caption);
    this.caption.append(
      h('span', { 'data-testid': 'segment-count', 'data-count': view.segments.length }, `${view.segments.length.toLocaleString('en-US')} segments`),
      `, ${blocks.toLocaleString('en-US')} blocks ${when} · allocated ${formatBytes(view.breakdown.allocatedBytes)} of ${formatBytes(view.breakdown.reservedBytes)} reserved. `,
      h('span', { class: 'verdict-inline' }, view.verdict),
      ...(untraced
        ? [
            h(
              'div',
              { class: 'muted', 'data-testid': 'segments-untraced', 'data-count': untraced, 'data-bytes': untracedBytes },
              `${untraced.toLocaleString('en-US')} allocated block${untraced === 1 ? '' : 's'} (${formatBytes(untracedBytes)}) of unknown history, hatched: allocated before the trace began`,
            ),
          ]
        : []),
    );
    this.spacer.style.height = `${this.rows.length * ROW}px`;
    // As tall as the rows, up to VISIBLE_ROWS (then it scrolls): two segments leave no empty screen under them.
    this.scroller.style.height = `${this.visibleHeight()}px`;
    clear(this.breakdownHost);
    this.breakdownHost.append(h('h3', {}, 'Why reserved exceeds what was requested, at this moment'), breakdownBar(view.breakdown));
    this.draw();
  }

  private visibleHeight(): number {
    return ROW * Math.max(1, Math.min(this.rows.length, VISIBLE_ROWS));
  }

  toDataUrl(): string {
    this.draw();
    return this.canvas.toDataURL('image/png');
  }

  draw(): void {
    const cssW = Math.floor(this.scroller.clientWidth);
    if (cssW === 0) return;
    const dpr = window.devicePixelRatio || 1;
    const cssH = this.visibleHeight();
    this.canvas.width = Math.round(cssW * dpr);
    this.canvas.height = Math.round(cssH * dpr);
    this.canvas.style.width = `${cssW}px`;
    this.canvas.style.height = `${cssH}px`;
    const ctx = this.canvas.getContext('2d');
    if (!ctx) return;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, cssW, cssH);
    const colors = {
      allocated: themeColor('--vscode-charts-blue', '#3794ff'),
      rounding: themeColor('--vscode-charts-yellow', '#cca700'),
      pending: themeColor('--vscode-charts-red', '#f14c4c'),
      free: themeColor('--vscode-editorWidget-background', '#252526'),
      border: themeColor('--vscode-panel-border', '#80808059'),
      fg: themeColor('--vscode-foreground', '#cccccc'),
      hover: themeColor('--vscode-focusBorder', '#007fd4'),
    };
    const first = Math.floor(this.scroller.scrollTop / ROW);
    const offsetY = -(this.scroller.scrollTop % ROW);
    const barW = Math.max(10, cssW - LABEL - 8);
    ctx.font = '11px sans-serif';
    ctx.textBaseline = 'middle';
    for (let r = 0; r <= VISIBLE_ROWS; r++) {
      const seg = this.rows[first + r];
      if (!seg) break;
      const y = offsetY + r * ROW + 3;
      const hgt = ROW - 6;
      ctx.fillStyle = colors.fg;
      ctx.fillText(`${formatBytes(seg.totalSize)} ${poolName(seg)}${seg.expandable ? ' expandable' : ''} · s${seg.stream}`, 4, y + hgt / 2);
      ctx.fillStyle = colors.free;
      ctx.fillRect(LABEL, y, barW, hgt);
      const scale = barW / seg.totalSize;
      seg.blocks.forEach((b, bi) => {
        if (b.state === 'inactive') return;
        const x = LABEL + b.offset * scale;
        const w = Math.max(1, b.size * scale);
        ctx.fillStyle = b.state === 'active_pending_free' ? colors.pending : colors.allocated;
        ctx.fillRect(x, y, w, hgt);
        const waste = (b.size - b.requestedSize) * scale;
        if (b.state === 'active_allocated' && waste >= 1) {
          ctx.fillStyle = colors.rounding;
          ctx.fillRect(x + w - waste, y, waste, hgt);
        }
        if (b.untraced) hatch(ctx, x, y, w, hgt, colors.free);
        if (this.hovered && this.hovered.row === first + r && this.hovered.block === bi) {
          ctx.strokeStyle = colors.hover;
          ctx.lineWidth = 2;
          ctx.strokeRect(x + 1, y + 1, Math.max(1, w - 2), hgt - 2);
        }
      });
      ctx.strokeStyle = colors.border;
      ctx.lineWidth = 1;
      ctx.strokeRect(LABEL + 0.5, y + 0.5, barW - 1, hgt - 1);
    }
  }

  private blockAt(e: MouseEvent): { row: number; block: number; seg: SegmentView; b: BlockView } | undefined {
    const rect = this.scroller.getBoundingClientRect();
    const rowIndex = Math.floor((e.clientY - rect.top + this.scroller.scrollTop) / ROW);
    const seg = this.rows[rowIndex];
    if (!seg) return undefined;
    const barW = Math.max(10, this.scroller.clientWidth - LABEL - 8);
    const x = e.clientX - rect.left - LABEL;
    if (x < 0 || x > barW) return undefined;
    const offset = (x / barW) * seg.totalSize;
    const block = seg.blocks.findIndex((b) => offset >= b.offset && offset < b.offset + b.size);
    return block < 0 ? undefined : { row: rowIndex, block, seg, b: seg.blocks[block] };
  }

  private hover(e: PointerEvent): void {
    const hit = this.blockAt(e);
    const same = hit && this.hovered && hit.row === this.hovered.row && hit.block === this.hovered.block;
    this.hovered = hit ? { row: hit.row, block: hit.block } : undefined;
    if (!same) this.draw();
    if (!hit) {
      this.tooltip.hidden = true;
      return;
    }
    const { b, seg } = hit;
    const render = () => {
      clear(this.tooltip);
      const state = b.state === 'active_allocated' ? 'allocated' : b.state === 'active_pending_free' ? 'pending free (waiting on another stream)' : 'free';
      this.tooltip.append(
        h('div', { class: 'tooltip-title' }, `${formatBytes(b.size)} ${state}`),
        h('div', {}, `at 0x${(seg.address + b.offset).toString(16)} (+${formatBytes(b.offset)} into a ${formatBytes(seg.totalSize)} ${poolName(seg)} segment)`),
        ...(b.untraced ? [h('div', { 'data-testid': 'segments-untraced-tip' }, 'history unknown: allocated before the trace began (its allocation is not in the trace)')] : []),
        ...(b.state === 'active_allocated' && b.size !== b.requestedSize ? [h('div', {}, `requested ${formatBytes(b.requestedSize)}, rounding waste ${formatBytes(b.size - b.requestedSize)}`)] : []),
        ...(b.stackId > 0 ? [h('pre', { class: 'stack' }, stackLines(cachedStack(b.stackId)).join('\n'))] : []),
      );
    };
    render();
    if (b.stackId > 0 && !cachedStack(b.stackId)) void getStack(b.stackId).then(render);
    placeTooltip(this.tooltip, e);
  }

  private click(e: MouseEvent): void {
    const hit = this.blockAt(e);
    if (!hit || hit.b.stackId <= 0) return;
    void getStack(hit.b.stackId).then((st) => {
      const f = sourceFrame(st);
      if (f) send({ type: 'goToSource', file: f.file, line: f.line });
    });
  }
}

/** "large", "small", or a private pool by its id: "MemPool (0, 1)", "CUDA graph pool (1, 0)" (Note [Private pools]). */
function poolName(seg: SegmentView): string {
  if (seg.pool !== 'private' || !seg.poolId) return seg.pool;
  return `${seg.poolId[0] === 0 ? 'MemPool' : 'CUDA graph pool'} (${seg.poolId[0]}, ${seg.poolId[1]})`;
}

/** Diagonal stripes over a block: its history is unknown (Note [Untraced blocks]). */
function hatch(ctx: CanvasRenderingContext2D, x: number, y: number, w: number, hgt: number, color: string): void {
  ctx.save();
  ctx.beginPath();
  ctx.rect(x, y, w, hgt);
  ctx.clip();
  ctx.strokeStyle = color;
  ctx.lineWidth = 1.5;
  ctx.beginPath();
  for (let k = x - hgt; k < x + w; k += 5) {
    ctx.moveTo(k, y + hgt);
    ctx.lineTo(k + hgt, y);
  }
  ctx.stroke();
  ctx.restore();
}
