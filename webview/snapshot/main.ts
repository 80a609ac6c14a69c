// Snapshot panel (browser bundle → dist/webview/snapshot.js): tabs for the summary, the active memory
// timeline, the segment map, top allocation sites, compare, the allocator what-if, categories and what to do
// (or, on a session folder, the ranks side by side); export and drag-and-drop in the header.
// Everything drawn comes from host messages (src/core/base/protocol/snapshot.ts); state survives hiding.
import type { MarkerView, OpenedInfo, SiteRow, SnapshotHostMessage, SnapshotTab, SummaryView } from '../../src/core/base/protocol/snapshot';
import { END_OF_TRACE, snapshotHostMessages } from '../../src/core/base/protocol/snapshot';
import { onHostMessage } from '../common/api';
import { getState, newRequestId, send, updateState } from './api';
import { CategoriesPanel } from './categoriesTab';
import { ComparePanel } from './compareTab';
import { clear, h } from './dom';
import { attachDrop } from './drop';
import { SegmentsPanel } from './segmentsTab';
import { ReplayPanel } from './replayTab';
import { AdvicePanel } from './adviceTab';
import { renderSites } from './sitesTab';
import { onStack } from './stacks';
import { renderOverview, renderRangeChoice } from './overviewView';
import { renderRanks } from './ranksView';
import { integrityBanner, renderSummary } from './summaryTab';
import { TimelinePanel } from './timelineTab';

const TABS: [SnapshotTab, string][] = [
  ['summary', 'Summary'],
  ['timeline', 'Timeline'],
  ['segments', 'Segment map'],
  ['sites', 'Top sites'],
  ['compare', 'Compare'],
  ['replay', 'Allocator what-if'],
  ['categories', 'Categories'],
  ['advice', 'What to do'],
];

class App {
  private info: OpenedInfo | undefined;
  private summary: SummaryView | undefined;
  private markers: MarkerView[] = [];
  private markersTruncated = false;
  private readonly views = new Map<SnapshotTab, HTMLElement>();
  private readonly status: HTMLElement;
  private readonly body: HTMLElement;
  private readonly deviceHost: HTMLElement;
  private timeline: TimelinePanel | undefined;
  private segments: SegmentsPanel | undefined;
  private compare: ComparePanel | undefined;
  private replay: ReplayPanel | undefined;
  private categories: CategoriesPanel | undefined;
  private advice: AdvicePanel | undefined;
  private segmentsRequest = 0;
  private sitesRows: SiteRow[] = [];
  private sitesRendered = false;
  private segmentsShownFor: string | undefined;
  /** performance.now() marks for the benchmark and tests */
  readonly marks: Record<string, number> = {};

  constructor(private readonly root: HTMLElement) {
    const title = root.dataset.title ?? 'Snapshot';
    this.status = h('span', { class: 'notice', role: 'status', 'data-testid': 'notice' });
    this.deviceHost = h('span');
    const exportPickle = h('vscode-button', { appearance: 'secondary', 'data-testid': 'export-pickle', title: 'Save the state at the selected moment (or the end) with the trace, as a PyTorch snapshot pickle memory_viz opens' }, 'Export pickle…');
    exportPickle.addEventListener('click', () => send({ type: 'exportPickle', device: getState().device, atUs: getState().momentUs ?? END_OF_TRACE }));
    const exportPng = h('vscode-button', { appearance: 'secondary', 'data-testid': 'export-png', title: 'Save the timeline or segment map as a PNG image' }, 'Save PNG…');
    exportPng.addEventListener('click', () => this.exportPng());
    const header = h('header', { class: 'header' }, h('h2', { class: 'title' }, title), this.deviceHost, h('span', { class: 'spacer' }), this.status, exportPickle, exportPng);
    this.body = h('div', { class: 'body' }, h('p', { class: 'muted' }, 'Waiting for the extension…'));
    root.append(header, this.body);
    attachDrop(document.body, (m) => this.notice(m));
    onHostMessage(snapshotHostMessages, (msg) => this.onMessage(msg));
    send({ type: 'ready' });
  }

