// Active memory timeline: every allocation as a band over time, stacked in allocation order (memory_viz's
// Active Memory Timeline), drawn on one canvas by column rasterisation (stacking.ts) so panning stays fluid
// whatever the trace length. Pan: drag, ←/→. Zoom: wheel, +/−. Home: whole trace. P: peak.
import { formatBytes } from '../../src/core/format/bytes';
import type { MarkerView, TimelineView } from '../../src/core/protocol/snapshot';
import { getState, newRequestId, send, updateState } from './api';
import { clear, h, themeColor } from './dom';
import { colorIndex, PALETTE32 } from './palette';
import { bandAt, sweepColumns } from './stacking';
import { cachedStack, getStack, sourceFrame, stackLines } from './stacks';
import { placeTooltip } from './tooltip';

const MARGIN = { left: 70, right: 12, top: 10, bottom: 24 };
const HEIGHT = 380;
// Note [Timeline detail]: 3 000 bands are plenty for a 1–2 k pixel wide plot (memory_viz defaults to 15 000
// polygons); what is not drawn as a band shows as the grey "other" envelope, so totals stay right.
const MAX_SPANS = 3000;
const OTHER = (0xff << 24) | (0x80 << 16) | (0x80 << 8) | 0x80;
const OTHER_RANGE = (0xff << 24) | (0x5a << 16) | (0x5a << 8) | 0x5a;
const HOVER = (0xff << 24) | (0xff << 16) | (0xff << 8) | 0xff;

export interface TimelineHost {
  device(): number;
  range(): { t0Us: number; t1Us: number };
  peak(): { timeUs: number; reservedBytes: number } | undefined;
  markers(): readonly MarkerView[];
  momentUs(): number | undefined;
  onMoment(timeUs: number): void;
  /** Note [Time origin]: the axis counts seconds from this (the first allocator event); default: range start */
  originUs?(): number;
}

export class TimelinePanel {
  private readonly canvas: HTMLCanvasElement;
  private readonly tooltip: HTMLElement;
  private readonly status: HTMLElement;
  private data: TimelineView | undefined;
  private pendingRequest = 0;
  private v0 = 0;
  private v1 = 1;
  private hovered = -1;
  private frameRequested = false;
  private fetchTimer: number | undefined;
  private drag: { x: number; v0: number; v1: number; moved: boolean } | undefined;
  /** frame times (ms) of the last draws, for the benchmark */
  readonly frameTimes: number[] = [];
  onFirstPaint: (() => void) | undefined;
  /** performance.now() of the last timeline query, for the benchmark */
  requestedAt = 0;
  lastDrawStartedAt = 0;

  constructor(
    private readonly root: HTMLElement,
    private readonly host: TimelineHost,
  ) {
    clear(root);
    const button = (label: string, title: string, action: () => void, testId: string) => {
      const b = h('vscode-button', { appearance: 'secondary', title, 'data-testid': testId }, label);
      b.addEventListener('click', action);
      return b;
    };
    this.status = h('span', { class: 'muted timeline-status', 'data-testid': 'timeline-status' });
    const toolbar = h(
      'div',
      { class: 'toolbar' },
      button('Peak', 'Zoom to the peak of allocated memory (P)', () => this.zoomToPeak(), 'timeline-peak'),
      button('Zoom in', 'Zoom in (+ or wheel)', () => this.zoom(0.5), 'timeline-zoom-in'),
      button('Zoom out', 'Zoom out (− or wheel)', () => this.zoom(2), 'timeline-zoom-out'),
      button('Whole trace', 'Show the whole trace (Home)', () => this.reset(), 'timeline-reset'),
      this.status,
    );
    this.canvas = h('canvas', {
      class: 'timeline-canvas',
      tabindex: 0,
      role: 'img',
      'data-testid': 'timeline-canvas',
      'aria-label': 'Active memory timeline. Arrow keys pan, plus and minus zoom, Home shows everything, P jumps to the peak, Enter selects the moment.',
    });
    this.tooltip = h('div', { class: 'tooltip', role: 'tooltip', hidden: true });
    const wrap = h('div', { class: 'timeline-wrap' }, this.canvas, this.tooltip);
    root.append(
      toolbar,
      wrap,
      h('p', { class: 'muted' }, 'Each band is one allocation, stacked in allocation order; grey is memory in allocations too small or short to draw at this zoom. The line is reserved memory. Click a band to open its source line and show the segment map at that moment.'),
    );
    this.attachInput();
    new ResizeObserver(() => this.invalidate()).observe(wrap);
    const w = getState().window;
    if (w) {
      this.v0 = w.v0;
      this.v1 = w.v1;
    } else {
      this.resetWindow();
    }
  }

