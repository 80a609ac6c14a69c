// OpenedCapture: a capture or snapshot pickle opened in the snapshot panel; answers the webview's queries from its
// one Model (no vscode: the glue forwards messages here and handles only what needs the editor — go to source,
// file pickers, saving).
import type { Model } from '../../base/model/types';
import type {
  DiffView,
  MarkersView,
  MarkerView,
  OpenedInfo,
  ReplayView,
  SegmentMapView,
  SiteRow,
  SitesBackwardGrouping,
  SnapshotHostMessage,
  SnapshotWebviewMessage,
  SpanColumns,
  StackView,
  TimelineView,
} from '../../base/protocol/snapshot';
import { END_OF_TRACE, TIMELINE_MAX_SPANS } from '../../base/protocol/snapshot';
import { POLICIES, POLICY_LABELS } from '../../base/model/whatIf';
import type { Policy } from '../../base/model/whatIf';
import { replayPolicies } from '../../analyses/replay';
import { replayCheck, replayCheckSentence } from '../../analyses/replay/check';
import { advise } from '../../analyses/advice';
import { breakdownFromSegments } from '../../analyses/breakdown/breakdown';
import { categoriesView } from './categoriesView';
import { buildMarkers, buildSummary, markersInParts } from './summaryView';
import { allocatorLine, identityOf, processLine } from '../../analyses/summary/identity';
import { integrityOf, isIntegrityProblem } from '../../analyses/summary/integrity';
import { oomRows } from '../../analyses/summary/ooms';
import { timeBaseOf, type TimeBase } from '../../analyses/steps/timebase';
import { verdictAt, verdictQuery } from '../../analyses/verdicts/verdict';

export interface OpenedCaptureOptions {
  /** file name shown in the header */
  fileName: string;
  /** how a recorded path is shown (the glue makes it workspace-relative); identity by default */
  displayPath?: (file: string) => string;
  /** markers per answer (Note [Markers by range]); 5,000 by default, less in tests */
  maxMarkers?: number;
  /** Note [Range-first open]: the model holds this window of the file only (said in `opened`) */
  window?: { fromUs: number; toUs: number };
  /** the time origin of the whole file (a window's model starts later): times read as in a full open */
  originUs?: number;
}

// Note [Query limits]: one timeline answer is bounded whatever the capture size: ≤ 8192 buckets (one per
// pixel of an 8K screen) and ≤ 20 000 bands (memory_viz draws 15 000); the webview asks for less.
const MAX_BUCKETS = 8192;
const MAX_SPANS = 20000;
const MAX_SITES = 2000;
const MAX_DIFF_ROWS = 1000;
// Note [Markers by range]: an hour's run holds tens of thousands of markers (a step fact per step). The first
// answer carries at most MAX_MARKERS of them over the whole run (step ends numbered, then thinned: buildMarkers),
// enough for the whole-run timeline, where they are denser than pixels anyway. When that list was thinned, the
// zoomed timeline asks for the markers of its window (requestMarkers), numbered over the whole run and thinned to
// the same limit within the window, so every step end shows once the view is narrow enough to tell them apart.
const MAX_MARKERS = 5000;

export class OpenedCapture {
  private readonly display: (file: string) => string;
  private timeBase: TimeBase | undefined;

  constructor(
    readonly model: Model,
    private readonly options: OpenedCaptureOptions,
  ) {
    this.display = options.displayPath ?? ((f) => f);
  }

