// The snapshot panel's half of the host ⇄ webview message contract (src/core/base/protocol/index.ts re-exports it).
// Imported by both the extension host (src/glue/snapshot/) and the browser bundle (webview/snapshot/), so it
// holds types and tiny pure helpers only.
//
// Note [JSON-safe numbers]: webview messages are JSON-serialised, so Infinity and NaN do not survive. Times
// are finite µs since the epoch; an allocation still live at the end of the trace has `liveAtEnd` set and
// its end clamped to the end of the trace. "The end of the trace" is spelled END_OF_TRACE (−1) in requests.
//
// Note [Only what is drawn]: the host never sends the trace. It answers each query with what the view draws
// at its current pixel width: min/max buckets, at most `maxSpans` allocation bands (largest first), the
// segments of one moment, and the line table.

import type { BlockState, DeviceOverview, LineStat, MarkerKind, SourceFormat, TimelineBuckets, TimelineOwners } from '../model/types';
import type { Policy } from '../model/whatIf';
import { arrayOf, bool, bytes, int, list, type MessageIn, num, obj, oneOf, optional, protocol, refine, str, view } from './schema';
import type { CategoriesView } from './categories';
import type { BackwardOfView } from './backwardOf';

export type { CategoriesView, CategoryMomentView, LeakView, StepRowView } from './categories';
import type { Advice } from './advice';

export const END_OF_TRACE = -1;

/** Allocation bands the timeline tab asks for (its `maxSpans`); the host prepares the first answer for it. */
export const TIMELINE_MAX_SPANS = 3000;

/** Which tab the panel shows; restored from webview state. */
export const SNAPSHOT_TABS = ['summary', 'timeline', 'segments', 'sites', 'compare', 'replay', 'categories', 'advice'] as const;
export type SnapshotTab = (typeof SNAPSHOT_TABS)[number];

export interface MarkerView {
  timeUs: number;
  kind: MarkerKind;
  label: string;
}

/**
 * The markers of a window of the run (Note [Markers by range]): what the zoomed timeline draws when the first
 * answer's markers were thinned. truncated: the window itself held more than the limit.
 */
export interface MarkersView {
  requestId: number;
  device: number;
  t0Us: number;
  t1Us: number;
  markers: MarkerView[];
  truncated: boolean;
}

/** Reserved − requested, split into where the bytes are (Note [Breakdown] in src/core/analyses/breakdown/breakdown.ts). */
export interface BreakdownView {
  reservedBytes: number;
  allocatedBytes: number;
  requestedBytes: number;
  /** inactive bytes in segments that hold no active block: empty_cache() would release them */
  cachedFreeBytes: number;
  /** whole pages inside free blocks of expandable segments that still hold tensors: empty_cache() unmaps them */
  releasablePageBytes: number;
  /** the parts of those free blocks smaller than a page: they stay mapped */
  subPageRemainderBytes: number;
  /** inactive bytes in fixed segments that also hold active blocks: split remainders, not releasable */
  splitRemainderBytes: number;
  /** freed by the program but still used by another stream (record_stream) */
  pendingFreeBytes: number;
  /** Σ (size − requested) over allocated blocks: the 512 B / size-class rounding inside allocated memory */
  roundingWasteBytes: number;
  freeBlocks: number;
  largestFreeBlockBytes: number;
  /** how many segments of each kind (the parts that apply depend on it) */
  expandableSegments: number;
  fixedSegments: number;
}

export interface SummaryView {
  device: number;
  /** figures at the end of the file (the snapshot's moment), like memory_summary() at that point */
  allocatedBytes: number;
  reservedBytes: number;
  /** allocated + pending free, PyTorch's active_bytes */
  activeBytes: number;
  requestedBytes: number;
  segments: number;
  blocks: number;
  allocatedBlocks: number;
  peakAllocatedBytes: number;
  peakAtTimeUs: number;
  peakReservedBytes: number;
  oomCount: number;
  events: number;
  breakdown: BreakdownView;
  verdict: string;
  /**
   * the end's allocated and reserved are PyTorch's figures at this sample (no event at the end: figures only, after
   * the recorded steps); the allocator state (segments, blocks, active, requested, the breakdown) is not known, and
   * `why` says why no what-if is answered
   */
  endFromStats?: { sampleUs: number; why: string };
  /** what the snapshot carries beyond these figures; absent where there is nothing to show */
  details?: SnapshotDetailsView;
}

