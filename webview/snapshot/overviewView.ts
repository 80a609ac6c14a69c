// The first view of a big pickle (Note [First view] in src/glue/snapshot/panelHost.ts): allocated and reserved
// over the whole run, from the reader's first pass, painted while the full model is read. The page replaces it
// with the tabs when `opened` arrives.
import { formatBytes } from '../../src/core/base/units/bytes';
import type { OverviewView, RangeChoiceView } from '../../src/core/base/protocol/snapshot';
import { themeColor } from '../common/theme';
import { h } from './dom';
import { overviewOf } from './overviewText';
import { atTime, formatSeconds } from './timeFormat';

type DeviceOverview = OverviewView['devices'][number];

const MARGIN = { left: 72, right: 12, top: 10, bottom: 24 };

/** Renders the overview of `device` (or the first device) into `body`; `painted` runs after the first draw. */
export function renderOverview(body: HTMLElement, view: OverviewView, device: number, painted: () => void): void {
  const d = view.devices.find((x) => x.device === device) ?? view.devices[0];
  if (!d) return;
  const origin = Math.min(...view.devices.map((x) => x.rangeT0Us));
  const canvas = h('canvas', { class: 'overview-canvas', 'data-testid': 'overview-canvas' });
  const section = h(
    'section',
    { class: 'overview', 'data-testid': 'overview' },
    h(
      'div',
      { class: 'loading', 'data-testid': 'overview-loading' },
      h('vscode-progress-ring'),
      h('span', {}, `${overviewOf(d)}; reading full detail of ${view.fileName}…`),
    ),
    h(
      'p',
      { 'data-testid': 'overview-figures' },
      `Peak allocated ${formatBytes(d.peakAllocatedBytes)} at ${atTime(d.peakAtTimeUs - origin)} · peak reserved ${formatBytes(d.peakReservedBytes)}`,
    ),
    canvas,
  );
  body.append(section);
  requestAnimationFrame(() => {
    drawOverview(canvas, d, origin);
    painted();
  });
}

/** Reserved (max per bucket) as an area, allocated as its min–max band: the timeline's two series, coarse. */
function drawOverview(canvas: HTMLCanvasElement, d: DeviceOverview, origin: number): void {
  const dpr = window.devicePixelRatio || 1;
  const cssW = Math.max(200, canvas.parentElement?.clientWidth ?? 800);
  const cssH = 320;
  canvas.style.width = `${cssW}px`;
  canvas.style.height = `${cssH}px`;
  canvas.width = Math.round(cssW * dpr);
  canvas.height = Math.round(cssH * dpr);
  const ctx = canvas.getContext('2d');
  if (!ctx) return;
  const left = Math.round(MARGIN.left * dpr);
  const top = Math.round(MARGIN.top * dpr);
  const pw = Math.max(1, canvas.width - left - Math.round(MARGIN.right * dpr));
  const ph = Math.max(1, canvas.height - top - Math.round(MARGIN.bottom * dpr));
  const yMax = Math.max(1, d.peakReservedBytes, d.peakAllocatedBytes) * 1.05;
  const y = (bytes: number) => top + ph - (ph * Math.max(0, bytes)) / yMax;
  const n = d.buckets;
  // Column c covers buckets [c·n/pw, (c+1)·n/pw): min/max over them (never a bucket skipped).
  const col = (c: number, pick: (k: number) => [number, number]): [number, number] => {
    const k0 = Math.floor((c * n) / pw);
    const k1 = Math.max(k0 + 1, Math.floor(((c + 1) * n) / pw));
    let lo = Infinity;
    let hi = -Infinity;
    for (let k = k0; k < Math.min(n, k1); k++) {
      const [a, b] = pick(k);
      lo = Math.min(lo, a);
      hi = Math.max(hi, b);
    }
    return [lo, hi];
  };
  ctx.fillStyle = themeColor('--vscode-charts-blue', '#3794ff');
  ctx.globalAlpha = 0.25;
  for (let c = 0; c < pw; c++) {
    const [, hi] = col(c, (k) => [d.reservedMin[k], d.reservedMax[k]]);
    if (hi > -Infinity) ctx.fillRect(left + c, y(hi), 1, top + ph - y(hi));
  }
  ctx.globalAlpha = 1;
  ctx.fillStyle = themeColor('--vscode-charts-orange', '#d18616');
  for (let c = 0; c < pw; c++) {
    const [lo, hi] = col(c, (k) => [d.allocatedMin[k], d.allocatedMax[k]]);
    if (hi > -Infinity) ctx.fillRect(left + c, y(hi), 1, Math.max(1, y(lo) - y(hi)));
  }
  const fg = themeColor('--vscode-foreground', '#cccccc');
  ctx.fillStyle = fg;
  ctx.font = `${11 * dpr}px sans-serif`;
  ctx.textAlign = 'right';
  ctx.textBaseline = 'middle';
  for (let k = 0; k <= 4; k++) ctx.fillText(formatBytes((yMax * k) / 4), left - 6 * dpr, y((yMax * k) / 4));
  ctx.textAlign = 'center';
  ctx.textBaseline = 'top';
  const span = d.rangeT1Us - d.rangeT0Us;
  for (let k = 0; k <= 5; k++) {
    const t = d.t0Us + ((d.t1Us - d.t0Us) * k) / 5;
    ctx.fillText(formatSeconds(t - origin, span), Math.min(left + pw - 20 * dpr, left + (pw * k) / 5), top + ph + 6 * dpr);
  }
  canvas.dataset.painted = 'overview';
}