  /** The trace changed (new file or device): show all of it unless the restored state says otherwise. */
  resetForDevice(keepWindow: boolean): void {
    this.data = undefined;
    if (!keepWindow) this.resetWindow();
    this.invalidate();
  }

  /** The trace grew from `previousEndUs`: refetch; a view that reached the old end follows the new one. */
  refresh(previousEndUs: number): void {
    this.data = undefined;
    if (this.v1 >= previousEndUs) {
      const { t1Us } = this.host.range();
      this.v1 = Math.max(this.v1, t1Us);
      updateState({ window: { v0: this.v0, v1: this.v1 } });
    }
    this.invalidate();
  }

  onData(view: TimelineView): void {
    if (view.requestId !== this.pendingRequest) return; // a newer request is on its way
    this.data = view;
    this.invalidate(false);
  }

  /** Called when the tab becomes visible (a hidden canvas has no size). */
  show(): void {
    this.invalidate();
  }

  toDataUrl(): string {
    this.draw();
    return this.canvas.toDataURL('image/png');
  }

  zoomToPeak(): void {
    const peak = this.host.peak();
    if (!peak) return;
    const { t0Us, t1Us } = this.host.range();
    const half = Math.max((t1Us - t0Us) / 20, 1) / 2;
    this.setWindow(peak.timeUs - half, peak.timeUs + half);
    this.host.onMoment(peak.timeUs);
  }

  private resetWindow(): void {
    const { t0Us, t1Us } = this.host.range();
    this.v0 = t0Us;
    this.v1 = Math.max(t1Us, t0Us + 1);
  }

  private reset(): void {
    this.resetWindow();
    this.setWindow(this.v0, this.v1);
  }

  private zoom(factor: number, anchorFraction = 0.5): void {
    const w = this.v1 - this.v0;
    const anchor = this.v0 + anchorFraction * w;
    const nw = Math.max(w * factor, 2); // 2 µs: below that, timestamps are the resolution
    this.setWindow(anchor - anchorFraction * nw, anchor + (1 - anchorFraction) * nw);
  }

  private setWindow(v0: number, v1: number): void {
    const { t0Us, t1Us } = this.host.range();
    const full = Math.max(t1Us - t0Us, 1);
    let w = Math.min(v1 - v0, full);
    if (!(w > 0)) w = full;
    let a = v0;
    if (a < t0Us) a = t0Us;
    if (a + w > t0Us + full) a = t0Us + full - w;
    this.v0 = a;
    this.v1 = a + w;
    updateState({ window: { v0: this.v0, v1: this.v1 } });
    this.invalidate();
  }

  private invalidate(fetch = true): void {
    if (fetch) this.scheduleFetch();
    if (this.frameRequested) return;
    this.frameRequested = true;
    requestAnimationFrame(() => {
      this.frameRequested = false;
      this.draw();
    });
  }

  private plotWidth(): number {
    return Math.max(50, Math.floor(this.canvas.clientWidth || this.root.clientWidth || 800) - MARGIN.left - MARGIN.right);
  }

  private scheduleFetch(): void {
    const d = this.data;
    const w = this.v1 - this.v0;
    const range = this.host.range();
    const covers = d && d.device === this.host.device() && d.t0Us <= Math.max(this.v0, range.t0Us) && d.t1Us >= Math.min(this.v1, range.t1Us);
    // Data fetched for a much wider window is too coarse once zoomed in; for a narrower one it is missing.
    const fine = d && (d.t1Us - d.t0Us) / w < 8;
    if (covers && fine) return;
    if (this.fetchTimer !== undefined) clearTimeout(this.fetchTimer);
    this.fetchTimer = window.setTimeout(() => this.fetch(), d ? 60 : 0);
  }

  private fetch(): void {
    this.fetchTimer = undefined;
    if (!this.canvas.isConnected || this.canvas.clientWidth === 0) return; // hidden tab: fetched on show()
    const { t0Us, t1Us } = this.host.range();
    const w = this.v1 - this.v0;
    // One visible width of margin on each side, so a pan shows data at once while the next answer comes.
    const a = Math.max(t0Us, this.v0 - w);
    const b = Math.min(Math.max(t1Us, t0Us + 1), this.v1 + w);
    const buckets = Math.min(8192, Math.max(1, Math.round((this.plotWidth() * (b - a)) / w)));
    this.pendingRequest = newRequestId();
    this.requestedAt = performance.now();
    send({ type: 'requestTimeline', requestId: this.pendingRequest, device: this.host.device(), t0Us: a, t1Us: b, buckets, maxSpans: MAX_SPANS });
  }