/** A private pool at the end of the file (Note [Private pools] in src/core/analyses/pools/index.ts). */
export interface PoolView {
  poolId: [number, number];
  /** "MemPool (0, 1)" / "CUDA graph pool (1, 0)" */
  label: string;
  segments: number;
  reservedBytes: number;
  activeBytes: number;
  freeBytes: number;
  largestFreeBlockBytes: number;
  /** 0..1: the share of the pool's free bytes outside its largest free block */
  fragmentation: number;
}

/** A user_metadata value or compile context with the allocations it tagged. */
export interface TaggedView {
  value: string;
  allocations: number;
  bytes: number;
  firstUs: number;
  lastUs: number;
}

/** Pinned host memory's own totals (PyTorch 2.14's host_segments / host_traces), at the end of the file. */
export interface HostView {
  segments: number;
  blocks: number;
  allocatedBlocks: number;
  reservedBytes: number;
  allocatedBytes: number;
  activeBytes: number;
  cachedBytes: number;
  largestFreeBlockBytes: number;
  peakAllocatedBytes: number;
  peakAtTimeUs: number;
  events: number;
  /** each pinned segment: its size, what is allocated in it, its innermost frame ("file:line") */
  rows: { address: number; totalSize: number; allocatedBytes: number; state: string; where: string }[];
}

/** Note [Snapshot section] (src/core/analyses/summary/snapshotSection.ts): the Summary tab's sections past the figures. */
export interface SnapshotDetailsView {
  pools: PoolView[];
  /** Note [Untraced blocks]: allocated at the end, no allocation in the trace */
  untracedBlocks: number;
  untracedBytes: number;
  userMetadata: TaggedView[];
  compileContexts: TaggedView[];
  annotations: { name: string; ranges: number }[];
  /** allocator_settings as the run had them (values as text); null when the file has none */
  allocatorSettings: { key: string; value: string }[] | null;
  host: HostView | null;
  /** keys this reader does not know: where, name, how often, the first value raw (JSON) */
  unknownKeys: { where: string; key: string; count: number; raw: string }[];
}

/** One entry of `ooms` in `gpumem summary --json` (src/core/analyses/summary/ooms.ts). */
export interface OomRow {
  t_s: number;
  step: number | null;
  /** raw µs since the epoch (PyTorch's time_us), for tools that line it up with other traces */
  time_us: number;
  device: number;
  requested_bytes: number;
  device_free_bytes: number;
  /** 0 when the file does not say (a PyTorch pickle's oom entry has no total) */
  device_total_bytes: number;
  /** the innermost user frame ("<no user frame>" when the stack has none) */
  file: string;
  line: number;
  verdict: 'fragmentation' | 'shortage';
  sentence: string;
}

/** One OOM of the file as the panel lists it: the summary's row with a path for display. */
export interface OomView extends OomRow {
  displayFile: string;
}

/** How complete the file is (src/core/analyses/summary/integrity.ts): shown as an alert banner when not clean. */
export interface IntegrityView {
  ended: 'clean' | 'early' | 'writer-failure' | 'stopped';
  lostEvents: number;
  lostFromS: number | null;
  message: string | null;
  sentences: string[];
}