  private notice(message: string): void {
    this.status.textContent = message;
  }

  private device(): number {
    return getState().device;
  }

  /** Note [Time origin]: the first allocator event of the process (the range start for an older host). */
  private origin(): number {
    return this.info?.originUs ?? this.range().t0Us;
  }

  private range(): { t0Us: number; t1Us: number } {
    const i = this.info?.devices.indexOf(this.device()) ?? -1;
    return (i >= 0 && this.info?.timeRanges[i]) || { t0Us: 0, t1Us: 1 };
  }

  private onMessage(msg: SnapshotHostMessage): void {
    this.marks[`received:${msg.type}`] ??= performance.now();
    switch (msg.type) {
      case 'loading':
        clear(this.body);
        this.body.append(h('div', { class: 'loading' }, h('vscode-progress-ring'), h('span', {}, `Reading ${msg.fileName}…`)));
        return;
      case 'overview':
        // Note [First view]: painted until `opened` builds the tabs (buildTabs clears the body).
        if (this.info) return;
        clear(this.body);
        // Note [Full open after the first paint] (src/core/base/model/open.ts): the host starts the full open once told.
        renderOverview(this.body, msg.view, getState().device, () => {
          if (this.marks.overviewPainted !== undefined) return;
          this.marks.overviewPainted = performance.now();
          send({ type: 'overviewPainted' });
        });
        return;
      case 'chooseRange':
        // Note [Range-first open]: the overview with a window picker; the host reads the model once the user picks.
        if (this.info) return;
        clear(this.body);
        renderRangeChoice(this.body, msg.view, getState().device, () => (this.marks.rangeChoicePainted ??= performance.now()), (w) =>
          send(w ? { type: 'loadRange', fromUs: w.fromUs, toUs: w.toUs } : { type: 'loadWhole' }),
        );
        return;
      case 'loadFailed':
        clear(this.body);
        this.body.append(h('p', { class: 'error', 'data-testid': 'load-error' }, msg.message));
        return;
      case 'opened':
        this.marks.opened = performance.now();
        this.opened(msg.info);
        return;
      case 'grew':
        this.grew(msg.info);
        return;
      case 'summary':
        this.summary = msg.summary;
        this.markers = msg.markers;
        this.markersTruncated = msg.markersTruncated;
        this.noteMissingTrace(msg.summary.events === 0);
        renderSummary(this.views.get('summary') as HTMLElement, msg.summary, this.origin(), () => this.gotoPeak(), {
          ooms: this.info?.ooms ?? [],
          rangeOnly: this.info?.window !== undefined,
          openLine: (file, line) => send({ type: 'goToSource', file, line }),
        });
        this.marks.summary = performance.now();
        this.timeline?.show();
        return;
      case 'sites':
        // Note [Sites by forward line]: the host sends the default grouping; a panel set to the other asks for it
        // (a restored panel, another device, a capture that grew) and draws only the rows it asked for.
        if (msg.backwardGrouping !== getState().sitesBackward) {
          send({ type: 'requestSites', device: msg.device, backwardGrouping: getState().sitesBackward });
          return;
        }
        // Note [Lazy tabs]: the data grid is costly to upgrade (FAST renders every cell), so it is built
        // when its tab is first shown; on the first paint only the visible tab does work.
        this.sitesRows = msg.rows;
        this.sitesRendered = false;
        if (getState().tab === 'sites') this.renderSitesOnce();
        return;
      case 'timeline':
        this.marks.timelineRequested ??= this.timeline?.requestedAt ?? 0;
        this.timeline?.onData(msg.view);
        return;
      case 'markers':
        this.timeline?.onMarkers(msg.view);
        return;
      case 'segments':
        if (msg.view.requestId === this.segmentsRequest) this.segments?.onData(msg.view);
        return;
      case 'stack':
        onStack(msg.view);
        return;
      case 'diff':
        this.compare?.onDiff(msg.view);
        return;
      case 'replay':
        this.replay?.onData(msg.view);
        return;
      case 'categories':
        this.categories?.onData(msg.view);
        return;
      case 'advice':
        this.advice?.onData(msg.view);
        return;
      case 'showTab':
        this.showTab(msg.tab);
        return;
      case 'requestFailed':
        if (!this.compare?.failed(msg.requestId, msg.message) && !this.replay?.failed(msg.requestId, msg.message) && !this.categories?.failed(msg.requestId, msg.message) && !this.advice?.failed(msg.requestId, msg.message)) this.notice(msg.message);
        return;
      case 'notice':
        this.notice(msg.message);
        return;
      case 'ranks':
        // A session folder (Note [Ranks side by side]): no device, no tabs; a click opens a rank's own panel.
        clear(this.deviceHost);
        // Exports are a file's (a moment's pickle, the timeline's PNG): not offered on the ranks view.
        for (const b of this.root.querySelectorAll('[data-testid=export-pickle], [data-testid=export-png]')) b.remove();
        renderRanks(this.body, msg.view);
        this.marks.ranks = performance.now();
        return;
    }
  }