  /**
   * Note [First answers] (src/core/base/model/open.ts): the first device's summary, markers, lines and largest bands
   * computed on a worker thread before the page asks, so answering `ready` and the first timeline does not stall the
   * extension host on a big model. Call before the first message; nothing may use the model until it resolves.
   */
  async prepare(): Promise<void> {
    const first = this.model.devices()[0];
    if (first !== undefined) await this.model.prefetch?.(first, TIMELINE_MAX_SPANS + 1);
    // Note [First answers in turns]: what is left on this thread, each part in an event-loop turn of its own, none of
    // them in `ready`'s: at 13 M events (19 k markers) the markers' JSON parsed (15-20 ms), the time base's steps
    // (~15 ms), the first device's markers answer (numbered, thinned: ~20 ms cold) and its summary (end state, ~20 ms)
    // were two blocks of 35-55 ms each (the markers in `ready`'s turn: 53 ms at a load average of 4).
    const turn = () => new Promise((r) => setImmediate(r));
    if (first === undefined) {
      await turn();
      void this.time;
      return;
    }
    // the verdict's what-if question on a worker too (20-30 ms at 13 M events): the end state is read here (~1 ms)
    const end = breakdownFromSegments(this.model.stateAt(first, Infinity).segments);
    const ooms = this.model.ooms().filter((o) => o.device === first);
    const query = verdictQuery(end, ooms[ooms.length - 1]);
    if (query) await this.model.prefetchWhatIf?.(first, Infinity, query.requests ?? []);
    await turn();
    for (const d of this.model.fileInfo().recordDevices) this.model.markersShared?.(d);
    await turn();
    void this.time;
    await turn();
    const parts = markersInParts(this.model, first, this.options.maxMarkers ?? MAX_MARKERS, this.time.steps);
    let part = parts.next();
    for (; !part.done; part = parts.next()) await turn();
    const markers = part.value;
    await turn();
    this.firstAnswers = { device: first, markers, summary: this.summaryMessage(first, markers) };
  }

  /** Note [First answers in turns]: the first device's markers and summary, built by prepare(), until poll() */
  private firstAnswers: { device: number; markers: { markers: MarkerView[]; truncated: boolean }; summary: SnapshotHostMessage } | undefined;

  /** The file's time base (origin and steps), built once per read: markers and step detection are not redone per label. */
  get time(): TimeBase {
    this.timeBase ??= timeBaseOf(this.model, this.options.originUs);
    return this.timeBase;
  }

  /**
   * Reads what a growing capture appended (Note [Growing captures] in src/glue/snapshot/panelHost.ts); returns
   * Model.poll's count. The time base is rebuilt on its next use: new steps are numbered and labelled.
   */
  poll(): number {
    const added = this.model.poll();
    if (added > 0) this.timeBase = undefined;
    // a capture's end record may come without events: its summary (integrity, the end state) is asked again
    this.firstAnswers = undefined;
    return added;
  }

  /** "12.345 s" (with the step when markers give one) since the time origin (Note [Time origin]), or "the end". */
  momentLabel(timeUs: number): string {
    return timeUs === END_OF_TRACE ? 'the end' : this.time.label(timeUs);
  }

  opened(): OpenedInfo {
    const header = this.model.header();
    const devices = this.model.devices();
    const time = this.time;
    const integrity = integrityOf(this.model, time);
    const id = identityOf(this.model);
    return {
      fileName: this.options.fileName,
      format: this.model.format,
      devices,
      timeRanges: devices.map((d) => this.model.timeRange(d)),
      // Lost events and a cut-off last record are said by the integrity banner, once.
      problems: this.model
        .problems()
        .filter((p) => !isIntegrityProblem(p))
        .map((p) => `${p.message} (at byte ${p.offset})`),
      host: header.host,
      torchVersion: header.torchVersion,
      originUs: time.originUs,
      identity: [processLine(id), allocatorLine(id)].filter(Boolean).join(' · ') || undefined,
      deviceNames: Object.fromEntries(header.devices.map((d) => [d.index, d.name])),
      integrity: {
        ended: integrity.ended,
        lostEvents: integrity.lostEvents,
        lostFromS: integrity.lostFromS,
        message: integrity.message,
        sentences: integrity.sentences,
      },
      ooms: oomRows(this.model, time).map((o) => ({ ...o, displayFile: this.display(o.file) })),
      ...(this.options.window ? { window: { ...this.options.window } } : {}),
      ...(id.not_recorded ? { notRecorded: id.not_recorded } : {}),
    };
  }

  /** Everything a freshly loaded (or restored) webview needs for one device: summary, markers, sites. */
  deviceMessages(device: number): SnapshotHostMessage[] {
    return [this.summaryMessage(device), this.sitesMessage(device)];
  }

  /** deviceMessages' first half: the summary with the markers. */
  summaryMessage(device: number, markers = this.timelineMarkers(device)): SnapshotHostMessage {
    const first = this.firstAnswers;
    if (first?.device === device && first.markers === markers) return first.summary;
    return { type: 'summary', summary: buildSummary(this.model, device, this.display), markers: markers.markers, markersTruncated: markers.truncated };
  }

