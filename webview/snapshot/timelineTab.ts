// Active memory timeline: every allocation as a band over time, stacked in allocation order (memory_viz's
// Active Memory Timeline), drawn on one canvas by column rasterisation (stacking.ts) so panning stays fluid
// whatever the trace length. Pan: drag, ←/→. Zoom: wheel, +/−. Home: whole trace. P: peak. Esc: all owners.
//
// Note [No anonymous grey]: the largest allocations in view are drawn as their own bands, coloured by their
// owner (source line, the sites table's colours); the rest of each owner's live memory — allocations too
// small or short to draw alone — is one lighter band per owner on top, from the host's per-bucket owner
// totals (Note [Owner bands] in native/addon/src/aggregate.cpp). Bands and totals are sampled at the same
// time per column (its bucket's centre), so a column's coloured height is allocated memory at that time.
import { formatBytes } from '../../src/core/base/units/bytes';
import type { MarkersView, MarkerView, TimelineView } from '../../src/core/base/protocol/snapshot';
import { TIMELINE_MAX_SPANS } from '../../src/core/base/protocol/snapshot';
import { getState, newRequestId, send, updateState } from './api';
import { clear, h, themeColor } from './dom';
import { colorIndex, ownerCss, ownerRaster, PALETTE32 } from './palette';
import { sweepColumns } from './stacking';
import { cachedStack, getStack, sourceFrame, stackLines } from './stacks';
import { placeTooltip } from './tooltip';
import { atTime, formatSeconds } from './timeFormat';

const MARGIN = { left: 70, right: 12, top: 10, bottom: 24 };
const HEIGHT = 380;
// Note [Timeline detail]: 3 000 bands are plenty for a 1–2 k pixel wide plot (memory_viz defaults to 15 000
// polygons); what is not drawn as a band is drawn by owner (Note [No anonymous grey]), so totals stay right.
const MAX_SPANS = TIMELINE_MAX_SPANS;
const OTHER = (0xff << 24) | (0x80 << 16) | (0x80 << 8) | 0x80;
const OTHER_RANGE = (0xff << 24) | (0x5a << 16) | (0x5a << 8) | 0x5a;
const HOVER = (0xff << 24) | (0xff << 16) | (0xff << 8) | 0xff;

/** What is under the pointer: one allocation's band, or an owner's aggregate band in a bucket. */
type Hit = { t: number; index: number; group: number; bucket: number };