  private opened(info: OpenedInfo): void {
    const restoring = this.info === undefined;
    this.info = info;
    if (!info.devices.includes(this.device())) updateState({ device: info.devices[0] ?? 0, window: undefined, momentUs: undefined });
    clear(this.deviceHost);
    if (info.devices.length > 1) {
      const dd = h('vscode-dropdown', { 'data-testid': 'device', 'aria-label': 'Device' });
      for (const d of info.devices) dd.append(h('vscode-option', { value: d, selected: d === this.device() }, deviceLabel(info, d)));
      dd.addEventListener('change', () => this.selectDevice(Number((dd as unknown as { value: string }).value)));
      this.deviceHost.append(dd);
    } else {
      this.deviceHost.append(h('span', { class: 'muted', 'data-testid': 'device-name' }, deviceLabel(info, this.device())));
    }
    if (info.identity) this.deviceHost.append(h('span', { class: 'muted identity', 'data-testid': 'identity' }, ` · ${info.identity}`));
    // Note [Range-first open]: only a window of the file was read; every figure is that window's.
    if (info.window) {
      const o = info.originUs;
      this.deviceHost.append(
        h('span', { class: 'muted', 'data-testid': 'opened-window', title: 'Only this time window of the file was read' }, ` · range ${((info.window.fromUs - o) / 1e6).toFixed(3)}–${((info.window.toUs - o) / 1e6).toFixed(3)} s`),
      );
    }
    this.buildTabs();
    if (info.devices.length === 0) {
      clear(this.body);
      this.body.append(
        h(
          'p',
          { class: 'warning', 'data-testid': 'no-devices' },
          `${info.fileName} holds no GPU memory: no segments and no trace. If it came from torch.cuda.memory._dump_snapshot(), call torch.cuda.memory._record_memory_history() before the allocations you want to see.`,
        ),
      );
      return;
    }
    if (info.problems.length) this.body.prepend(h('p', { class: 'warning' }, `Read with problems: ${info.problems.join('; ')}`));
    // Note [Not recorded]: what the recording settings left out, before any table that would miss it.
    for (const sentence of [...(info.notRecorded ?? [])].reverse())
      this.body.prepend(h('p', { class: 'muted not-recorded', 'data-testid': 'not-recorded' }, `Not recorded: ${sentence}`));
    const banner = integrityBanner(info.integrity);
    if (banner) this.body.prepend(banner);
    // The host sends device 0's summary after `opened`; a restored panel on another device asks again.
    if (restoring && this.device() !== (info.devices[0] ?? 0)) send({ type: 'selectDevice', device: this.device() });
  }