  /** The markers the summary message carries (the panel host builds them in an event-loop turn of their own). */
  timelineMarkers(device: number): { markers: MarkerView[]; truncated: boolean } {
    if (this.firstAnswers?.device === device) return this.firstAnswers.markers;
    return buildMarkers(this.model, device, this.options.maxMarkers ?? MAX_MARKERS, this.time.steps);
  }

  /** deviceMessages' second half: the sites table (Note [Sites by forward line]: by forward line unless asked). */
  sitesMessage(device: number, backwardGrouping: SitesBackwardGrouping = 'forward'): SnapshotHostMessage {
    return { type: 'sites', device, rows: this.sites(device, backwardGrouping), backwardGrouping };
  }

  /** The markers of [t0Us, t1Us] (Note [Markers by range]). */
  markersIn(requestId: number, device: number, t0Us: number, t1Us: number): MarkersView {
    const { markers, truncated } = buildMarkers(this.model, device, this.options.maxMarkers ?? MAX_MARKERS, this.time.steps, { t0Us, t1Us });
    return { requestId, device, t0Us, t1Us, markers, truncated };
  }

  /** The native arguments of a timeline question: buckets and band limit within Note [Query limits], the owner group. */
  private timelineArgs(buckets: number, maxSpans: number, owner?: number): { n: number; limit: number; ownerGroup: number } {
    const n = clampInt(buckets, 1, MAX_BUCKETS);
    const limit = clampInt(maxSpans, 0, MAX_SPANS);
    const ownerGroup = typeof owner === 'number' && Number.isInteger(owner) && owner >= 0 ? owner : -1;
    return { n, limit, ownerGroup };
  }

  /**
   * Note [First answers]: the native part of a timeline question on a worker thread, so that `timeline` with the same
   * arguments then only shapes the answer on the caller's thread. Nothing else may use the model until it resolves.
   */
  async prepareTimeline(device: number, t0Us: number, t1Us: number, buckets: number, maxSpans: number, owner?: number): Promise<void> {
    const { n, limit, ownerGroup } = this.timelineArgs(buckets, maxSpans, owner);
    if (t1Us > t0Us) await this.model.prefetchTimeline?.(device, t0Us, t1Us, n, limit + 1, ownerGroup);
  }

  timeline(requestId: number, device: number, t0Us: number, t1Us: number, buckets: number, maxSpans: number, owner?: number): TimelineView {
    const { n, limit, ownerGroup } = this.timelineArgs(buckets, maxSpans, owner);
    const range = this.model.timeRange(device);
    const tl = this.model.timeline(device, t0Us, t1Us, n, true);
    // One more than drawn, so "there were more" is known without counting them all.
    const spans = this.model.spans(device, t0Us, t1Us, limit + 1, ownerGroup);
    const truncated = spans.length > limit;
    const kept = truncated ? spans.slice(0, limit) : spans;
    kept.sort((a, b) => a.startUs - b.startUs || b.size - a.size);
    const cols: SpanColumns = { startUs: [], endUs: [], liveAtEnd: [], size: [], stackId: [], address: [], owner: [] };
    for (const s of kept) {
      const live = !Number.isFinite(s.endUs);
      cols.startUs.push(s.startUs);
      cols.endUs.push(live ? Math.max(range.t1Us, s.startUs) : s.endUs);
      cols.liveAtEnd.push(live);
      cols.size.push(s.size);
      cols.stackId.push(s.stackId);
      cols.address.push(s.address);
      cols.owner.push(s.owner);
    }
    // Note [Snapshot extras]: the hover says a band's user_metadata (a pickle's, or a capture's memory label from
    // _set_memory_metadata) and compile context; columns only when some band has one.
    if (kept.some((s) => s.userMetadata !== undefined || s.compileContext !== undefined)) {
      cols.userMetadata = kept.map((s) => s.userMetadata ?? '');
      cols.compileContext = kept.map((s) => s.compileContext ?? '');
    }
    return {
      requestId,
      device,
      t0Us: tl.t0Us,
      t1Us: tl.t1Us,
      buckets: tl.buckets,
      allocatedMin: tl.allocatedMin,
      allocatedMax: tl.allocatedMax,
      reservedMax: tl.reservedMax,
      spans: cols,
      spansTruncated: truncated,
      owners: tl.owners && { ...tl.owners, lines: tl.owners.lines.map((l) => ({ ...l, displayFile: this.display(l.file) })) },
    };
  }