export interface OpenedInfo {
  fileName: string;
  format: SourceFormat;
  devices: number[];
  /** per device, index-aligned with `devices` */
  timeRanges: { t0Us: number; t1Us: number }[];
  problems: string[];
  host?: string;
  torchVersion?: string;
  /** Note [Time origin]: times are shown as seconds since this (the first allocator event) */
  originUs: number;
  /** "rank 1 of 2 · pid 4242 on node-a"; undefined when the file names no process (a pickle) */
  identity?: string;
  /** GPU names by device index, from the capture's REC_DEVICE records */
  deviceNames: Record<number, string>;
  integrity: IntegrityView;
  ooms: OomView[];
  /** Note [Range-first open]: only this window of the file was read (absent: the whole file) */
  window?: OpenedWindow;
  /** Note [Not recorded]: what the recording settings left out of this file */
  notRecorded?: string[];
}

/** Allocation bands of a time window, column-major arrays (one entry per band), sorted by start time. */
export interface SpanColumns {
  startUs: number[];
  endUs: number[];
  liveAtEnd: boolean[];
  size: number[];
  stackId: number[];
  address: number[];
  /** owner group of each band (TimelineOwners in model/types.ts) */
  owner: number[];
  /** the band's user_metadata and compile context ("" none); present only when some band has one */
  userMetadata?: string[];
  compileContext?: string[];
}

/**
 * The timeline tab's answer: the model's min/max buckets (TimelineBuckets, one declaration of a timeline) as the
 * page draws them — allocated as a band (its floor and envelope, for oscillation at coarse zoom), reserved as
 * its envelope — with the allocation bands of the window.
 */
/**
 * Note [First view]: what the page paints while the full model is still being read: allocated and reserved over
 * the whole run of each device (a first pass over the pickle), with the peaks. Replaced by the tabs on `opened`.
 */
export interface OverviewView {
  fileName: string;
  devices: DeviceOverview[];
}

/**
 * Note [Range-first open] (native/addon/src/range_open.cpp, src/glue/snapshot/panelHost.ts): a pickle too big to
 * hold whole (or one the user asked to open by range) shows its overview and waits: the user selects a time window
 * on it and the host opens that window only (`loadRange`), or the whole file (`loadWhole`).
 */
export interface RangeChoiceView extends OverviewView {
  /** the file's size, for the sentence that says why it is not opened whole */
  fileBytes: number;
  /** true when the host chose range-first because of the size (false: the user asked for it) */
  bySize: boolean;
}

/** The time window a range-first panel holds ([fromUs, toUs], the model's µs); absent for a whole open. */
export interface OpenedWindow {
  fromUs: number;
  toUs: number;
}

export interface TimelineView extends Pick<TimelineBuckets, 'device' | 't0Us' | 't1Us' | 'buckets' | 'allocatedMin' | 'allocatedMax' | 'reservedMax'> {
  requestId: number;
  spans: SpanColumns;
  /** true when more allocations overlapped the window than were sent (the rest is drawn by owner group) */
  spansTruncated: boolean;
  /** owner groups per bucket, sampled at bucket centres; lines carry displayFile for labels */
  owners?: Omit<TimelineOwners, 'lines'> & { lines: { file: string; displayFile: string; line: number }[] };
}

export interface BlockView {
  /** offset from the segment's start address */
  offset: number;
  size: number;
  requestedSize: number;
  state: BlockState;
  stackId: number;
  /** Note [Untraced blocks]: allocated, but its allocation is not in the trace (history unknown) */
  untraced?: boolean;
}

export interface SegmentView {
  address: number;
  totalSize: number;
  stream: number;
  pool: 'small' | 'large' | 'private';
  /** a private pool's id (segment_pool_id) */
  poolId?: [number, number];
  expandable: boolean;
  blocks: BlockView[];
}

export interface SegmentMapView {
  requestId: number;
  device: number;
  timeUs: number;
  segments: SegmentView[];
  breakdown: BreakdownView;
  verdict: string;
}

/**
 * Note [Sites by forward line]: where the Top sites tab puts allocations made during backward. 'forward' (the default,
 * the editor annotations' grouping): on the forward line whose op's backward made them, included in its bytes and
 * shown again in a backward column (Note [Linked backward stacks] in src/core/base/model/types.ts). 'caller': on
 * the line that called backward(), as before backward was linked (Model.lineStats with backwardOnCaller), to see
 * what one backward() holds in all.
 */