  private draw(): void {
    const started = performance.now();
    this.lastDrawStartedAt = started;
    const cssW = Math.floor(this.canvas.clientWidth);
    if (cssW === 0) return;
    const dpr = window.devicePixelRatio || 1;
    const cw = Math.round(cssW * dpr);
    const ch = Math.round(HEIGHT * dpr);
    if (this.canvas.width !== cw || this.canvas.height !== ch) {
      this.canvas.width = cw;
      this.canvas.height = ch;
      this.canvas.style.height = `${HEIGHT}px`;
    }
    const ctx = this.canvas.getContext('2d');
    if (!ctx) return;
    ctx.setTransform(1, 0, 0, 1, 0, 0);
    ctx.clearRect(0, 0, cw, ch);
    const left = Math.round(MARGIN.left * dpr);
    const top = Math.round(MARGIN.top * dpr);
    const pw = Math.max(1, cw - left - Math.round(MARGIN.right * dpr));
    const ph = Math.max(1, ch - top - Math.round(MARGIN.bottom * dpr));
    const d = this.data;
    const yMax = this.yMax();
    const v0 = this.v0;
    const v1 = this.v1;
    const fg = themeColor('--vscode-foreground', '#cccccc');
    const muted = themeColor('--vscode-descriptionForeground', '#999999');

    if (d) {
      const img = ctx.createImageData(pw, ph);
      const px = new Uint32Array(img.data.buffer);
      const scale = ph / yMax;
      const n = d.buckets;
      const span = d.t1Us - d.t0Us || 1;
      const spans = d.spans;
      const hovered = this.hovered;
      sweepColumns(spans, v0, v1, pw, (c, live) => {
        let base = 0;
        for (let k = 0; k < live.length; k++) {
          const i = live[k];
          const size = spans.size[i];
          const y1 = ph - Math.round(base * scale);
          const y0 = Math.max(0, ph - Math.round((base + size) * scale));
          if (y1 > y0) {
            const color = i === hovered ? HOVER : PALETTE32[colorIndex(spans.stackId[i], i)];
            for (let y = y0; y < y1; y++) px[y * pw + c] = color;
          }
          base += size;
        }
        // Allocated memory not covered by drawn bands (small/short allocations): the grey envelope on top,
        // darker up to the bucket's minimum, lighter up to its maximum (what it swings through in a pixel).
        const t = v0 + ((c + 0.5) * (v1 - v0)) / pw;
        const bi = Math.floor(((t - d.t0Us) / span) * n);
        if (bi >= 0 && bi < n) {
          const low = Math.max(base, d.allocatedMin[bi]);
          const high = d.allocatedMax[bi];
          const yBase = ph - Math.round(base * scale);
          const yLow = Math.max(0, ph - Math.round(low * scale));
          const yHigh = Math.max(0, ph - Math.round(high * scale));
          for (let y = yLow; y < yBase; y++) px[y * pw + c] = OTHER;
          for (let y = yHigh; y < Math.min(yLow, yBase); y++) px[y * pw + c] = OTHER_RANGE;
        }
      });
      ctx.putImageData(img, left, top);

      // Reserved memory as a line over the bands.
      ctx.strokeStyle = themeColor('--vscode-charts-red', '#f14c4c');
      ctx.lineWidth = Math.max(1, dpr);
      ctx.beginPath();
      let started2 = false;
      for (let c = 0; c < pw; c++) {
        const t = v0 + ((c + 0.5) * (v1 - v0)) / pw;
        const bi = Math.floor(((t - d.t0Us) / span) * n);
        if (bi < 0 || bi >= n) continue;
        const y = top + ph - d.reservedMax[bi] * scale;
        if (started2) ctx.lineTo(left + c, y);
        else ctx.moveTo(left + c, y);
        started2 = true;
      }
      ctx.stroke();
    } else {
      ctx.fillStyle = muted;
      ctx.font = `${12 * dpr}px sans-serif`;
      ctx.fillText('Loading…', left + 10 * dpr, top + 20 * dpr);
    }

    // Markers and the selected moment.
    const xOf = (t: number) => left + ((t - v0) / (v1 - v0)) * pw;
    // User ranges denser than one per 4 px would only grey the plot out: then only key markers are drawn.
    const markers = this.host.markers().filter((m) => m.timeUs >= v0 && m.timeUs <= v1);
    const userDense = markers.filter((m) => isUserMarker(m.kind)).length > pw / (4 * dpr);
    for (const m of markers) {
      if (userDense && isUserMarker(m.kind)) continue;
      ctx.strokeStyle = m.kind === 'oom' ? themeColor('--vscode-errorForeground', '#f48771') : m.kind === 'empty_cache' ? themeColor('--vscode-charts-green', '#89d185') : muted;
      ctx.globalAlpha = isUserMarker(m.kind) ? 0.35 : 0.9;
      ctx.beginPath();
      ctx.moveTo(Math.round(xOf(m.timeUs)) + 0.5, top);
      ctx.lineTo(Math.round(xOf(m.timeUs)) + 0.5, top + ph);
      ctx.stroke();
    }
    ctx.globalAlpha = 1;
    const moment = this.host.momentUs();
    if (moment !== undefined && moment >= v0 && moment <= v1) {
      ctx.strokeStyle = themeColor('--vscode-focusBorder', '#007fd4');
      ctx.setLineDash([4 * dpr, 3 * dpr]);
      ctx.beginPath();
      ctx.moveTo(Math.round(xOf(moment)) + 0.5, top);
      ctx.lineTo(Math.round(xOf(moment)) + 0.5, top + ph);
      ctx.stroke();
      ctx.setLineDash([]);
    }

    // Axes: bytes on the left, seconds since the start of the trace below.
    ctx.fillStyle = fg;
    ctx.font = `${11 * dpr}px sans-serif`;
    ctx.textBaseline = 'middle';
    ctx.textAlign = 'right';
    for (let k = 0; k <= 4; k++) {
      const bytes = (yMax * k) / 4;
      const y = top + ph - (ph * k) / 4;
      ctx.fillText(formatBytes(bytes), left - 6 * dpr, y);
      ctx.globalAlpha = 0.15;
      ctx.fillRect(left, Math.round(y), pw, 1);
      ctx.globalAlpha = 1;
    }
    ctx.textAlign = 'center';
    ctx.textBaseline = 'top';
    const t0 = this.host.originUs?.() ?? this.host.range().t0Us;
    for (let k = 0; k <= 5; k++) {
      const t = v0 + ((v1 - v0) * k) / 5;
      ctx.fillText(formatSeconds(t - t0, v1 - v0), Math.min(left + pw - 20 * dpr, left + (pw * k) / 5), top + ph + 6 * dpr);
    }

    const ms = performance.now() - started;
    this.frameTimes.push(ms);
    if (this.frameTimes.length > 600) this.frameTimes.shift();
    if (d) {
      this.status.textContent = `${formatSeconds(v1 - v0, v1 - v0)} shown · ${d.spans.startUs.length.toLocaleString('en-US')} allocations drawn${d.spansTruncated ? ' (largest in view)' : ''}`;
      this.canvas.dataset.painted = String(d.requestId);
      if (this.onFirstPaint) {
        const cb = this.onFirstPaint;
        this.onFirstPaint = undefined;
        cb();
      }
    }
  }

