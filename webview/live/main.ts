// The live panel (browser bundle → dist/webview/live.js). Draws what the host sends (src/glue/live):
// per (process, device) track, the current figures and a uPlot chart of allocated / reserved / device
// used with markers, against seconds elapsed since the session's first event (Note [Elapsed time axis]).
// Messages are coalesced into one render per animation frame, so a burst of updates costs one layout; the
// last view and the Device used choice are kept in getState() so a reloaded panel shows them at once.
//
// Note [Device used toggle]: NVML's device used includes the CUDA context, cuBLAS/cuDNN workspaces and
// other processes, so it is often ten times what the allocator holds (the recorded H200 run: 1.45 GiB
// against 144 MiB reserved), which flattens allocated and reserved into the bottom of the chart. A
// "Device used" checkbox in the toolbar hides that series in every chart and the y-axis rescales to what
// is left; the figures row keeps the device-used number either way. A log y-axis was the other candidate;
// it was not taken because it squeezes exactly what the user reads here, the gap between allocated and
// reserved (cache and fragmentation), and binary byte ticks on a log scale read poorly. The checkbox is
// on by default (device used is what nvidia-smi shows, the number users check first), is remembered by
// the panel, stays in step with a click on the legend (uPlot's own series toggle), and is hidden when no
// track has device samples.
import uPlot from 'uplot';
import { formatBytes } from '../../src/core/base/units/bytes';
import { liveHostMessages, type LiveAction, type LiveRunView, type LiveTrack, type LiveWebviewMessage } from '../../src/core/base/protocol/live';
import { onHostMessage, panelApi } from '../common/api';
import { h } from '../common/dom';
import { themeColor } from '../common/theme';
import { renderCategories } from './categories';
import { figureRows } from './figures';
import { ELAPSED_INCRS, elapsedText, elapsedTickLabels } from './timeAxis';

interface SavedState {
  view?: LiveRunView;
  /** the Device used checkbox (Note [Device used toggle]); absent = shown */
  showDeviceUsed?: boolean;
}

/** the device-used series' index in the chart (0 is x) */
const DEVICE_USED = 3;

const api = panelApi<LiveWebviewMessage, SavedState>();
const tracksEl = document.getElementById('tracks')!;
const emptyEl = document.getElementById('empty')!;
const problemsEl = document.getElementById('problems')!;
const nameEl = document.getElementById('run-name')!;
const stateEl = document.getElementById('run-state')!;
const deviceUsedToggle = document.getElementById('toggle-device-used')!;
const buttons: Record<LiveAction, HTMLElement> = {
  emptyCache: document.getElementById('btn-empty-cache')!,
  captureSnapshot: document.getElementById('btn-snapshot')!,
};

interface TrackUi {
  root: HTMLElement;
  figures: HTMLElement;
  chartHost: HTMLElement;
  chart?: uPlot;
  markers: LiveTrack['markers'];
}
const trackUis = new Map<string, TrackUi>();
let pending: LiveRunView | null | undefined; // undefined: nothing to draw; null: no session
let frameRequested = false;
let lastView: LiveRunView | undefined;
let showDeviceUsed = api.savedState()?.showDeviceUsed ?? true;
/** the chart's 0 s in epoch seconds (LiveRunView.originS) */
let originS = 0;

function chartWidth(): number {
  return Math.max(200, Math.floor(tracksEl.clientWidth || document.body.clientWidth || 600) - 8);
}

// ---- rendering -------------------------------------------------------------------------------------

function schedule(view: LiveRunView | null): void {
  pending = view;
  if (frameRequested) return;
  frameRequested = true;
  requestAnimationFrame(() => {
    frameRequested = false;
    if (pending === undefined) return;
    render(pending);
    pending = undefined;
  });
}