export const SITES_BACKWARD_GROUPINGS = ['forward', 'caller'] as const;
export type SitesBackwardGrouping = (typeof SITES_BACKWARD_GROUPINGS)[number];

/** A line's statistics as the model computes them (the editor annotations' numbers), ready for the grid. */
export interface SiteRow extends Omit<LineStat, 'topStacks'> {
  /** path shown to the user: workspace-relative when possible, else the path as recorded */
  displayFile: string;
  topStackId: number;
}

export interface FrameView {
  file: string;
  line: number;
  name: string;
  /** the reader's Frame.user (Note [User frames], native/format/README.md) */
  user: boolean;
  /** torch.compile: the FX node this generated line runs, and the user's line it came from (Note [FX frames]) */
  fx?: { op: string; node: string; target: string; origin?: { file: string; line: number; name: string; user: boolean } };
}

export interface StackView {
  requestId: number;
  stackId: number;
  /** made during backward */
  backward: boolean;
  /** made by the backward of this forward op (Note [Linked backward stacks]); absent when not linked */
  backwardOf?: BackwardOfView;
  frames: FrameView[];
}

export interface DiffRow {
  file: string;
  displayFile: string;
  line: number;
  beforeBytes: number;
  afterBytes: number;
  deltaBytes: number;
}

export interface DiffView {
  requestId: number;
  device: number;
  /** what A and B are, in words ("12.3 s", "peak", "other.pickle at end") */
  beforeLabel: string;
  afterLabel: string;
  rows: DiffRow[];
  grewBytes: number;
  shrankBytes: number;
}

/**
 * One allocator policy's replay of the device's allocation stream (src/core/analyses/replay). Not modelled (Note
 * [Settings of the data]): `notModelled` says which setting, and the figures are null.
 */
export interface ReplayRowView {
  policy: Policy;
  label: string;
  /** the pytorch policies' PYTORCH_CUDA_ALLOC_CONF settings ('' for PyTorch's defaults and the lens) */
  allocConf: string;
  modelled: boolean;
  notModelled: string[];
  peakReservedBytes: number | null;
  peakAllocatedBytes: number | null;
  /** peak reserved / peak allocated */
  ratio: number | null;
  peakAtUs: number | null;
  /** the most empty_cache() would release at any user marker (0 when none) */
  bestMarkerReleaseBytes: number;
  bestMarkerName?: string;
  /** null: the run fits the capacity (or no capacity was known) */
  oom: { atUs: number; requestedBytes: number; cause: 'shortage' | 'fragmentation'; sentence: string } | null;
}

export interface ReplayView {
  requestId: number;
  device: number;
  /** the simulated device's size; null when the data records none (no OOM check) */
  capacityBytes: number | null;
  capacitySource: string;
  /** the policy the data was recorded under, when the engine can tell */
  ownPolicy?: Policy;
  /** the replay of that policy against the recorded peak, in one sentence (Note [Replay check]) */
  check?: string;
  rows: ReplayRowView[];
  /** why nothing was replayed (rows empty): an allocator the engine does not model, no events */
  none?: string;
}

/** `gpumem advise` for one device, for the panel's "What to do" tab; numbers are finite */
export interface AdviceView {
  requestId: number;
  device: number;
  advice: Advice;
}

/**
 * A session folder's ranks side by side (Note [Ranks side by side] in src/core/views/ranks/rankSet.ts): the
 * per-rank table (`gpumem summary DIR…`'s rows) and each rank's timeline on one time axis (the same µs since the
 * epoch for every rank), min/max buckets as the timeline tab's (Note [Only what is drawn]).
 */
