// The first view of a big pickle (Note [First view] in src/glue/snapshot/panelHost.ts): allocated and reserved
// over the whole run, from the reader's first pass, painted while the full model is read. The page replaces it
// with the tabs when `opened` arrives.
import { formatBytes } from '../../src/core/base/units/bytes';
import type { OverviewView } from '../../src/core/base/protocol/snapshot';
import { themeColor } from '../common/theme';
import { h } from './dom';
import { atTime, formatSeconds } from './timelineTab';

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
      h('span', {}, `Overview of ${d.events.toLocaleString('en-US')} events on device ${d.device}; reading full detail of ${view.fileName}…`),
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