/**
 * Note [Range-first open] (native/addon/src/range_open.cpp): the overview of a file the host does not read whole
 * until asked, with a window picker: drag across the plot (or type the seconds) and "Load this range" asks the host
 * for that window only; "Load everything" for the whole file. Times are seconds since the file's first event, as the
 * tabs show them once loaded.
 */
export function renderRangeChoice(body: HTMLElement, view: RangeChoiceView, device: number, painted: () => void, pick: (w: { fromUs: number; toUs: number } | undefined) => void): void {
  const d = view.devices.find((x) => x.device === device) ?? view.devices[0];
  if (!d) return;
  const origin = Math.min(...view.devices.map((x) => x.rangeT0Us));
  const lo = (d.rangeT0Us - origin) / 1e6;
  const hi = (d.rangeT1Us - origin) / 1e6;
  const canvas = h('canvas', { class: 'overview-canvas', 'data-testid': 'overview-canvas' }) as HTMLCanvasElement;
  const shade = h('div', { class: 'range-shade', 'data-testid': 'range-shade', hidden: true });
  const plot = h('div', { class: 'range-plot', 'data-testid': 'range-plot' }, canvas, shade);
  const field = (testid: string, label: string, value: number) =>
    h('input', { type: 'number', step: '0.001', min: lo.toFixed(3), max: hi.toFixed(3), value: value.toFixed(3), 'data-testid': testid, 'aria-label': label }) as HTMLInputElement;
  const from = field('range-from', 'From (s)', lo);
  const to = field('range-to', 'To (s)', hi);
  const load = h('vscode-button', { 'data-testid': 'load-range', disabled: true }, 'Load this range');
  const whole = h('vscode-button', { appearance: 'secondary', 'data-testid': 'load-whole' }, 'Load everything');
  const status = h('span', { class: 'muted', 'data-testid': 'range-status' });
  const why = view.bySize
    ? `${view.fileName} is ${formatBytes(view.fileBytes)}: read whole it would hold about that much memory.`
    : `${view.fileName} (${formatBytes(view.fileBytes)}) opens by range, as asked.`;
  body.append(
    h(
      'section',
      { class: 'overview range-choice', 'data-testid': 'range-choice' },
      h('p', { 'data-testid': 'range-why' }, `${why} Drag across the overview of its ${d.events.toLocaleString('en-US')} events on device ${d.device} to select a time window, or type it, then load only that range.`),
      h(
        'p',
        { 'data-testid': 'overview-figures' },
        `Peak allocated ${formatBytes(d.peakAllocatedBytes)} at ${atTime(d.peakAtTimeUs - origin)} · peak reserved ${formatBytes(d.peakReservedBytes)}`,
      ),
      plot,
      h('div', { class: 'range-controls' }, h('label', {}, 'From ', from, ' s'), h('label', {}, 'to ', to, ' s'), load, whole, status),
    ),
  );
  // The window in seconds since the origin, from the fields; undefined while it is not a window of the run.
  const chosen = (): [number, number] | undefined => {
    const a = Math.max(lo, Number(from.value));
    const b = Math.min(hi, Number(to.value));
    return Number.isFinite(a) && Number.isFinite(b) && b > a ? [a, b] : undefined;
  };
  const plotX = (sec: number) => {
    const w = canvas.clientWidth - MARGIN.left - MARGIN.right;
    return MARGIN.left + (w * ((sec - lo) * 1e6 + d.rangeT0Us - d.t0Us)) / Math.max(1, d.t1Us - d.t0Us);
  };
  const plotSeconds = (x: number) => {
    const w = Math.max(1, canvas.clientWidth - MARGIN.left - MARGIN.right);
    const us = d.t0Us + ((x - MARGIN.left) / w) * (d.t1Us - d.t0Us);
    return Math.min(hi, Math.max(lo, (us - origin) / 1e6));
  };
  const update = () => {
    const w = chosen();
    const whole = w !== undefined && w[0] <= lo && w[1] >= hi;
    (load as unknown as { disabled: boolean }).disabled = w === undefined || whole;
    shade.hidden = w === undefined || whole;
    if (w && !whole) {
      shade.style.left = `${plotX(w[0])}px`;
      shade.style.width = `${Math.max(1, plotX(w[1]) - plotX(w[0]))}px`;
      status.textContent = `${((100 * (w[1] - w[0])) / Math.max(1e-9, hi - lo)).toFixed(1)} % of the run`;
    } else status.textContent = w ? 'the whole run: select part of it' : 'not a window of the run';
  };
  from.addEventListener('input', update);
  to.addEventListener('input', update);
  let dragFrom: number | undefined;
  const xOf = (e: PointerEvent) => e.clientX - canvas.getBoundingClientRect().left;
  canvas.addEventListener('pointerdown', (e) => {
    dragFrom = plotSeconds(xOf(e));
    canvas.setPointerCapture(e.pointerId);
  });
  canvas.addEventListener('pointermove', (e) => {
    if (dragFrom === undefined) return;
    const t = plotSeconds(xOf(e));
    from.value = Math.min(dragFrom, t).toFixed(3);
    to.value = Math.max(dragFrom, t).toFixed(3);
    update();
  });
  canvas.addEventListener('pointerup', () => (dragFrom = undefined));
  let sent = false;
  const send = (w: { fromUs: number; toUs: number } | undefined) => {
    if (sent) return;
    sent = true;
    (load as unknown as { disabled: boolean }).disabled = true;
    (whole as unknown as { disabled: boolean }).disabled = true;
    status.textContent = w ? 'Reading the range…' : 'Reading the whole file…';
    pick(w);
  };
  load.addEventListener('click', () => {
    const w = chosen();
    // Seconds to the µs of the model, widened to whole µs so the typed window is inside what is read.
    if (w) send({ fromUs: Math.floor(origin + w[0] * 1e6), toUs: Math.ceil(origin + w[1] * 1e6) });
  });
  whole.addEventListener('click', () => send(undefined));
  requestAnimationFrame(() => {
    drawOverview(canvas, d, origin);
    update();
    painted();
  });
}