export interface RankRowView {
  /** index into the rank set's captures, what `openRank` names */
  index: number;
  fileName: string;
  host: string | null;
  rank: number | null;
  worldSize: number | null;
  pid: number | null;
  device: number | null;
  deviceName: string | null;
  peakAllocatedBytes: number;
  peakReservedBytes: number;
  ooms: number;
  topLine: { file: string; displayFile: string; line: number; bytesAtPeak: number } | null;
  /** Note [Rank flags] */
  flag: 'high' | 'low' | null;
  /** Note [Rank marks] (src/core/views/ranks/rankSet.ts): the slowest rank, a rank that ran out of memory */
  marks: ('slowest' | 'oom')[];
  problems: string[];
  /** the rank's own first and last event on the shared axis (0, 0 when the capture has none) */
  t0Us: number;
  t1Us: number;
  /** the rank's device at the shared buckets, 0 in buckets wholly outside its own range; empty without events */
  allocatedMax: number[];
  reservedMax: number[];
}

export interface RanksView {
  /** the folder(s) opened, as shown in the header */
  title: string;
  medianPeakAllocatedBytes: number;
  /** the shared time axis: every rank's first to last event */
  t0Us: number;
  t1Us: number;
  buckets: number;
  ranks: RankRowView[];
  /** the rank table's sentences (outliers, OOMs), as `gpumem summary DIR` prints them */
  sentences: string[];
}

// The snapshot panel's messages, one declaration per direction (Note [Message schemas] in schema.ts): the
// message types and the validators their receivers run are both derived from these tables.

const requestId = int;
const device = int;

/** Host → webview (checked by webview/snapshot): the envelope and the fields the page branches on. */
export const snapshotHostMessages = protocol('snapshot panel, host → webview', {
  loading: obj({ fileName: str(Infinity) }),
  loadFailed: obj({ fileName: str(Infinity), message: str(Infinity) }),
  /** Note [First view]: the whole run's overview, before `opened` (big pickles only) */
  overview: obj({ view: view<OverviewView>({ fileName: str(Infinity), devices: list() }) }),
  /** Note [Range-first open]: the overview with a window picker; the model is read once the user picks */
  chooseRange: obj({ view: view<RangeChoiceView>({ fileName: str(Infinity), devices: list(), fileBytes: num }) }),
  opened: obj({ info: view<OpenedInfo>({ fileName: str(Infinity), devices: arrayOf(int), timeRanges: list() }) }),
  /** a capture still being written grew: new time ranges; the page re-asks for what it shows */
  grew: obj({ info: view<OpenedInfo>({ fileName: str(Infinity), devices: arrayOf(int), timeRanges: list() }), ended: bool }),
  summary: obj({ summary: view<SummaryView>({ device }), markers: list<MarkerView>(), markersTruncated: bool }),
  timeline: obj({ view: view<TimelineView>({ requestId, device }) }),
  markers: obj({ view: view<MarkersView>({ requestId, device, markers: list() }) }),
  segments: obj({ view: view<SegmentMapView>({ requestId, device, segments: list() }) }),
  /** the lines, with backward allocations grouped as asked (Note [Sites by forward line]) */
  sites: obj({ device, rows: list<SiteRow>(), backwardGrouping: oneOf(SITES_BACKWARD_GROUPINGS) }),
  stack: obj({ view: view<StackView>({ requestId, stackId: int, frames: list() }) }),
  diff: obj({ view: view<DiffView>({ requestId, device, rows: list() }) }),
  replay: obj({ view: view<ReplayView>({ requestId, device, rows: list() }) }),
  categories: obj({ view: view<CategoriesView>({ requestId, device, steps: list(), leaks: list() }) }),
  advice: obj({ view: view<AdviceView>({ requestId, device }) }),
  /** show this tab (the OOM notification's "Open Advice" opens the panel on "What to do") */
  showTab: obj({ tab: oneOf(SNAPSHOT_TABS) }),
  requestFailed: obj({ requestId, message: str(Infinity) }),
  /** a short status line, e.g. "Saved memory.png" */
  notice: obj({ message: str(Infinity) }),
  /** the panel was opened on a session folder: its ranks side by side instead of one file's tabs */
  ranks: obj({ view: view<RanksView>({ title: str(Infinity), buckets: int, ranks: list() }) }),
});
export type SnapshotHostMessage = MessageIn<typeof snapshotHostMessages>;