  segments(requestId: number, device: number, timeUs: number): SegmentMapView {
    const at = timeUs === END_OF_TRACE ? Infinity : timeUs;
    const state = this.model.stateAt(device, at);
    const breakdown = breakdownFromSegments(state.segments);
    const segments = [...state.segments]
      .sort((a, b) => a.address - b.address)
      .map((seg) => ({
        address: seg.address,
        totalSize: seg.totalSize,
        stream: seg.stream,
        pool: seg.pool,
        ...(seg.poolId ? { poolId: seg.poolId } : {}),
        expandable: seg.expandable,
        blocks: [...seg.blocks]
          .sort((a, b) => a.address - b.address)
          .map((b) => ({
            offset: b.address - seg.address,
            size: b.size,
            requestedSize: b.requestedSize,
            state: b.state,
            stackId: b.stackId,
            ...(b.untraced ? { untraced: true } : {}),
          })),
      }));
    // An OOM explains the state only at the moment it happened, not at an arbitrary point of the timeline.
    return { requestId, device, timeUs: Number.isFinite(state.timeUs) ? state.timeUs : timeUs, segments, breakdown, verdict: verdictAt(this.model, device, at, breakdown) };
  }

  sites(device: number, backwardGrouping: SitesBackwardGrouping = 'forward'): SiteRow[] {
    return this.model
      .lineStats(device, backwardGrouping === 'caller' ? { backwardOnCaller: true } : undefined)
      .slice(0, MAX_SITES)
      .map((s) => ({
        file: s.file,
        displayFile: this.display(s.file),
        line: s.line,
        selfBytesAtPeak: s.selfBytesAtPeak,
        inclusiveBytesAtPeak: s.inclusiveBytesAtPeak,
        totalAllocatedBytes: s.totalAllocatedBytes,
        allocCount: s.allocCount,
        liveNowBytes: s.liveNowBytes,
        backwardBytesAtPeak: s.backwardBytesAtPeak,
        ownerGroup: s.ownerGroup,
        topStackId: s.topStacks[0]?.stackId ?? 0,
      }));
  }

  stack(requestId: number, stackId: number): StackView {
    const st = this.model.stack(stackId);
    return {
      requestId,
      stackId,
      backward: st?.backward ?? false,
      ...(st?.backwardOf ? { backwardOf: { ...st.backwardOf } } : {}),
      frames: (st?.frames ?? []).map((f) => ({
        file: f.file,
        line: f.line,
        name: f.name,
        user: f.user,
        ...(f.fx ? { fx: { op: f.fx.op, node: f.fx.node, target: f.fx.target, ...(f.fx.origin ? { origin: f.fx.origin } : {}) } } : {}),
      })),
    };
  }

  /** What grew and shrank by line between two moments of this file, or between this file and `other`. */
  diff(requestId: number, device: number, aUs: number, bUs: number, labels: [string, string], other?: Model): DiffView {
    const a = aUs === END_OF_TRACE ? Infinity : aUs;
    const b = bUs === END_OF_TRACE ? Infinity : bUs;
    const rows = this.model.diff(device, a, b, other).filter((r) => r.deltaBytes !== 0);
    let grew = 0;
    let shrank = 0;
    for (const r of rows) {
      if (r.deltaBytes > 0) grew += r.deltaBytes;
      else shrank -= r.deltaBytes;
    }
    rows.sort((x, y) => Math.abs(y.deltaBytes) - Math.abs(x.deltaBytes) || x.file.localeCompare(y.file) || x.line - y.line);
    return {
      requestId,
      device,
      beforeLabel: labels[0],
      afterLabel: labels[1],
      rows: rows.slice(0, MAX_DIFF_ROWS).map((r) => ({ ...r, displayFile: this.display(r.file) })),
      grewBytes: grew,
      shrankBytes: shrank,
    };
  }

