// The live panel's categories over time: a stacked area of parameters, gradients, optimizer state,
// activations, temporaries and other under each track's chart, step ends numbered along it, and the leak
// findings named as they appear (Note [Live categories] in src/core/views/live/categoriesTrack.ts). Drawn on a
// canvas with theme-independent category colours (the same as the snapshot panel's Categories tab).
import { CATEGORIES, CATEGORY_LABELS, shownCategories, type Category } from '../../src/core/base/protocol/categories';
import { formatBytes } from '../../src/core/base/units/bytes';
import type { LiveCategories } from '../../src/core/base/protocol/live';
import { h } from '../common/dom';

const COLOURS: Record<Category, string> = {
  parameter: '#4e79a7',
  buffer: '#76b7b2',
  gradient: '#f28e2b',
  optimizer_state: '#e15759',
  activation: '#59a14f',
  kv_cache: '#9c755f',
  temporary: '#edc948',
  other: '#b07aa1',
  block_overhead: '#bab0ac',
};
const HEIGHT = 90;

interface CategoriesUi {
  root: HTMLElement;
  canvas: HTMLCanvasElement;
  legend: HTMLElement;
  leaks: HTMLElement;
  note: HTMLElement;
}

const uis = new WeakMap<HTMLElement, CategoriesUi>();

function create(host: HTMLElement): CategoriesUi {
  const canvas = h('canvas', { class: 'categories-chart', role: 'img' });
  const legend = h('div', { class: 'categories-legend' });
  const note = h('div', { class: 'categories-note' });
  const leaks = h('div', { class: 'categories-leaks' });
  const root = h('div', { class: 'categories', 'data-testid': 'live-categories' }, h('div', { class: 'categories-title' }, 'What the memory is, over time'), canvas, legend, note, leaks);
  host.append(root);
  const ui = { root, canvas, legend, leaks, note };
  uis.set(host, ui);
  return ui;
}

/** Draws (or removes) the categories of a track under its chart; `originS` is the chart's 0 s. */
export function renderCategories(host: HTMLElement, c: LiveCategories | undefined, originS: number, widthPx: number): void {
  let ui = uis.get(host);
  if (!c) {
    ui?.root.remove();
    if (ui) uis.delete(host);
    return;
  }
  ui ??= create(host);
  const last = c.t.length - 1;
  const now = Object.fromEntries(CATEGORIES.map((k) => [k, c.bytes[k][last] ?? 0])) as Record<Category, number>;
  ui.root.dataset.now = JSON.stringify(now);
  ui.legend.replaceChildren(
    ...shownCategories([now]).map((k) =>
      h(
        'span',
        { class: 'categories-item', 'data-category': k, 'data-bytes': now[k] },
        h('span', { class: 'categories-swatch', style: `background:${COLOURS[k]}` }),
        `${CATEGORY_LABELS[k]} ${formatBytes(now[k])}`,
      ),
    ),
  );
  const caveats = [
    c.hasTags ? '' : 'No optimizer step yet: parameters, gradients and optimizer state count as other.',
    c.hasPhases ? '' : 'No backward() yet: activations and temporaries count as other.',
  ].filter(Boolean);
  ui.note.textContent = caveats.join(' ');
  ui.leaks.replaceChildren(
    ...c.leaks.map((l) => h('div', { class: 'categories-leak', 'data-testid': 'live-leak', 'data-growth': l.growthPerStepBytes }, `Leak: ${l.sentence}`)),
  );
  draw(ui.canvas, c, originS, Math.max(100, widthPx));
  ui.canvas.setAttribute(
    'aria-label',
    `Memory by category now: ${CATEGORIES.map((k) => `${CATEGORY_LABELS[k]} ${formatBytes(now[k])}`).join(', ')}.${c.leaks.length ? ` ${c.leaks.length} leak finding${c.leaks.length > 1 ? 's' : ''}.` : ''}`,
  );
}

function draw(canvas: HTMLCanvasElement, c: LiveCategories, originS: number, width: number): void {
  const dpr = window.devicePixelRatio || 1;
  canvas.width = Math.round(width * dpr);
  canvas.height = Math.round(HEIGHT * dpr);
  canvas.style.width = `${width}px`;
  canvas.style.height = `${HEIGHT}px`;
  const g = canvas.getContext('2d');
  if (!g) return;
  g.scale(dpr, dpr);
  g.clearRect(0, 0, width, HEIGHT);
  const n = c.t.length;
  if (n < 2) return;
  const totals = c.t.map((_, i) => CATEGORIES.reduce((a, k) => a + (c.bytes[k][i] ?? 0), 0));
  const max = Math.max(1, ...totals);
  const t0 = c.t[0];
  const span = Math.max(1e-9, c.t[n - 1] - t0);
  const x = (t: number) => ((t - t0) / span) * width;
  const y = (b: number) => HEIGHT - 12 - (b / max) * (HEIGHT - 14);
  const base = new Array<number>(n).fill(0);
  for (const k of CATEGORIES) {
    const top = base.map((b, i) => b + (c.bytes[k][i] ?? 0));
    g.beginPath();
    for (let i = 0; i < n; i++) g.lineTo(x(c.t[i]), y(top[i]));
    for (let i = n - 1; i >= 0; i--) g.lineTo(x(c.t[i]), y(base[i]));
    g.closePath();
    g.fillStyle = COLOURS[k];
    g.fill();
    for (let i = 0; i < n; i++) base[i] = top[i];
  }
  // Step ends, numbered (Note [Steps]); at most ~1 label per 40 px.
  const fg = getComputedStyle(document.body).getPropertyValue('--vscode-descriptionForeground').trim() || '#888';
  g.fillStyle = fg;
  g.strokeStyle = fg;
  g.font = '10px sans-serif';
  let lastX = -Infinity;
  for (const s of c.steps) {
    const sx = x(s.endS);
    if (sx < 0 || sx > width) continue;
    g.globalAlpha = 0.5;
    g.beginPath();
    g.moveTo(sx, 0);
    g.lineTo(sx, HEIGHT - 12);
    g.stroke();
    g.globalAlpha = 1;
    if (sx - lastX >= 40) {
      g.fillText(String(s.index), Math.min(width - 12, sx + 2), HEIGHT - 2);
      lastX = sx;
    }
  }
  void originS;
}
