// The snapshot panel opened on a session folder: its ranks side by side (Note [Ranks side by side] in
// src/core/views/ranks/rankSet.ts). A table with one row per rank (the figures of `gpumem summary DIR…`) and, under
// it, each rank's allocated (filled) and reserved (line) memory on one shared time axis and one shared byte
// scale, so a rank that peaks later or higher stands out by eye. Clicking a row or its timeline opens the rank.
import { formatBytes } from '../../src/core/base/units/bytes';
import type { RankRowView, RanksView } from '../../src/core/base/protocol/snapshot';
import { send } from './api';
import { clear, h, themeColor } from './dom';
import { stackWhenTooWide } from './fit';

const ROW_HEIGHT = 56;

function rankLabel(r: RankRowView): string {
  if (r.rank === null) return r.fileName;
  return r.worldSize ? `rank ${r.rank}/${r.worldSize}` : `rank ${r.rank}`;
}

function bytesCell(testid: string, bytes: number): HTMLElement {
  return h('td', { class: 'num', 'data-figure': testid, 'data-bytes': bytes, title: `${bytes.toLocaleString('en-US')} bytes` }, formatBytes(bytes));
}

export function renderRanks(body: HTMLElement, view: RanksView): void {
  clear(body);
  const open = (r: RankRowView) => send({ type: 'openRank', index: r.index });
  const section = h('section', { class: 'ranks', 'data-testid': 'ranks' });
  const seconds = (view.t1Us - view.t0Us) / 1e6;
  section.append(
    h('p', { class: 'muted', 'data-testid': 'ranks-caption' },
      `${view.ranks.length} rank${view.ranks.length === 1 ? '' : 's'}; median peak allocated ${formatBytes(view.medianPeakAllocatedBytes)}. Click a rank to open its capture.`),
  );
  for (const s of view.sentences) section.append(h('p', { class: /^▲|^Out of memory/.test(s) ? 'warning' : 'muted', 'data-testid': 'ranks-sentence' }, s));

  const table = h('table', { class: 'ranks-table', 'data-testid': 'ranks-table' });
  table.append(
    h('thead', {}, h('tr', {}, ...['Rank', 'Host', 'Device', 'Peak allocated', 'Peak reserved', 'OOMs', 'Top line at the peak'].map((t) => h('th', {}, t)))),
  );
  const tbody = h('tbody');
  for (const r of view.ranks) {
    const flag = r.flag === 'high' ? ' ▲' : r.flag === 'low' ? ' ▼' : '';
    // Note [Rank marks]: the slowest rank and the ranks that ran out of memory.
    const marks = (r.marks ?? []).map((m) => (m === 'slowest' ? ' (slowest)' : ' (OOM)')).join('');
    const row = h(
      'tr',
      { class: `rank-row${r.flag ? ` flag-${r.flag}` : ''}${(r.marks ?? []).map((m) => ` mark-${m}`).join('')}`, 'data-testid': 'rank-row', 'data-index': r.index, 'data-rank': r.rank ?? '', 'data-marks': (r.marks ?? []).join(' '), tabindex: 0, title: `Open ${r.fileName}` },
      h('th', { scope: 'row', 'data-figure': 'rank' }, rankLabel(r) + flag + marks),
      h('td', {}, r.host ?? '?'),
      h('td', {}, r.device === null ? '—' : `cuda:${r.device}${r.deviceName ? ` ${r.deviceName}` : ''}`),
      bytesCell('peakAllocated', r.peakAllocatedBytes),
      bytesCell('peakReserved', r.peakReservedBytes),
      h('td', { class: 'num', 'data-figure': 'ooms', 'data-count': r.ooms }, String(r.ooms)),
      h('td', { 'data-figure': 'topLine' }, r.topLine ? `${r.topLine.displayFile}:${r.topLine.line} (${formatBytes(r.topLine.bytesAtPeak)})` : '—'),
    );
    row.addEventListener('click', () => open(r));
    row.addEventListener('keydown', (e) => {
      if (e.key === 'Enter') open(r);
    });
    tbody.append(row);
  }
  table.append(tbody);
  section.append(table);
  stackWhenTooWide(table);

  // One axis for all: the byte scale is the largest reserved figure of any rank.
  let scale = 1;
  for (const r of view.ranks) scale = Math.max(scale, r.peakReservedBytes, maxOf(r.reservedMax), maxOf(r.allocatedMax));
  const lanes = h('div', { class: 'rank-lanes', 'data-testid': 'rank-lanes', 'data-t0-us': view.t0Us, 'data-t1-us': view.t1Us, 'data-scale-bytes': scale });
  for (const r of view.ranks) {
    const canvas = h('canvas', {
      class: 'rank-timeline',
      'data-testid': 'rank-timeline',
      'data-index': r.index,
      'data-t0-us': r.t0Us,
      'data-t1-us': r.t1Us,
      'data-max-allocated-bytes': maxOf(r.allocatedMax),
      'data-max-reserved-bytes': maxOf(r.reservedMax),
      width: view.buckets,
      height: ROW_HEIGHT,
      role: 'img',
      'aria-label': `${rankLabel(r)}: allocated up to ${formatBytes(r.peakAllocatedBytes)} over ${seconds.toFixed(1)} s`,
    }) as HTMLCanvasElement;
    canvas.addEventListener('click', () => open(r));
    lanes.append(h('div', { class: 'rank-lane' }, h('span', { class: 'rank-lane-label' }, rankLabel(r)), canvas));
    draw(canvas, r, scale);
  }
  lanes.append(h('div', { class: 'rank-axis muted', 'data-testid': 'rank-axis' }, h('span', { class: 'rank-axis-start' }, '0 s'), h('span', { class: 'spacer' }), h('span', { class: 'rank-axis-end' }, `${seconds.toFixed(1)} s (one time axis: each capture's own clock)`)));
  section.append(lanes);
  body.append(section);
}

function maxOf(xs: readonly number[]): number {
  let m = 0;
  for (const x of xs) if (x > m) m = x;
  return m;
}

function draw(canvas: HTMLCanvasElement, r: RankRowView, scale: number): void {
  const ctx = canvas.getContext('2d');
  if (!ctx) return;
  const w = canvas.width;
  const hgt = canvas.height;
  const y = (b: number) => hgt - (b / scale) * (hgt - 2);
  ctx.clearRect(0, 0, w, hgt);
  ctx.fillStyle = themeColor('--vscode-charts-blue', '#3794ff');
  for (let i = 0; i < r.allocatedMax.length; i++) {
    const top = y(r.allocatedMax[i]);
    ctx.fillRect(i, top, 1, hgt - top);
  }
  ctx.strokeStyle = themeColor('--vscode-charts-orange', '#d18616');
  ctx.beginPath();
  for (let i = 0; i < r.reservedMax.length; i++) {
    if (i === 0) ctx.moveTo(i, y(r.reservedMax[i]));
    else ctx.lineTo(i, y(r.reservedMax[i]));
  }
  ctx.stroke();
}