  /** Snapshots taken without history (enabled='state', or memory_snapshot()) have segments but no trace. */
  private noteMissingTrace(missing: boolean): void {
    const view = this.views.get('timeline');
    view?.querySelector('.no-trace')?.remove();
    if (missing && view) {
      view.prepend(
        h(
          'p',
          { class: 'warning no-trace', 'data-testid': 'no-trace' },
          'This file has no allocation history, only the allocator state at the end: record with torch.cuda.memory._record_memory_history() before the workload (or run it with GPU Memory Lens) to see the timeline.',
        ),
      );
    }
  }

  /** A growing capture was appended to: keep the UI, refresh what is shown. */
  private grew(info: OpenedInfo): void {
    if (!this.info) return;
    if (this.info.devices.length === 0 && info.devices.length > 0) {
      // Opened before the workload's first device record reached the file (the OOM notification's Open Advice
      // on a busy machine): the page said "holds no GPU memory" and had no tabs. Build them now, on the tab
      // asked for meanwhile (showTab keeps it in the state), and ask for the device's views.
      this.opened(info);
      send({ type: 'selectDevice', device: this.device() });
      return;
    }
    const previousEnd = this.range().t1Us;
    this.info = info;
    send({ type: 'selectDevice', device: this.device() });
    this.timeline?.refresh(previousEnd);
    this.replay?.reset();
    this.categories?.reset();
    if (getState().tab === 'categories') this.categories?.show();
    this.advice?.reset();
    if (getState().momentUs === undefined) {
      this.segmentsShownFor = undefined;
      if (getState().tab === 'segments') this.requestSegments();
    }
  }

  private buildTabs(): void {
    clear(this.body);
    this.views.clear();
    const panels = h('vscode-panels', { activeid: `tab-${getState().tab}`, 'aria-label': 'Snapshot views' });
    for (const [id, label] of TABS) panels.append(h('vscode-panel-tab', { id: `tab-${id}`, 'data-testid': `tab-${id}` }, label));
    for (const [id] of TABS) {
      const view = h('vscode-panel-view', { id: `view-${id}`, 'data-testid': `view-${id}` });
      const inner = h('section', { class: `view view-${id}` });
      view.append(inner);
      this.views.set(id, inner);
      panels.append(view);
    }
    panels.addEventListener('change', () => {
      const active = (panels as unknown as { activeid?: string }).activeid ?? '';
      const tab = active.replace(/^tab-/, '') as SnapshotTab;
      if (!TABS.some(([t]) => t === tab) || tab === getState().tab) return;
      updateState({ tab });
      this.onTabShown(tab);
    });
    this.body.append(panels);
    const range = () => this.range();
    this.timeline = new TimelinePanel(this.views.get('timeline') as HTMLElement, {
      device: () => this.device(),
      range,
      peak: () => (this.summary ? { timeUs: this.summary.peakAtTimeUs, reservedBytes: this.summary.peakReservedBytes } : undefined),
      markers: () => this.markers,
      markersTruncated: () => this.markersTruncated,
      momentUs: () => getState().momentUs,
      onMoment: (t) => this.setMoment(t),
      originUs: () => this.origin(),
    });
    this.timeline.onFirstPaint = () => (this.marks.timelinePainted = performance.now());
    this.segments = new SegmentsPanel(this.views.get('segments') as HTMLElement, {
      range,
      originUs: () => this.origin(),
      peakUs: () => this.summary?.peakAtTimeUs,
      momentUs: () => getState().momentUs,
      onMoment: (t) => this.setMoment(t),
    });
    this.compare = new ComparePanel(this.views.get('compare') as HTMLElement, {
      device: () => this.device(),
      range,
      peakUs: () => this.summary?.peakAtTimeUs,
      momentUs: () => getState().momentUs,
    });
    this.replay = new ReplayPanel(this.views.get('replay') as HTMLElement, { device: () => this.device(), range });
    this.categories = new CategoriesPanel(this.views.get('categories') as HTMLElement, {
      device: () => this.device(),
      originUs: () => this.origin(),
      momentUs: () => getState().momentUs,
      onMoment: (t) => this.setMoment(t),
      openLine: (file, line) => send({ type: 'goToSource', file, line }),
    });
    this.advice = new AdvicePanel(this.views.get('advice') as HTMLElement, { device: () => this.device() }, (file, line) => send({ type: 'goToSource', file, line }));
    this.segmentsShownFor = undefined;
    this.sitesRendered = false;
    // Panel views are display:none until the toolkit upgrades them; draw the restored tab once laid out.
    requestAnimationFrame(() => this.onTabShown(getState().tab));
  }