  /**
   * Every policy's replay of the device's stream at the device's capacity (the panel's what-if table).
   * Synchronous and on demand: a long trace takes a few seconds, so the page asks only on a button press.
   */
  replay(requestId: number, device: number): ReplayView {
    const set = replayPolicies(this.model, device, POLICIES);
    let ownPolicy: Policy | undefined;
    try {
      ownPolicy = set.none ? undefined : this.model.whatIf(device, Infinity).policy;
    } catch {
      ownPolicy = undefined; // the table stands without the mark
    }
    const ran = set.results.find((r) => r.policy === ownPolicy);
    return {
      requestId,
      device,
      capacityBytes: set.capacity.bytes ?? null,
      capacitySource: set.capacity.source,
      ownPolicy,
      ...(set.none ? { none: set.none } : {}),
      ...(ran ? { check: replayCheckSentence(replayCheck(this.model, device, ran)) } : {}),
      rows: set.results.map((r) => {
        const best = r.emptyCacheAtMarkers.reduce<{ releasesBytes: number; name?: string }>((a, m) => (m.releasesBytes > a.releasesBytes ? m : a), { releasesBytes: 0 });
        return {
          policy: r.policy,
          label: POLICY_LABELS[r.policy],
          allocConf: r.allocConf,
          modelled: r.modelled,
          notModelled: [...r.notModelled],
          peakReservedBytes: r.peakReservedBytes,
          peakAllocatedBytes: r.peakAllocatedBytes,
          ratio: r.ratio,
          peakAtUs: r.peakAtUs,
          bestMarkerReleaseBytes: best.releasesBytes,
          bestMarkerName: best.name,
          oom: r.oom && { atUs: r.oom.tUs, requestedBytes: r.oom.requestedBytes, cause: r.oom.cause, sentence: r.oom.sentence },
        };
      }),
    };
  }

  /**
   * Answers the queries that need only the model. Returns undefined for messages the glue must handle
   * (go to source, pickers, exports, drops). Failures become `requestFailed` for the asking request.
   */
  handle(msg: SnapshotWebviewMessage): SnapshotHostMessage[] | undefined {
    try {
      switch (msg.type) {
        case 'ready': {
          const info = this.opened();
          const first = info.devices[0];
          return [{ type: 'opened', info }, ...(first === undefined ? [] : this.deviceMessages(first))];
        }
        case 'selectDevice':
          return this.deviceMessages(msg.device);
        case 'requestTimeline':
          return [{ type: 'timeline', view: this.timeline(msg.requestId, msg.device, msg.t0Us, msg.t1Us, msg.buckets, msg.maxSpans, msg.owner) }];
        case 'requestMarkers':
          return [{ type: 'markers', view: this.markersIn(msg.requestId, msg.device, msg.t0Us, msg.t1Us) }];
        case 'requestSegments':
          return [{ type: 'segments', view: this.segments(msg.requestId, msg.device, msg.timeUs) }];
        case 'requestStack':
          return [{ type: 'stack', view: this.stack(msg.requestId, msg.stackId) }];
        case 'requestSites':
          return [this.sitesMessage(msg.device, msg.backwardGrouping)];
        case 'requestReplay':
          return [{ type: 'replay', view: this.replay(msg.requestId, msg.device) }];
        case 'requestCategories':
          return [{ type: 'categories', view: categoriesView(this.model, msg.device, this.time, msg.requestId, msg.timeUs, this.display) }];
        case 'requestAdvice':
          return [{ type: 'advice', view: { requestId: msg.requestId, device: msg.device, advice: advise(this.model, msg.device, { file: this.options.fileName }) } }];
        case 'compareMoments':
          return [{ type: 'diff', view: this.diff(msg.requestId, msg.device, msg.aUs, msg.bUs, [this.momentLabel(msg.aUs), this.momentLabel(msg.bUs)]) }];
        default:
          return undefined;
      }
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      const requestId = 'requestId' in msg && typeof msg.requestId === 'number' ? msg.requestId : -1;
      return [{ type: 'requestFailed', requestId, message }];
    }
  }
}

function clampInt(v: number, lo: number, hi: number): number {
  if (!Number.isFinite(v)) return lo;
  return Math.max(lo, Math.min(hi, Math.round(v)));
}