export interface TimelineHost {
  device(): number;
  range(): { t0Us: number; t1Us: number };
  peak(): { timeUs: number; reservedBytes: number } | undefined;
  markers(): readonly MarkerView[];
  /** the summary's markers were thinned: a zoomed view asks for its window's own (Note [Markers by range]) */
  markersTruncated(): boolean;
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
  /** the markers of the last fetched window when the summary's were thinned (Note [Markers by range]) */
  private windowMarkers: (MarkersView & { generation: number }) | undefined;
  private markersRequest = 0;
  private markersKey = '';
  /** the window of the last timeline request (with its margins) */
  private fetched: { a: number; b: number } | undefined;
  /** what the pending request asked, '' once answered; generation: bumped when the trace or device changes */
  private pendingKey = '';
  private generation = 0;
  private v0 = 0;
  private v1 = 1;
  private hovered = -1;
  private hoveredGroup = -1;
  /** owner group the timeline is filtered to (click on an aggregate band or a legend entry) */
  private ownerFilter: number | undefined;
  private readonly legend: HTMLElement;
  private legendKey = '';
  private colors: ReturnType<typeof ownerRaster> | undefined;
  private raster: { img: ImageData; px: Uint32Array } | undefined;
  private drawn = new Float64Array(0);
  private frameRequested = false;
  private fetchTimer: number | undefined;
  private drag: { x: number; v0: number; v1: number; moved: boolean } | undefined;
  /** frame times (ms) of the last draws, for the benchmark */
  readonly frameTimes: number[] = [];
  onFirstPaint: (() => void) | undefined;
  /** performance.now() of the last timeline query, for the benchmark */
  requestedAt = 0;
  lastDrawStartedAt = 0;
  /** performance.now() when the last answer was taken and when a frame first drew it, for the benchmark */
  dataAt = 0;
  dataDrawnAt = 0;

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
      button('All owners', 'Show every owner again (Esc)', () => this.setOwnerFilter(undefined), 'timeline-all-owners'),
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
    this.legend = h('div', { class: 'timeline-legend', 'data-testid': 'timeline-legend' });
    root.append(
      toolbar,
      wrap,
      this.legend,
      h(
        'p',
        { class: 'muted' },
        'Colour is the owner: the source line that allocated the memory (innermost user frame, as in Top sites). Darker bands are single allocations, stacked in allocation order; the lighter band of each colour is that owner\'s allocations too small or short to draw alone at this zoom. The line is reserved memory. Click an allocation to open its source line; click a lighter band or a legend entry to show only that owner.',
      ),
    );
    this.updateAllOwnersButton();
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
    this.generation++;
    if (!keepWindow) this.resetWindow();
    this.invalidate();
  }

  /** The trace grew from `previousEndUs`: refetch; a view that reached the old end follows the new one. */
  refresh(previousEndUs: number): void {
    this.data = undefined;
    this.generation++;
    if (this.v1 >= previousEndUs) {
      const { t1Us } = this.host.range();
      this.v1 = Math.max(this.v1, t1Us);
      updateState({ window: { v0: this.v0, v1: this.v1 } });
    }
    this.invalidate();
  }

  onData(view: TimelineView): void {
    if (view.requestId !== this.pendingRequest) return; // a newer request is on its way
    this.pendingKey = '';
    this.data = view;
    this.dataAt = performance.now();
    this.dataDrawnAt = 0;
    // Once per answer, not per frame: the owners' raster colours and the legend.
    this.colors = view.owners ? ownerRaster(view.owners.groups) : undefined;
    this.updateLegend(view);
    this.invalidate(false);
  }

  /**
   * Called when the tab becomes visible (a hidden canvas has no size), and when the summary (with its markers)
   * arrived: the first timeline request usually goes out before it, when it was not yet known whether the
   * markers were thinned, so the window's markers are asked for now (Note [Markers by range]).
   */
  show(): void {
    if (this.fetched) this.fetchMarkers(this.fetched.a, this.fetched.b);
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
    // The same question already on its way (the panel shows itself again when the summary arrives): wait
    // for its answer rather than discard it — at 10 M events that was a second full query before the first
    // paint. A request unanswered for 2 s is asked again.
    const key = `${this.generation}|${this.host.device()}|${a}|${b}|${buckets}|${this.ownerFilter}`;
    if (key === this.pendingKey && performance.now() - this.requestedAt < 2000) return;
    this.pendingKey = key;
    this.pendingRequest = newRequestId();
    this.requestedAt = performance.now();
    send({ type: 'requestTimeline', requestId: this.pendingRequest, device: this.host.device(), t0Us: a, t1Us: b, buckets, maxSpans: MAX_SPANS, owner: this.ownerFilter });
    this.fetched = { a, b };
    this.fetchMarkers(a, b);
  }

  /** Note [Markers by range]: a window narrower than the run, when the summary's markers were thinned. */
  private fetchMarkers(a: number, b: number): void {
    const { t0Us, t1Us } = this.host.range();
    if (!this.host.markersTruncated() || (a <= t0Us && b >= t1Us)) return;
    const key = `${this.generation}|${this.host.device()}|${a}|${b}`;
    if (key === this.markersKey) return;
    this.markersKey = key;
    this.markersRequest = newRequestId();
    send({ type: 'requestMarkers', requestId: this.markersRequest, device: this.host.device(), t0Us: a, t1Us: b });
  }

  /** The host's answer to requestMarkers (a stale one, for an earlier window, is dropped). */
  onMarkers(view: MarkersView): void {
    if (view.requestId !== this.markersRequest) return;
    this.windowMarkers = { ...view, generation: this.generation };
    this.invalidate(false);
  }

  /** The markers to draw over [v0, v1]: the window's own when they cover it, else the summary's (thinned). */
  private markersOver(v0: number, v1: number): readonly MarkerView[] {
    const w = this.windowMarkers;
    // a device switch or a grown trace bumps the generation: an answer from before it is not used
    if (w && w.generation === this.generation && w.t0Us <= v0 && w.t1Us >= v1) return w.markers;
    return this.host.markers();
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
    if (d && !this.dataDrawnAt) this.dataDrawnAt = started;
    const yMax = this.yMax();
    const v0 = this.v0;
    const v1 = this.v1;
    const fg = themeColor('--vscode-foreground', '#cccccc');
    const muted = themeColor('--vscode-descriptionForeground', '#999999');

    if (d) {
      // One raster reused across frames: a fresh 2 MB ImageData per frame made the collector's pauses
      // the slowest frames of a pan.
      if (!this.raster || this.raster.img.width !== pw || this.raster.img.height !== ph) {
        const fresh = ctx.createImageData(pw, ph);
        this.raster = { img: fresh, px: new Uint32Array(fresh.data.buffer) };
      }
      const { img, px } = this.raster;
      px.fill(0);
      const scale = ph / yMax;
      const n = d.buckets;
      const spans = d.spans;
      const hovered = this.hovered;
      const hoveredGroup = this.hoveredGroup;
      const owners = d.owners;
      const ownerOf = spans.owner;
      const sizeOf = spans.size;
      const filter = this.ownerFilter ?? -1;
      const G = owners?.groups ?? 0;
      const before = G - 1;
      const colors = this.colors ?? ownerRaster(2);
      if (this.drawn.length !== G) this.drawn = new Float64Array(G);
      const drawn = this.drawn;
      const bucketOf = this.bucketOfColumn(d, pw);
      sweepColumns(
        spans,
        v0,
        v1,
        pw,
        (c, live) => {
          // Bytes below the next band, and the pixel row it starts at (one rounding per boundary, so the
          // column's height is its total bytes to the pixel).
          let base = 0;
          let yBase = ph;
          const bi = bucketOf(c);
          if (owners && bi >= 0) {
            drawn.fill(0);
            for (let k = 0; k < live.length; k++) drawn[ownerOf[live[k]]] += sizeOf[live[k]];
            // Memory from before the trace is the oldest: at the bottom, as allocation order stacks it.
            const rest = owners.bytes[bi * G + before] - drawn[before];
            if (rest > 0 && (filter < 0 || filter === before)) {
              base += rest;
              const y0 = Math.max(0, ph - Math.round(base * scale));
              const color = before === hoveredGroup ? HOVER : colors.aggregate[before];
              for (let y = y0; y < yBase; y++) px[y * pw + c] = color;
              yBase = y0;
            }
          }
          for (let k = 0; k < live.length; k++) {
            const i = live[k];
            const g = owners ? ownerOf[i] : -1;
            if (filter >= 0 && g !== filter) continue;
            base += sizeOf[i];
            const y0 = Math.max(0, ph - Math.round(base * scale));
            if (y0 < yBase) {
              const color = i === hovered ? HOVER : g < 0 ? PALETTE32[colorIndex(spans.stackId[i], i)] : (i & 1 ? colors.alt : colors.band)[g];
              for (let y = y0; y < yBase; y++) px[y * pw + c] = color;
              yBase = y0;
            }
          }
          if (bi < 0) return;
          if (owners) {
            // Each owner's memory not drawn as its own bands, one band per owner (Note [No anonymous grey]).
            for (let g = 0; g < before; g++) {
              if (filter >= 0 && g !== filter) continue;
              const rest = owners.bytes[bi * G + g] - drawn[g];
              if (rest <= 0) continue;
              base += rest;
              const y0 = Math.max(0, ph - Math.round(base * scale));
              const color = g === hoveredGroup ? HOVER : colors.aggregate[g];
              for (let y = y0; y < yBase; y++) px[y * pw + c] = color;
              yBase = y0;
            }
            return;
          }
          // A host without owner totals: the grey envelope, darker up to the bucket's minimum.
          const yLow = Math.max(0, ph - Math.round(Math.max(base, d.allocatedMin[bi]) * scale));
          const yHigh = Math.max(0, ph - Math.round(d.allocatedMax[bi] * scale));
          for (let y = yLow; y < yBase; y++) px[y * pw + c] = OTHER;
          for (let y = yHigh; y < Math.min(yLow, yBase); y++) px[y * pw + c] = OTHER_RANGE;
        },
        (c) => this.columnTime(d, pw, c, bucketOf(c)),
      );
      ctx.putImageData(img, left, top);

      const span = d.t1Us - d.t0Us || 1;
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
    const markers = this.markersOver(v0, v1).filter((m) => m.timeUs >= v0 && m.timeUs <= v1);
    const userDense = markers.filter((m) => isUserMarker(m.kind)).length > pw / (4 * dpr);
    let markersDrawn = 0;
    for (const m of markers) {
      if (userDense && isUserMarker(m.kind)) continue;
      markersDrawn++;
      ctx.strokeStyle = m.kind === 'oom' ? themeColor('--vscode-errorForeground', '#f48771') : m.kind === 'empty_cache' ? themeColor('--vscode-charts-green', '#89d185') : muted;
      ctx.globalAlpha = isUserMarker(m.kind) ? 0.35 : 0.9;
      ctx.beginPath();
      ctx.moveTo(Math.round(xOf(m.timeUs)) + 0.5, top);
      ctx.lineTo(Math.round(xOf(m.timeUs)) + 0.5, top + ph);
      ctx.stroke();
    }
    ctx.globalAlpha = 1;
    this.canvas.dataset.markers = String(markersDrawn);
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
      const only = this.ownerFilter !== undefined ? ` · only ${this.ownerName(this.ownerFilter)}` : '';
      this.status.textContent = `${formatSeconds(v1 - v0, v1 - v0)} shown · ${d.spans.startUs.length.toLocaleString('en-US')} allocations drawn alone${d.spansTruncated ? ' (largest in view)' : ''}, the rest by owner${only}`;
      this.canvas.dataset.painted = String(d.requestId);
      if (this.onFirstPaint) {
        const cb = this.onFirstPaint;
        this.onFirstPaint = undefined;
        cb();
      }
    }
  }

  /** Column → bucket of `d` (−1 outside it); columns sample [v0, v1) at their centres. */
  private bucketOfColumn(d: TimelineView, pw: number): (c: number) => number {
    const v0 = this.v0;
    const dt = (this.v1 - v0) / pw;
    const span = d.t1Us - d.t0Us || 1;
    return (c) => {
      const bi = Math.floor(((v0 + (c + 0.5) * dt - d.t0Us) / span) * d.buckets);
      return bi >= 0 && bi < d.buckets ? bi : -1;
    };
  }

  /** The time a column shows: its bucket's centre, where the host sampled the owner totals. */
  private columnTime(d: TimelineView, pw: number, c: number, bi: number): number {
    if (bi < 0) return this.v0 + ((c + 0.5) * (this.v1 - this.v0)) / pw;
    return d.t0Us + ((bi + 0.5) * (d.t1Us - d.t0Us)) / d.buckets;
  }

  /** An owner group's name, as the hover and the legend say it. */
  private ownerName(g: number): string {
    const o = this.data?.owners;
    if (!o) return '';
    if (g === o.groups - 1) return 'before the trace (allocated before recording began)';
    if (g === o.groups - 2) return `other lines (every line outside the top ${o.lines.length})`;
    const l = o.lines[g];
    if (!l) return '';
    return l.file.startsWith('<') ? 'allocations without a user frame' : `${l.displayFile}:${l.line}`;
  }

  private setOwnerFilter(g: number | undefined): void {
    if (this.ownerFilter === g) return;
    this.ownerFilter = g;
    this.hovered = -1;
    this.hoveredGroup = -1;
    this.updateAllOwnersButton();
    this.legendKey = '';
    if (this.data) this.updateLegend(this.data);
    // The largest allocations of this owner replace the largest of all.
    if (this.fetchTimer !== undefined) clearTimeout(this.fetchTimer);
    this.fetchTimer = window.setTimeout(() => this.fetch(), 0);
    this.invalidate(false);
  }

  private updateAllOwnersButton(): void {
    const b = this.root.querySelector('[data-testid=timeline-all-owners]') as HTMLElement | null;
    if (b) b.hidden = this.ownerFilter === undefined;
  }

  /** Owner swatches under the chart, rebuilt only when the owners change. */
  private updateLegend(d: TimelineView): void {
    const o = d.owners;
    const any = new Array<boolean>(o?.groups ?? 0).fill(false);
    if (o) for (let k = 0; k < o.bytes.length; k++) if (o.bytes[k] > 0) any[k % o.groups] = true;
    const key = o ? `${this.ownerFilter}|${o.groups}|${o.lines.map((l) => `${l.displayFile}:${l.line}`).join('|')}|${any.join()}` : '';
    if (key === this.legendKey) return;
    this.legendKey = key;
    clear(this.legend);
    if (!o) return;
    for (let g = 0; g < o.groups; g++) {
      if (!any[g] && g >= o.lines.length) continue; // an empty "other lines" / "before the trace"
      const colour = ownerCss(g, o.groups);
      const sw = h('span', { class: 'swatch', 'data-swatch': colour });
      sw.style.background = colour;
      const item = h('button', { class: 'legend-item', 'data-group': g, title: 'Show only this owner', 'aria-pressed': this.ownerFilter === g ? 'true' : 'false' }, sw, this.ownerName(g));
      item.addEventListener('click', () => this.setOwnerFilter(this.ownerFilter === g ? undefined : g));
      this.legend.append(item);
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
      if (this.hovered !== -1 || this.hoveredGroup !== -1) {
        this.hovered = -1;
        this.hoveredGroup = -1;
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
        Escape: () => this.setOwnerFilter(undefined),
      };
      const action = keys[e.key];
      if (action) {
        e.preventDefault();
        action();
      }
    });
  }

  /** The band under the pointer, sampled the way draw() samples its column. */
  private hit(e: PointerEvent): Hit | undefined {
    const p = this.at(e);
    const d = this.data;
    if (!p || !d) return undefined;
    const pw = Math.max(1, this.canvas.clientWidth - MARGIN.left - MARGIN.right);
    const c = Math.min(pw - 1, Math.max(0, Math.floor(((p.t - this.v0) / (this.v1 - this.v0)) * pw)));
    const bucket = this.bucketOfColumn(d, pw)(c);
    const t = this.columnTime(d, pw, c, bucket);
    const s = d.spans;
    const owners = d.owners;
    const filter = this.ownerFilter;
    const drawn = new Float64Array(owners?.groups ?? 0);
    let base = 0;
    const before = (owners?.groups ?? 0) - 1;
    if (owners && bucket >= 0 && (filter === undefined || filter === before)) {
      // As draw() stacks it: what is left of "before the trace" at the bottom.
      let rest = owners.bytes[bucket * owners.groups + before];
      for (let i = 0; i < s.startUs.length && s.startUs[i] <= t; i++) if ((s.liveAtEnd[i] || s.endUs[i] > t) && s.owner[i] === before) rest -= s.size[i];
      if (rest > 0 && p.bytes >= 0 && p.bytes < rest) return { t, index: -1, group: before, bucket };
      base = Math.max(0, rest);
    }
    for (let i = 0; i < s.startUs.length && s.startUs[i] <= t; i++) {
      if (!(s.liveAtEnd[i] || s.endUs[i] > t)) continue;
      const g = owners ? s.owner[i] : -1;
      if (filter !== undefined && g !== filter) continue;
      if (p.bytes >= base && p.bytes < base + s.size[i]) return { t, index: i, group: -1, bucket };
      base += s.size[i];
      if (g >= 0) drawn[g] += s.size[i];
    }
    if (!owners || bucket < 0) return { t, index: -1, group: -1, bucket };
    for (let g = 0; g < before; g++) {
      if (filter !== undefined && g !== filter) continue;
      const rest = owners.bytes[bucket * owners.groups + g] - drawn[g];
      if (rest <= 0) continue;
      if (p.bytes >= base && p.bytes < base + rest) return { t, index: -1, group: g, bucket };
      base += rest;
    }
    return { t, index: -1, group: -1, bucket };
  }

  private hover(e: PointerEvent): void {
    const hit = this.hit(e);
    const index = hit?.index ?? -1;
    const group = hit?.group ?? -1;
    if (index !== this.hovered || group !== this.hoveredGroup) {
      this.hovered = index;
      this.hoveredGroup = group;
      this.invalidate(false);
    }
    if (!hit || !this.data || (index < 0 && group < 0)) {
      this.tooltip.hidden = true;
      return;
    }
    const t0 = this.host.originUs?.() ?? this.host.range().t0Us;
    const owners = this.data.owners;
    if (group >= 0 && owners) {
      const at = hit.bucket * owners.groups + group;
      const bytes = owners.bytes[at];
      const count = owners.counts[at];
      clear(this.tooltip);
      this.tooltip.append(
        h('div', { class: 'tooltip-title', 'data-testid': 'timeline-owner-title' }, this.ownerName(group)),
        h('div', { 'data-testid': 'timeline-owner-figures' }, `${formatBytes(bytes)} in ${count.toLocaleString('en-US')} allocation${count === 1 ? '' : 's'} at ${atTime(hit.t - t0)}`),
        h('div', { class: 'muted' }, this.ownerFilter === group ? 'Esc or “All owners”: show every owner' : 'Click: show only this owner'),
      );
      this.tooltip.hidden = false;
      placeTooltip(this.tooltip, e);
      return;
    }
    const s = this.data.spans;
    const life = s.liveAtEnd[index] ? 'live at the end of the trace' : `freed at ${atTime(s.endUs[index] - t0)} (lifetime ${formatSeconds(s.endUs[index] - s.startUs[index], s.endUs[index] - s.startUs[index])})`;
    const owner = owners ? this.ownerName(s.owner[index]) : '';
    // Note [Snapshot extras]: what the snapshot says of this allocation besides its stack.
    const metadata = s.userMetadata?.[index] ?? '';
    const context = s.compileContext?.[index] ?? '';
    const ranges = enclosingRanges(this.markersOver(this.v0, this.v1), s.startUs[index]);
    const render = () => {
      clear(this.tooltip);
      this.tooltip.append(
        h('div', { class: 'tooltip-title' }, `${formatBytes(s.size[index])} at 0x${s.address[index].toString(16)}`),
        h('div', {}, `allocated at ${atTime(s.startUs[index] - t0)}, ${life}`),
        ...(owner ? [h('div', {}, `owner: ${owner}`)] : []),
        ...(metadata ? [h('div', { 'data-testid': 'timeline-tip-metadata' }, `user metadata: ${metadata}`)] : []),
        ...(context ? [h('div', { 'data-testid': 'timeline-tip-context' }, `compile context: ${context}`)] : []),
        ...(ranges.length ? [h('div', { 'data-testid': 'timeline-tip-ranges' }, `in: ${ranges.join(' › ')}`)] : []),
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
    if (hit.group >= 0) {
      this.setOwnerFilter(this.ownerFilter === hit.group ? undefined : hit.group);
      return;
    }
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

function isUserMarker(kind: MarkerView['kind']): boolean {
  return kind === 'user' || kind === 'range_begin' || kind === 'range_end' || kind === 'metadata';
}

/**
 * The annotation ranges (record_function, external_annotations) open at `t`, outermost first: a START with no END
 * of the same name before `t`. From the markers the page holds (the window's, or the summary's thinned ones).
 */
export function enclosingRanges(markers: readonly MarkerView[], t: number): string[] {
  const open: string[] = [];
  for (const m of markers) {
    if (m.timeUs > t) break;
    if (m.kind === 'range_begin') open.push(m.label);
    else if (m.kind === 'range_end') {
      const k = open.lastIndexOf(m.label);
      if (k >= 0) open.splice(k, 1);
    }
  }
  return open;
}