  private renderSitesOnce(): void {
    if (this.sitesRendered) return;
    this.sitesRendered = true;
    renderSites(this.views.get('sites') as HTMLElement, this.sitesRows, getState().sitesBackward, (backwardGrouping) => {
      updateState({ sitesBackward: backwardGrouping });
      send({ type: 'requestSites', device: this.device(), backwardGrouping });
    });
    this.marks.sitesRendered = performance.now();
  }

  private onTabShown(tab: SnapshotTab): void {
    if (tab === 'advice') this.advice?.shown();
    if (tab === 'sites') this.renderSitesOnce();
    if (tab === 'timeline') this.timeline?.show();
    if (tab === 'categories') this.categories?.show();
    if (tab === 'segments') {
      this.requestSegments();
      this.segments?.draw();
    }
  }

  private selectDevice(device: number): void {
    updateState({ device, window: undefined, momentUs: undefined });
    this.timeline?.resetForDevice(false);
    this.segmentsShownFor = undefined;
    this.replay?.reset();
    send({ type: 'selectDevice', device });
    this.onTabShown(getState().tab);
  }

  private setMoment(timeUs: number | undefined): void {
    updateState({ momentUs: timeUs });
    this.timeline?.show();
    this.requestSegments();
    if (getState().tab === 'categories') this.categories?.show();
  }

  private requestSegments(): void {
    const key = `${this.device()}@${getState().momentUs ?? 'end'}`;
    if (key === this.segmentsShownFor) return;
    this.segmentsShownFor = key;
    this.segmentsRequest = newRequestId();
    send({ type: 'requestSegments', requestId: this.segmentsRequest, device: this.device(), timeUs: getState().momentUs ?? END_OF_TRACE });
  }

  /** The host asked for a tab (the OOM notification's "Open Advice"). */
  private showTab(tab: SnapshotTab): void {
    if (!TABS.some(([t]) => t === tab)) return;
    updateState({ tab });
    this.body.querySelector('vscode-panels')?.setAttribute('activeid', `tab-${tab}`);
    this.onTabShown(tab);
  }

  private gotoPeak(): void {
    updateState({ tab: 'timeline' });
    const panels = this.body.querySelector('vscode-panels');
    panels?.setAttribute('activeid', 'tab-timeline');
    this.timeline?.zoomToPeak();
    this.onTabShown('timeline');
  }

  private exportPng(): void {
    const tab = getState().tab;
    const dataUrl = tab === 'segments' && this.segments ? this.segments.toDataUrl() : this.timeline?.toDataUrl();
    if (!dataUrl || dataUrl.length < 100) {
      this.notice('Open the Timeline or Segment map tab to save it as an image.');
      return;
    }
    const base = (this.info?.fileName ?? 'snapshot').replace(/\.(pickle|gpumem)$/, '');
    send({ type: 'exportPng', dataUrl, suggestedName: `${base}-${tab === 'segments' ? 'segments' : 'timeline'}.png` });
  }
}

/** "cuda:0 NVIDIA H100 80GB HBM3" when the capture named the device, else "cuda:0". */
function deviceLabel(info: OpenedInfo, device: number): string {
  const name = info.deviceNames?.[device];
  return name ? `cuda:${device} ${name}` : `cuda:${device}`;
}

const root = document.getElementById('app');
if (root) {
  const app = new App(root);
  (window as unknown as { __snapshotPanel: unknown }).__snapshotPanel = app;
}