function render(view: LiveRunView | null): void {
  document.body.dataset.updates = String(Number(document.body.dataset.updates ?? '0') + 1);
  if (!view) {
    nameEl.textContent = 'No run';
    stateEl.textContent = '';
    emptyEl.hidden = false;
    for (const ui of trackUis.values()) destroyTrack(ui);
    trackUis.clear();
    return;
  }
  nameEl.textContent = view.name;
  // Older hosts (and a state saved by one) send no origin: the earliest point drawn is 0 s then.
  originS = view.originS ?? Math.min(...view.tracks.map((t) => t.series.t[0] ?? Infinity));
  if (!Number.isFinite(originS)) originS = 0;
  deviceUsedToggle.hidden = !view.tracks.some((t) => t.figures.deviceUsedBytes !== undefined || t.figures.deviceUsedPending);
  stateEl.textContent = view.running ? 'running' : 'finished';
  stateEl.className = `state ${view.running ? 'running' : 'finished'}`;
  emptyEl.hidden = view.tracks.length > 0;
  if (view.tracks.length === 0) emptyEl.textContent = view.running ? 'Waiting for the workload to initialise CUDA…' : 'This run recorded no device memory.';
  problemsEl.hidden = view.problems.length === 0;
  problemsEl.textContent = view.problems.join('\n');
  for (const action of Object.keys(buttons) as LiveAction[]) {
    if (!view.running) buttons[action].setAttribute('disabled', '');
    else if (!buttons[action].dataset.busy) buttons[action].removeAttribute('disabled');
  }
  const seen = new Set<string>();
  for (const track of view.tracks) {
    seen.add(track.key);
    let ui = trackUis.get(track.key);
    if (!ui) {
      ui = createTrack(track);
      trackUis.set(track.key, ui);
    }
    updateTrack(ui, track);
  }
  for (const [key, ui] of trackUis) {
    if (!seen.has(key)) {
      destroyTrack(ui);
      trackUis.delete(key);
    }
  }
}

function createTrack(track: LiveTrack): TrackUi {
  const figures = h('div', { class: 'figures' });
  const chartHost = h('div', { class: 'chart' });
  const root = h('section', { class: 'track', 'data-key': track.key }, h('h2', { class: 'track-label' }), figures, chartHost);
  tracksEl.append(root);
  return { root, figures, chartHost, markers: [] };
}

function destroyTrack(ui: TrackUi): void {
  ui.chart?.destroy();
  ui.root.remove();
}

function updateTrack(ui: TrackUi, track: LiveTrack): void {
  ui.root.querySelector('.track-label')!.textContent = track.label + (track.running ? '' : ' (exited)');
  ui.figures.replaceChildren(
    ...figureRows(track.figures).map((row) =>
      h(
        'div',
        { class: `figure figure-${row.key}`, 'data-figure': row.key, 'data-bytes': row.bytes ?? '', title: row.help },
        h('span', { class: 'figure-label' }, row.label),
        h('span', { class: 'figure-value' }, row.bytes === null ? '—' : formatBytes(row.bytes)),
      ),
    ),
  );
  ui.markers = track.markers;
  const s = track.series;
  const data: uPlot.AlignedData = [s.t.map((t) => t - originS), s.allocated, s.reserved, s.deviceUsed] as unknown as uPlot.AlignedData;
  if (!ui.chart) {
    ui.chart = new uPlot(chartOptions(ui), data, ui.chartHost);
  } else {
    ui.chart.setData(data);
  }
  // The canvas says nothing to a screen reader: describe what it shows.
  ui.chartHost.setAttribute('role', 'img');
  ui.chartHost.setAttribute(
    'aria-label',
    `Memory over time for ${track.label}: allocated now ${formatBytes(track.figures.allocatedBytes)}, reserved ${formatBytes(track.figures.reservedBytes)}, peak allocated ${formatBytes(track.figures.peakAllocatedBytes)}.`,
  );
  renderCategories(ui.root, track.categories, originS, chartWidth());
  ui.root.dataset.points = String(s.t.length);
  ui.root.dataset.t1 = String(s.t.at(-1) ?? '');
}

const BINARY_INCRS = Array.from({ length: 51 }, (_, k) => 2 ** k);