  private yMax(): number {
    const peak = this.host.peak()?.reservedBytes ?? 0;
    let m = peak;
    const d = this.data;
    if (d) for (let i = 0; i < d.buckets; i++) m = Math.max(m, d.reservedMax[i], d.allocatedMax[i]);
    return m > 0 ? m * 1.05 : 1;
  }

  /** Canvas CSS position → (time, bytes), or undefined outside the plot. */
  private at(ev: { offsetX: number; offsetY: number }): { t: number; bytes: number } | undefined {
    const pw = this.canvas.clientWidth - MARGIN.left - MARGIN.right;
    const ph = HEIGHT - MARGIN.top - MARGIN.bottom;
    const x = ev.offsetX - MARGIN.left;
    const y = ev.offsetY - MARGIN.top;
    if (x < 0 || x > pw || y < 0 || y > ph) return undefined;
    return { t: this.v0 + (x / pw) * (this.v1 - this.v0), bytes: ((ph - y) / ph) * this.yMax() };
  }

  private attachInput(): void {
    const c = this.canvas;
    c.addEventListener('wheel', (e) => {
      e.preventDefault();
      const pw = c.clientWidth - MARGIN.left - MARGIN.right;
      const frac = Math.min(1, Math.max(0, (e.offsetX - MARGIN.left) / pw));
      this.zoom(Math.exp(e.deltaY * 0.0015), frac);
    }, { passive: false });
    c.addEventListener('pointerdown', (e) => {
      c.setPointerCapture(e.pointerId);
      this.drag = { x: e.offsetX, v0: this.v0, v1: this.v1, moved: false };
    });
    c.addEventListener('pointermove', (e) => {
      if (this.drag) {
        const dx = e.offsetX - this.drag.x;
        if (Math.abs(dx) > 3) this.drag.moved = true;
        if (this.drag.moved) {
          const pw = c.clientWidth - MARGIN.left - MARGIN.right;
          const dt = (-dx / pw) * (this.drag.v1 - this.drag.v0);
          this.setWindow(this.drag.v0 + dt, this.drag.v1 + dt);
          this.tooltip.hidden = true;
          return;
        }
      }
      this.hover(e);
    });
    c.addEventListener('pointerup', (e) => {
      const drag = this.drag;
      this.drag = undefined;
      if (drag && !drag.moved) this.click(e);
    });
    c.addEventListener('pointerleave', () => {
      this.tooltip.hidden = true;
      if (this.hovered !== -1) {
        this.hovered = -1;
        this.invalidate(false);
      }
    });
    c.addEventListener('keydown', (e) => {
      const w = this.v1 - this.v0;
      const keys: Record<string, () => void> = {
        ArrowLeft: () => this.setWindow(this.v0 - w / 10, this.v1 - w / 10),
        ArrowRight: () => this.setWindow(this.v0 + w / 10, this.v1 + w / 10),
        '+': () => this.zoom(0.5),
        '=': () => this.zoom(0.5),
        '-': () => this.zoom(2),
        Home: () => this.reset(),
        '0': () => this.reset(),
        p: () => this.zoomToPeak(),
        P: () => this.zoomToPeak(),
        Enter: () => this.host.onMoment((this.v0 + this.v1) / 2),
      };
      const action = keys[e.key];
      if (action) {
        e.preventDefault();
        action();
      }
    });
  }