const PNG_PREFIX = 'data:image/png;base64,';

/**
 * Webview → host (checked by src/glue/snapshot): the page is untrusted input, so anything outside this
 * contract (wrong type, non-finite numbers, oversized strings) is dropped instead of reaching the model or
 * the file system.
 */
export const snapshotWebviewMessages = protocol('snapshot panel, webview → host', {
  ready: obj({}),
  selectDevice: obj({ device }),
  /** owner: only that owner group's allocations as bands (TimelineOwners); absent: all */
  requestTimeline: refine(
    obj({ requestId, device, t0Us: num, t1Us: num, buckets: num, maxSpans: num, owner: optional(int) }),
    (m) => m.t1Us > m.t0Us,
    't1Us must be after t0Us',
  ),
  /** the markers of [t0Us, t1Us] when the summary's were thinned (Note [Markers by range]) */
  requestMarkers: refine(obj({ requestId, device, t0Us: num, t1Us: num }), (m) => m.t1Us > m.t0Us, 't1Us must be after t0Us'),
  requestSegments: obj({ requestId, device, timeUs: num }),
  requestStack: obj({ requestId, stackId: int }),
  /** the sites table again, backward allocations grouped by forward line or by the backward() caller's line */
  requestSites: obj({ device, backwardGrouping: oneOf(SITES_BACKWARD_GROUPINGS) }),
  /** replay the device's allocation stream under every allocator policy (on demand: it can take seconds) */
  requestReplay: obj({ requestId, device: refine(int, (d) => d >= 0, 'must not be negative') }),
  /** the Categories tab: the peak, and timeUs (a moment, or END_OF_TRACE) beside it when given */
  requestCategories: obj({ requestId, device: refine(int, (d) => d >= 0, 'must not be negative'), timeUs: optional(num) }),
  /** the advice of the device (on demand: it replays the trace under every policy) */
  requestAdvice: obj({ requestId, device: refine(int, (d) => d >= 0, 'must not be negative') }),
  goToSource: obj({ file: str(), line: int }),
  /** two moments of this file (END_OF_TRACE allowed) */
  compareMoments: obj({ requestId, device, aUs: num, bUs: num }),
  /** this file's end against another file the host asks for with a file picker */
  compareFile: obj({ requestId, device }),
  exportPickle: obj({ device, atUs: num }),
  exportPng: obj({
    dataUrl: refine(str(64 * 1024 * 1024), (u) => u.startsWith(PNG_PREFIX), `must start with ${PNG_PREFIX}`),
    suggestedName: str(200),
  }),
  /** a file dropped on the panel: a URI from VS Code's explorer or the OS (text/uri-list) */
  openDroppedUri: obj({ uri: str() }),
  /** a dropped file without a path (from a browser-side File): its bytes */
  openDroppedBytes: obj({ name: str(255), bytes }),
  /** Note [Range-first open]: read [fromUs, toUs] of the file only (the answer to `chooseRange`) */
  loadRange: refine(obj({ fromUs: num, toUs: num }), (m) => m.toUs > m.fromUs, 'toUs must be after fromUs'),
  /** Note [Range-first open]: read the whole file after all (the other answer to `chooseRange`) */
  loadWhole: obj({}),
  /** Note [Full open after the first paint]: the overview is on screen; the host may start the full open */
  overviewPainted: obj({}),
  /** the ranks view: open this rank's capture (RankRowView.index) in its own snapshot panel */
  openRank: obj({ index: refine(int, (i) => i >= 0, 'must not be negative') }),
});
export type SnapshotWebviewMessage = MessageIn<typeof snapshotWebviewMessages>;

/** Validates a message from the snapshot webview; undefined for anything outside the contract. */
export const parseSnapshotWebviewMessage = snapshotWebviewMessages.parse;