function chartOptions(ui: TrackUi): uPlot.Options {
  const fg = themeColor('--vscode-foreground', '#ccc');
  const grid = themeColor('--vscode-editorWidget-border', 'rgba(128,128,128,0.25)');
  const axis = (): uPlot.Axis => ({
    stroke: fg,
    grid: { stroke: grid, width: 1 },
    ticks: { stroke: grid, width: 1 },
  });
  return {
    width: chartWidth(),
    height: 220,
    cursor: { drag: { x: false, y: false } },
    legend: { show: true },
    // x: seconds since the session's first event (Note [Elapsed time axis]). y: from 0 to the highest
    // shown series (a hidden device used no longer counts, Note [Device used toggle]).
    scales: { x: { time: false }, y: { range: (_u, _min, max) => [0, Math.max(1, max) * 1.05] } },
    axes: [
      {
        ...axis(),
        incrs: ELAPSED_INCRS as number[],
        space: 70,
        values: (u, vals, _axis, _space, incr) => tickLabels(ui, 'xTicks', elapsedTickLabels(vals, incr, u.scales.x.max ?? 0)),
      },
      // Byte ticks at multiples of a power of two (256 MiB, 512 MiB, 768 MiB…), which read naturally in binary units.
      { ...axis(), size: 80, incrs: BINARY_INCRS, values: (_u, vals) => tickLabels(ui, 'yTicks', vals.map((v) => formatBytes(v))) },
    ],
    series: [
      { label: 'elapsed', value: (_u, v) => (v == null ? '—' : elapsedText(v)) },
      { label: 'allocated', points: { show: false }, stroke: themeColor('--vscode-charts-blue', '#3794ff'), width: 1.5, value: (_u, v) => (v == null ? '—' : formatBytes(v)) },
      { label: 'reserved', points: { show: false }, stroke: themeColor('--vscode-charts-orange', '#d18616'), width: 1.5, value: (_u, v) => (v == null ? '—' : formatBytes(v)) },
      // NVML samples are sparser than buckets: join them rather than leave isolated dots.
      { label: 'device used', show: showDeviceUsed, points: { show: false }, spanGaps: true, stroke: themeColor('--vscode-charts-purple', '#b180d7'), width: 1, dash: [4, 3], value: (_u, v) => (v == null ? '—' : formatBytes(v)) },
    ],
    hooks: {
      draw: [(u) => drawMarkers(u, ui.markers)],
      setScale: [
        (u, key) => {
          if (key === 'y') ui.root.dataset.yMax = String(u.scales.y.max ?? '');
        },
      ],
      // a click on the legend's "device used" is the same choice as the checkbox
      setSeries: [
        (u, idx) => {
          if (idx === DEVICE_USED && u.series[DEVICE_USED].show !== showDeviceUsed) setDeviceUsed(Boolean(u.series[DEVICE_USED].show));
        },
      ],
    },
  };
}

/** What an axis prints, also kept on the track (data-x-ticks / data-y-ticks: the canvas has no text to read). */
function tickLabels(ui: TrackUi, key: 'xTicks' | 'yTicks', labels: string[]): string[] {
  ui.root.dataset[key] = JSON.stringify(labels);
  return labels;
}

function setDeviceUsed(show: boolean): void {
  showDeviceUsed = show;
  deviceUsedToggle.toggleAttribute('checked', show);
  if ((deviceUsedToggle as HTMLElement & { checked?: boolean }).checked !== undefined) (deviceUsedToggle as HTMLElement & { checked: boolean }).checked = show;
  for (const ui of trackUis.values()) {
    if (ui.chart && ui.chart.series[DEVICE_USED].show !== show) ui.chart.setSeries(DEVICE_USED, { show });
  }
  saveState();
}

function saveState(): void {
  api.saveState({ view: lastView, showDeviceUsed });
}

const MARKER_VARS: Record<string, string> = {
  empty_cache: '--vscode-charts-green',
  snapshot: '--vscode-charts-yellow',
  oom: '--vscode-charts-red',
  user: '--vscode-charts-foreground',
  notice: '--vscode-charts-yellow',
  range_begin: '--vscode-charts-lines',
  range_end: '--vscode-charts-lines',
};

function markerText(m: LiveTrack['markers'][number]): string {
  if (m.kind === 'empty_cache') return 'empty cache';
  if (m.kind === 'oom') return 'OOM';
  // snapshot markers carry the pickle's path: its file name is what the user recognises
  const text = m.kind === 'snapshot' ? (m.label.split(/[\\/]/).pop() ?? m.label) : m.label;
  return text.length > 28 ? `${text.slice(0, 27)}…` : text;
}