  private hit(e: PointerEvent): { t: number; index: number } | undefined {
    const p = this.at(e);
    if (!p || !this.data) return undefined;
    const { index } = bandAt(this.data.spans, p.t, p.bytes);
    return { t: p.t, index };
  }

  private hover(e: PointerEvent): void {
    const hit = this.hit(e);
    const index = hit?.index ?? -1;
    if (index !== this.hovered) {
      this.hovered = index;
      this.invalidate(false);
    }
    if (!hit || index < 0 || !this.data) {
      this.tooltip.hidden = true;
      return;
    }
    const s = this.data.spans;
    const t0 = this.host.originUs?.() ?? this.host.range().t0Us;
    const life = s.liveAtEnd[index] ? 'live at the end of the trace' : `freed at ${atTime(s.endUs[index] - t0)} (lifetime ${formatSeconds(s.endUs[index] - s.startUs[index], s.endUs[index] - s.startUs[index])})`;
    const render = () => {
      clear(this.tooltip);
      this.tooltip.append(
        h('div', { class: 'tooltip-title' }, `${formatBytes(s.size[index])} at 0x${s.address[index].toString(16)}`),
        h('div', {}, `allocated at ${atTime(s.startUs[index] - t0)}, ${life}`),
        h('pre', { class: 'stack' }, stackLines(cachedStack(s.stackId[index])).join('\n')),
        h('div', { class: 'muted' }, 'Click: open the source line and show the segment map at this moment'),
      );
    };
    render();
    if (!cachedStack(s.stackId[index]) && s.stackId[index] > 0) void getStack(s.stackId[index]).then(() => this.hovered === index && render());
    placeTooltip(this.tooltip, e);
  }

  private click(e: PointerEvent): void {
    const hit = this.hit(e);
    if (!hit) return;
    this.host.onMoment(hit.t);
    this.invalidate(false);
    if (hit.index < 0 || !this.data) return;
    const stackId = this.data.spans.stackId[hit.index];
    if (stackId <= 0) return;
    void getStack(stackId).then((st) => {
      const f = sourceFrame(st);
      if (f) send({ type: 'goToSource', file: f.file, line: f.line });
    });
  }
}

/** "12.345 s", "850 ms" or "120 µs", precise enough for the visible span. */
export function formatSeconds(us: number, spanUs: number): string {
  if (spanUs >= 2e6) return `${(us / 1e6).toFixed(spanUs >= 2e7 ? 1 : 3)} s`;
  if (spanUs >= 2e3) return `${(us / 1e3).toFixed(1)} ms`;
  return `${us.toFixed(0)} µs`;
}

/** A moment since the start of the trace, in seconds (ms precision). */
export function atTime(us: number): string {
  return `${(us / 1e6).toFixed(3)} s`;
}

function isUserMarker(kind: MarkerView['kind']): boolean {
  return kind === 'user' || kind === 'range_begin' || kind === 'range_end';
}