function drawMarkers(u: uPlot, markers: LiveTrack['markers']): void {
  const ctx = u.ctx;
  const { top, height, left, width } = u.bbox;
  const px = devicePixelRatio;
  const lineHeight = 12 * px;
  // Labels go on up to three rows so markers close in time do not print over each other; a label with
  // no free row is left out (the line stays, and the legend's time tells where it is).
  const rowEnds = [-Infinity, -Infinity, -Infinity];
  ctx.save();
  ctx.font = `${Math.round(10 * px)}px ${themeColor('--vscode-font-family', 'sans-serif')}`;
  for (const m of [...markers].sort((a, b) => a.t - b.t)) {
    const x = u.valToPos(m.t - originS, 'x', true);
    if (x < left || x > left + width) continue;
    ctx.strokeStyle = themeColor(MARKER_VARS[m.kind] ?? '--vscode-charts-lines', '#888');
    ctx.fillStyle = ctx.strokeStyle;
    ctx.lineWidth = m.kind === 'oom' ? 2 * px : px;
    ctx.setLineDash(m.kind === 'range_begin' || m.kind === 'range_end' ? [3 * px, 3 * px] : []);
    ctx.beginPath();
    ctx.moveTo(x, top);
    ctx.lineTo(x, top + height);
    ctx.stroke();
    const text = markerText(m);
    if (!text) continue;
    const w = ctx.measureText(text).width;
    // near the right edge (where a live run's newest markers are) the label goes to the left of its line;
    // a row is free when the label's own left edge clears what the row already holds
    const tx = x + 3 * px + w > left + width ? x - 3 * px - w : x + 3 * px;
    const row = rowEnds.findIndex((end) => tx > end + 4 * px);
    if (row < 0) continue;
    ctx.fillText(text, tx, top + lineHeight * (row + 1));
    rowEnds[row] = Math.max(tx + w, x);
  }
  ctx.restore();
}

// ---- wiring ----------------------------------------------------------------------------------------

for (const [action, el] of Object.entries(buttons) as [LiveAction, HTMLElement][]) {
  el.addEventListener('click', () => {
    if (el.hasAttribute('disabled')) return;
    api.send({ type: 'action', action });
  });
}

onHostMessage(liveHostMessages, (msg) => {
  switch (msg.type) {
    case 'update':
      lastView = msg.run;
      saveState();
      schedule(msg.run);
      break;
    case 'noRun':
      lastView = undefined;
      saveState();
      schedule(null);
      break;
    case 'busy': {
      const el = buttons[msg.action];
      if (msg.busy) {
        el.dataset.busy = '1';
        el.setAttribute('disabled', '');
      } else {
        delete el.dataset.busy;
        el.removeAttribute('disabled');
      }
      break;
    }
  }
});

deviceUsedToggle.toggleAttribute('checked', showDeviceUsed);
deviceUsedToggle.addEventListener('change', () => {
  const checked = (deviceUsedToggle as HTMLElement & { checked?: boolean }).checked;
  if (typeof checked === 'boolean' && checked !== showDeviceUsed) setDeviceUsed(checked);
});

let resizeTimer: ReturnType<typeof setTimeout> | undefined;
new ResizeObserver(() => {
  const w = chartWidth();
  for (const ui of trackUis.values()) ui.chart?.setSize({ width: w, height: 220 });
  clearTimeout(resizeTimer);
  resizeTimer = setTimeout(() => api.send({ type: 'resize', widthPx: w }), 200);
}).observe(document.body);

// Theme switch: VS Code changes the body class; chart colours are read at creation, so rebuild them.
new MutationObserver(() => {
  for (const ui of trackUis.values()) {
    ui.chart?.destroy();
    ui.chart = undefined;
    ui.chartHost.replaceChildren();
  }
  const saved = api.savedState();
  if (saved?.view) schedule(saved.view);
}).observe(document.body, { attributes: true, attributeFilter: ['class'] });

const restored = api.savedState();
lastView = restored?.view;
if (restored?.view) schedule(restored.view);
api.send({ type: 'ready', widthPx: chartWidth() });
