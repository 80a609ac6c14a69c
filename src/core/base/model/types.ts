// The model every view is computed from: one per opened capture or PyTorch snapshot pickle.
// Plain data only (structured-clone safe), so the same objects travel to webviews unchanged.
// No `vscode` import anywhere under src/core.
//
// Units: bytes are numbers (exact up to 2^53, i.e. 8 PiB); times are microseconds since the Unix epoch
// (`timeUs`), matching PyTorch's `time_us`, so captures and pickles share one axis.

import type { Policy, PolicySource, ReplayResult, WhatIfAnswer, WhatIfQuery } from './whatIf';

export type SourceFormat = 'gpumem-capture' | 'pytorch-pickle';

export interface Frame {
  file: string;
  line: number;
  name: string;
  /**
   * the user's own code, by the reader's one rule (Note [User frames], native/format/README.md): not a
   * pseudo-file, not under site-packages/dist-packages, the standard library or the tool's own directory
   */
  user: boolean;
  /** a frame of torch.compile's generated code with its FX node (Note [FX frames] in native/addon/src/snapshot_import.cpp) */
  fx?: FxFrameInfo;
}

/** The compiled graph's node a generated line runs, and the user's line it was traced from. */
export interface FxFrameInfo {
  /** FX node op ("call_function"), name ("addmm") and target ("aten.addmm.default"); "" when absent */
  op: string;
  node: string;
  target: string;
  /** the traceback the node was traced from, as Python prints it */
  originalTrace: string;
  /** its last frame: the user's source line (the stack's user frame prefers it) */
  origin?: { file: string; line: number; name: string; user: boolean };
}

/** A source position without the user flag (the reader names it; its frame says whether it is the user's). */
export interface SourcePosition {
  file: string;
  line: number;
  name: string;
}

/**
 * Note [Linked backward stacks]: the recorder links each allocation made while an autograd node runs to the
 * forward op that created the node (how: Note [Backward on the forward line] in native/allocator/src/backward_links.h;
 * gpuMemoryLens.backwardOnForwardLine turns it off). Such a stack reads: the forward frames (innermost first), a synthetic `<module>`
 * frame naming the module path (only when known), a synthetic `<backward>` frame naming the node (line 0), then the
 * frames of the thread that called backward(). Under activation checkpointing a recomputation's stack begins with
 * the recompute's own frames and is flagged recomputed. Synthetic frames are never user frames, so the stack's user
 * frame (userFrame, the line everything above the model attributes to) is the forward line, and nothing above the
 * model special-cases `backward` to name the backward() line. An allocation made during backward that is linked to no
 * forward op keeps the backward() caller's stack, and so that line.
 *
 * BackwardOf is what the reader says of such a stack beside its frames.
 */
export interface BackwardOf {
  /** the autograd node, e.g. "ConvolutionBackward0" */
  node: string;
  /** the module path of the forward op, e.g. "layer1.0.conv1"; "" when unknown */
  module: string;
  /** made while activation checkpointing recomputed the forward: the stack begins with the recompute's frames */
  recomputed: boolean;
  /** the innermost user frame of the forward part (the line the allocation is attributed to) */
  line: SourcePosition | null;
  /** the innermost frame of the forward part, any file */
  op: SourcePosition | null;
}

/**
 * A call stack, innermost frame first. `backward`: allocated during backward (on an autograd thread);
 * `backwardOf`: present only when that allocation is linked to the forward op that created its node.
 */
export interface Stack {
  id: number;
  frames: Frame[];
  backward: boolean;
  backwardOf?: BackwardOf;
}

export type BlockState = 'active_allocated' | 'active_pending_free' | 'inactive';

export interface BlockInfo {
  address: number;
  size: number;
  requestedSize: number;
  state: BlockState;
  stackId: number; // 0 = unknown
  /**
   * allocated, but no allocation of the trace is live here at the end: made before recording began (or dropped from
   * the trace's ring buffer), so its history is unknown (Note [Untraced blocks] in native/addon/src/model.h)
   */
  untraced?: boolean;
}

export interface SegmentInfo {
  device: number;
  address: number;
  totalSize: number;
  stream: number;
  pool: 'small' | 'large' | 'private';
  /** a private pool's id (PyTorch's segment_pool_id): (0, n) a MemPool or graph_pool_handle(), (n, 0) a CUDA graph's own */
  poolId?: [number, number];
  expandable: boolean;
  /** an expandable segment's page size, where the data records it (else 2 MiB small, 20 MiB large) */
  pageSize?: number;
  stackId: number;
  blocks: BlockInfo[];
}

export interface Fragmentation {
  reservedBytes: number;
  allocatedBytes: number;
  /** reserved − allocated */
  unallocatedBytes: number;
  largestFreeBlockBytes: number;
  freeBlocks: number;
  /** free bytes in segments with no allocated block (released by empty_cache) */
  cachedFreeBytes: number;
  /** free bytes in segments that also hold allocated blocks (split remainders; not releasable) */
  splitRemainderBytes: number;
  /** Σ (block size − requested size) over allocated blocks */
  roundingWasteBytes: number;
  pendingFreeBytes: number;
}

export interface AllocatorState {
  device: number;
  timeUs: number;
  segments: SegmentInfo[];
  fragmentation: Fragmentation;
}

/** metadata: the snapshot's user_metadata changed here (Note [Metadata on the timeline] in native/addon/src/snapshot_import.cpp) */
export type MarkerKind = 'user' | 'range_begin' | 'range_end' | 'empty_cache' | 'snapshot' | 'oom' | 'notice' | 'step' | 'metadata';

export interface Marker {
  device: number;
  timeUs: number;
  kind: MarkerKind;
  label: string;
  /** empty_cache: reserved before/after; oom: requested bytes etc. */
  detail?: Record<string, number | string>;
}

export interface OomInfo {
  device: number;
  timeUs: number;
  requestedBytes: number;
  deviceFreeBytes: number;
  deviceTotalBytes: number;
  reservedBytes: number;
  allocatedBytes: number;
  largestFreeBlockBytes: number;
  /** reserved − allocated ≥ requested: the memory exists but is split up */
  verdict: 'fragmentation' | 'shortage';
  stackId: number;
  /** the innermost user frame of the stack (DESIGN §3's rule); "<no user frame>" and line 0 when none */
  file: string;
  line: number;
}

/** Timeline with min/max per pixel bucket, for any window and width. Arrays have `buckets` entries. */
export interface TimelineBuckets {
  device: number;
  t0Us: number;
  t1Us: number;
  buckets: number;
  allocatedMin: number[];
  allocatedMax: number[];
  reservedMin: number[];
  reservedMax: number[];
  /** NVML device-used samples when present (NaN where a bucket has none) */
  deviceUsedMax?: number[];
  /** live bytes and allocations per owner group at each bucket's centre (they sum to allocated there) */
  owners?: TimelineOwners;
}

/**
 * Note [First view] (native/addon/src/overview.cpp): one device of a pickle's overview, read by a first pass
 * before the model. Each bucket equals `Model.timeline(device, t0Us, t1Us, buckets)`'s.
 */
export interface DeviceOverview
  extends Pick<TimelineBuckets, 'device' | 't0Us' | 't1Us' | 'buckets' | 'allocatedMin' | 'allocatedMax' | 'reservedMin' | 'reservedMax'> {
  events: number;
  /** the device's time range as `Model.timeRange` gives it (first to last event or marker) */
  rangeT0Us: number;
  rangeT1Us: number;
  peakAllocatedBytes: number;
  peakReservedBytes: number;
  /** time of the first event that reached the allocated peak (the first event's time when the start is the peak) */
  peakAtTimeUs: number;
  startAllocatedBytes: number;
  endAllocatedBytes: number;
  /** captures only: the device's OOMs (from the index, Note [Capture index]) */
  ooms?: number;
}

export interface PickleOverview {
  devices: DeviceOverview[];
  /** captures only (Note [Capture first view]): read from the capture's index, or computed by a pass over its records */
  source?: 'index' | 'scan';
  /** captures only: false when the capture ends without its end record (the view is of the records it holds) */
  complete?: boolean;
  /** captures only, from an index that carries it (Note [Rank row from the index] in native/addon/src/capture_overview.cpp) */
  row?: CaptureIndexRow;
}

/**
 * What a capture's index carries for its rank row (Note [Index sections] in native/format/gpumem_format.h): present
 * only when the capture's header is a JSON object with clock anchors (so the full open reports no header problem).
 */
export interface CaptureIndexRow {
  /** the capture's header JSON, parsed */
  header: Record<string, unknown>;
  /** the lines at the peak (the full open's summary top_lines: bytes live at each device's peak, summed), the first few */
  topLines: { file: string; line: number; bytesAtPeak: number }[];
  /** how many lines there are in all */
  lines: number;
  /** every device of the index, with events or not */
  devices: { device: number; events: number; ooms: number; peakAllocatedBytes: number; peakReservedBytes: number }[];
  deviceNames: { device: number; name: string; totalBytes: number }[];
  /** REC_LOST records (each a problem of the full open) and the events they count */
  lostRecords: number;
  lostEvents: number;
}

/**
 * Owner groups (Note [Owner bands] in native/addon/src/aggregate.cpp): group g < lines.length is that source
 * line (innermost user frame, in the sites table's order); then "other lines", then "before the trace"
 * (memory a snapshot shows allocated before its trace began). bytes/counts: buckets × groups, row-major.
 */
export interface TimelineOwners {
  lines: { file: string; line: number }[];
  groups: number;
  bytes: number[];
  counts: number[];
}

/** Per-line statistics, DESIGN §3. */
export interface LineStat {
  file: string;
  line: number;
  /** bytes live at the device's peak whose innermost user frame is this line */
  selfBytesAtPeak: number;
  /** bytes live at the device's peak with this line anywhere in the stack */
  inclusiveBytesAtPeak: number;
  totalAllocatedBytes: number;
  allocCount: number;
  liveNowBytes: number;
  /**
   * of selfBytesAtPeak, bytes made during backward: by default those whose self line is this line (a forward line holds
   * the backward of its ops; the backward() caller's line holds what no forward op made); with `backwardOnCaller`,
   * every backward allocation on the line that called backward()
   */
  backwardBytesAtPeak: number;
  /** heaviest stacks through this line, by bytes at peak */
  topStacks: { stackId: number; bytesAtPeak: number; count: number }[];
  /** its owner group on the timeline (TimelineOwners): < lines.length its own, lines.length "other lines"; −1 owns nothing */
  ownerGroup: number;
}

/** How lineStats groups backward allocations (the sites tab's toggle). */
export interface LineStatsOptions {
  /** on the line that called backward() (the grouping before backward was linked to forward) instead of the forward line */
  backwardOnCaller?: boolean;
}

/** One row of the backward peak: bytes of one forward line and module. */
export interface BackwardPeakLine {
  file: string;
  line: number;
  /** the line's function, where the reader gives it */
  name?: string;
  /** the module path, "" when unknown or for backward bytes no forward op made (then the line is the backward() caller's) */
  module: string;
  bytes: number;
  count: number;
  /** of bytes, made by recomputation under activation checkpointing */
  recomputedBytes: number;
}

/**
 * The backward peak, as the reader computes it: the highest allocated point reached while a backward ran, and what of
 * it was made during backward, by the forward line whose op's backward made it (Note [Linked backward stacks]).
 */
export interface BackwardPeak {
  device: number;
  /** allocated bytes at that point */
  peakBytes: number;
  timeUs: number;
  /** of peakBytes, bytes allocated during backward and still live */
  madeInBackwardBytes: number;
  /** of those, bytes linked to a forward op */
  linkedBytes: number;
  recomputedBytes: number;
  /** by forward line and module, largest first, at most 20; unlinked backward bytes are rows of the backward() line */
  lines: BackwardPeakLine[];
}

/**
 * `gpumem summary --json`'s per-device `what_if` (src/core/analyses/summary/whatIf.ts computes it): what the
 * allocator that made the data would do at the end, by its own policy on the simulated device.
 */
export interface SummaryWhatIf {
  policy: Policy;
  policy_source: PolicySource;
  reserved_bytes: number;
  empty_cache_releases_bytes: number;
  largest_without_growth_bytes: number;
}

export interface DeviceSummary {
  device: number;
  /** at the end: the allocator state after the last event, or PyTorch's figures at the last sample (end_sample_us) */
  reserved_bytes: number;
  allocated_bytes: number;
  /**
   * present when the end's allocated and reserved are PyTorch's figures at this sample (figures only, after the
   * events: Note [Figures at the end] in native/addon/src/aggregate.cpp); the allocator's segments and blocks are
   * then not known (null)
   */
  end_sample_us?: number;
  segments: number | null;
  blocks: number | null;
  allocated_blocks: number | null;
  largest_free_block_bytes: number | null;
  events: number;
  peak_allocated_bytes: number;
  /** the events' peak reserved, PyTorch's peak counter where its figures are read (the higher) */
  peak_reserved_bytes: number;
  peak_at_time_us: number;
  /** what empty_cache() and a request would do at the end, by the data's own policy (src/core/analyses/summary/whatIf.ts) */
  what_if?: SummaryWhatIf;
  /** why there is no what_if, in one line (an allocator the engine does not model, no events at the end) */
  what_if_none?: string;
}

export interface TopLine {
  file: string;
  line: number;
  bytes_at_peak: number;
}

/** `gpumem summary FILE --json` (test/unit/reference/snapshot_summary.py defines every field exactly). */
export interface SnapshotSummary {
  format: SourceFormat;
  devices: DeviceSummary[];
  top_lines: TopLine[];
}

/**
 * One step of the step table. A step ending where PyTorch's figures are read (source 'stats', Note [Figures at step
 * ends] in native/addon/src/aggregate.cpp) has the figures of its last sample (null where none was read inside it),
 * and as its peak PyTorch's peak counter then (peakIsCounter: since the start or the last reset, not the step's own).
 */
export interface StepTableRow {
  endUs: number;
  peakAllocatedBytes: number | null;
  peakAtUs: number | null;
  allocatedAtEndBytes: number | null;
  reservedAtEndBytes: number | null;
  source?: 'stats';
  sampleUs?: number | null;
  peakIsCounter?: boolean;
}

/** One pass of the addon over a device's events (Note [Step table] in native/addon/src/aggregate.cpp). */
export interface StepTable {
  steps: StepTableRow[];
  /**
   * per line (innermost user frame), at each step end: the bytes of its live blocks, and the bytes its live tensors
   * asked for (Note [Leak rule]); lines never live at a step end are absent
   */
  lines: { file: string; line: number; bytesAtEnds: number[]; requestedAtEnds?: number[] }[];
}

/** What every allocated byte is (Note [Categories] in native/addon/src/categories.cpp). */
export type Category =
  | 'parameter'
  | 'buffer'
  | 'gradient'
  | 'optimizer_state'
  | 'activation'
  | 'kv_cache'
  | 'temporary'
  | 'other'
  | 'block_overhead';
export type CategoryBytes = Record<Category, number>;

export interface CategoryMoment {
  timeUs: number;
  /**
   * the moment is exactly after this many events (Note [Moment events] in native/addon/src/categories.cpp): several
   * events can share one µs, so its layout is stateAt(device, timeUs, events), not stateAt(device, timeUs)
   */
  events?: number;
  allocatedBytes: number;
  reservedBytes: number;
  /** Σ bytes = allocatedBytes − untracedBytes */
  bytes: CategoryBytes;
  /** allocated before the trace began (a pickle's start state): no category known */
  untracedBytes: number;
  /**
   * Note [Device samples of a moment] (native/addon/src/samples.cpp): the device sample "not from the allocator" is
   * read from (its device used − its own reserved); deviceUsedBytes only when that sample is of this moment (its
   * reserved is reservedBytes), so device used is never shown below the moment's reserved
   */
  deviceUsedBytes?: number;
  notFromAllocatorBytes?: number;
  deviceSample?: DeviceSample;
  /**
   * of the activation bytes, those kept past their backward by a container the leak keeper named (Note
   * [Categories] 4 in native/addon/src/categories.cpp); present only when the capture has a keeper notice
   */
  keptBytes?: number;
  /** activations by module class (the innermost `forward` of their stacks), largest first */
  modules: { module: string; bytes: number }[];
  /** per line (innermost user frame), at the peak and at the last asked moment when asked for */
  lines?: { file: string; line: number; bytes: Partial<CategoryBytes>; keptBytes?: number }[];
}

export interface CategoryReport {
  /** the workload wrote parameter/gradient/optimizer tags (an optimizer stepped under the lens bootstrap) */
  hasTags: boolean;
  /** phase facts exist (a backward ran), so activations and temporaries are told apart */
  hasPhases: boolean;
  /**
   * how activations are split by module (Note [Module paths]): "path" from the bootstrap's module marks
   * (`transformer.h.3.mlp`), "class" from forward frames (all instances of a class in one row)
   */
  moduleSource: 'path' | 'class';
  categories: Category[];
  /** exactly after the event that reached the device's peak; null for a device with no events */
  peak: CategoryMoment | null;
  /** null where the events say nothing: a device of figures only, a moment after the events stopped */
  moments: (CategoryMoment | null)[];
}

export interface LineDiff {
  file: string;
  line: number;
  beforeBytes: number;
  afterBytes: number;
  deltaBytes: number;
}

/** A memory event for the active-memory timeline (one band per allocation). */
export interface AllocationSpan {
  address: number;
  size: number;
  startUs: number;
  /** end of life; Infinity if live at the end of the trace */
  endUs: number;
  stackId: number;
  stream: number;
  /** owner group (TimelineOwners) */
  owner: number;
  /** the snapshot's user_metadata and compile context of this allocation, where it has them */
  userMetadata?: string;
  compileContext?: string;
}

/**
 * Allocations made under one memory label (`torch.cuda.memory._set_memory_metadata`): a pickle's trace entries'
 * user_metadata, or a capture's REC_USER_METADATA (Note [User metadata] in native/format/gpumem_format.h).
 */
export interface UserMetadataRow {
  device: number;
  label: string;
  /** allocations made under the label (a budgeted capture's restated ones not counted) */
  allocations: number;
  allocatedBytes: number;
  /** bytes of those allocations live at the device's peak */
  bytesAtPeak: number;
}

/** A key of the snapshot this reader does not know: kept, counted and shown raw (Note [Snapshot extras]). */
export interface UnknownKey {
  /** "snapshot" (top level), "segment", "block", "trace entry", "frame", "annotation", "host segment", … */
  where: string;
  key: string;
  /** how many dicts had it */
  count: number;
  /** the first value, as JSON */
  raw: string;
}

/** A user_metadata value or compile context and the allocations of the trace it tagged. */
export interface TaggedValue {
  value: string;
  allocs: number;
  bytes: number;
  firstUs: number;
  lastUs: number;
}

/** Pinned host memory of a PyTorch 2.14 snapshot (host_segments, host_traces; Note [Host memory]). */
export interface HostMemory {
  /** host_traces entries */
  events: number;
  peakAllocatedBytes: number;
  peakAtTimeUs: number;
  startAllocatedBytes: number;
  peakReservedBytes: number;
  t0Us?: number;
  t1Us?: number;
  /** host_segments, as device segments are given (device −1) */
  segments: SegmentInfo[];
}

/** Note [Snapshot extras] (native/addon/src/model.h): what a snapshot carries beyond events and segments. */
export interface SnapshotExtras {
  /** the snapshot's allocator_settings as it has them; null when it has none (captures) */
  allocatorSettings: Record<string, unknown> | null;
  unknownKeys: UnknownKey[];
  devices: { device: number; userMetadata: TaggedValue[]; compileContexts: TaggedValue[] }[];
  host: HostMemory | null;
}

/** A device as the capture's REC_DEVICE record names it (pickles have none). */
export interface DeviceIdentity {
  index: number;
  /** the driver's name ("NVIDIA H100 80GB HBM3") or "simulated device" */
  name: string;
  totalBytes: number;
  /** "0000:3B:00.0" when the writer knew it */
  pciBusId?: string;
}

export interface CaptureHeaderInfo {
  pid?: number;
  rank?: number;
  localRank?: number;
  worldSize?: number;
  host?: string;
  argv?: string[];
  torchVersion?: string;
  /**
   * Which allocator made the numbers: `lens` (ours) or `pytorch` (PyTorch's own, observed);
   * absent in captures from before the modes existed (they are lens captures) and in pickles.
   */
  allocatorMode?: 'lens' | 'pytorch';
  /** why that mode: "asked for …" or the auto choice's reason with file:line */
  allocatorModeReason?: string;
  /** false: recorded without Python stacks (--no-stacks); absent: not said (pickles, older captures) */
  stacks?: boolean;
  /** false: module paths were turned off (GPUMEM_MODULE_PATHS=0); absent: not said */
  modulePaths?: boolean;
  /** false: the optimizer walk's tags were turned off (GPUMEM_TAGS=0); absent: not said */
  tags?: boolean;
  /** false: allocations were not recorded one by one, only PyTorch's figures (GPUMEM_EVENTS=0); absent: not said */
  events?: boolean;
  /**
   * allocations were recorded one by one for the first N optimizer steps only, then PyTorch's figures
   * (GPUMEM_RECORD_STEPS, Note [Recorded steps] in native/python/gpumem/_recorded_steps.py); 0 or absent: every step
   */
  recordSteps?: number;
  /**
   * PyTorch's allocator backend in the PyTorch-allocator mode ("native", "cudaMallocAsync"); absent under the lens. A
   * backend other than "native" offers its stats only, so such a file has `events: false` (Note [Not recorded])
   */
  pytorchAllocatorBackend?: string;
  /** from the capture's REC_DEVICE records (the header is written before CUDA exists: Note [Devices]) */
  devices: DeviceIdentity[];
}

/** Damage found while reading: everything before `offset` was read. */
export interface ReadProblem {
  offset: number;
  message: string;
  /**
   * damage: unreadable from offset on · lost: the recorder dropped events (REC_LOST) · incomplete: a record
   * cut off at the end · header: the header lacks something · skipped: entries the reader did not know
   */
  kind?: 'damage' | 'lost' | 'incomplete' | 'header' | 'skipped';
}

/** How a capture ended: its REC_END (FORMAT.md, minor 2). */
export interface CaptureEndInfo {
  tUs: number;
  exitCode: number;
  /** 0 clean shutdown · 1 writer failure (message says where and why) · 2 stopped by the user/extension */
  reason: number;
  message: string;
}

/** Facts about the whole file that no single device holds. */
export interface FileInfo {
  /** time of the process's first allocator event on any device (the origin shown times count from) */
  originUs: number | null;
  /** latest time of any record read */
  lastUs: number | null;
  devices: DeviceIdentity[];
  /** every device index the file has records for, including ones with markers or samples only */
  recordDevices: number[];
  /** null: no REC_END (the process died, was killed, or is still running); always null for pickles */
  end: CaptureEndInfo | null;
  lostEvents: number;
  firstLostUs: number | null;
  /** from this time on no allocation is recorded one by one (--record-steps: Note [Recorded steps]); null: never */
  eventsOffUs?: number | null;
  /** compacted ranges of a budgeted capture (FORMAT.md §5), in file order; empty when all is in full detail */
  aggregated?: AggregatedRange[];
}

/** A time range whose block events a budgeted capture compacted (REC_AGGREGATED, Note [Capture budget]). */
export interface AggregatedRange {
  fromUs: number;
  toUs: number;
  /** block events compacted away, and the bytes of records that held them */
  events: number;
  bytes: number;
  budgetBytes: number;
  /** restated events written for the moments kept (peaks, OOMs, states, the range's end) */
  restated: number;
  peaks: number;
}

/** One NVML sample and the reserved bytes of its own moment (Note [Device samples of a moment]). */
export interface DeviceSample {
  timeUs: number;
  usedBytes: number;
  /** never above usedBytes: a sample that read less is never picked */
  reservedBytes: number;
}

export interface CurrentFigures {
  allocatedBytes: number;
  reservedBytes: number;
  peakAllocatedBytes: number;
  peakReservedBytes: number;
  /** device used now: the sample of now (deviceSample, when its reserved is reservedBytes); absent otherwise */
  deviceUsedBytes?: number;
  /** the latest device sample with its own reserved (Note [Device samples of a moment]) */
  deviceSample?: DeviceSample;
  deviceTotalBytes?: number;
  timeUs: number;
}

/**
 * Why a capture ended (its REC_END). `reason`: 0 clean shutdown, 1 the writer could not write (disk full,
 * file size limit, folder removed: the capture was cut at the last whole record and `message` says where
 * and why), 2 stopped by the user or the extension. Captures of format minor <= 1 read as reason 0.
 */
export interface CaptureEnd {
  reason: number;
  /** the workload's exit code, -1 when unknown (e.g. it was still running) */
  exitCode: number;
  /** empty when the writer gave none */
  message: string;
}

/** CaptureEnd.reason of a capture cut short because the writer could not write */
export const END_WRITER_FAILURE = 1;

/**
 * One opened capture or pickle. Implemented in src/core/base/model/ on top of the native addon
 * (native/addon); every method returns plain data computed natively and delivered in one batch.
 */
export interface Model {
  readonly format: SourceFormat;
  readonly path: string;
  header(): CaptureHeaderInfo;
  /** devices with memory data (events, a stated state or an OOM); devices with samples only are left out */
  devices(): number[];
  /** time origin, last time, device names, how the capture ended and what it lost */
  fileInfo(): FileInfo;
  /** damage found so far (truncated tail, unknown record…); empty for a clean file */
  problems(): ReadProblem[];
  /**
   * Live tail: decode bytes appended since the last call. Returns the number of new records the allocator wrote
   * (events, markers, notices, states; the file header counts as one; not the periodic device samples and stats):
   * 0 means nothing the allocator recorded changed (Note [Poll counts records]).
   */
  poll(): number;
  /** true once the capture's REC_END was read (the workload exited cleanly) */
  ended(): boolean;
  /** the REC_END's fields once it was read (null before): why the capture ended, FORMAT.md minor 2 */
  endRecord(): CaptureEnd | null;
  timeRange(device: number): { t0Us: number; t1Us: number };
  current(device: number): CurrentFigures;
  /** owners: also the owner groups per bucket (TimelineOwners; costs a pass over new events) */
  timeline(device: number, t0Us: number, t1Us: number, buckets: number, owners?: boolean): TimelineBuckets;
  /** allocator state at `timeUs` (Infinity = end of the capture) */
  /** `events`: exactly after that many events instead of all those up to timeUs (a category moment's `events`) */
  stateAt(device: number, timeUs: number, events?: number): AllocatorState;
  /** per-line statistics (DESIGN §3), sorted by selfBytesAtPeak descending; options: how backward is grouped */
  lineStats(device: number, options?: LineStatsOptions): LineStat[];
  /** the highest point reached while a backward ran; null when no backward ran, or the reader predates linking */
  backwardPeak(device: number): BackwardPeak | null;
  stack(id: number): Stack | undefined;
  markers(device: number): Marker[];
  /**
   * Note [Markers answer cost]: the same markers, shared and not to be changed (no copy of each: 19 k markers at 13 M
   * events); absent where a model has none, then callers use markers().
   */
  markersShared?(device: number): readonly Readonly<Marker>[];
  ooms(): OomInfo[];
  /** memory labels (trace entries' user_metadata: a pickle's, or a capture's REC_USER_METADATA), per device and label */
  userMetadata(): UserMetadataRow[];
  /** allocation lifetimes overlapping [t0Us, t1Us]; at most maxCount, largest first (level of detail) */
  /** owner ≥ 0: only allocations of that owner group (TimelineOwners) */
  spans(device: number, t0Us: number, t1Us: number, maxCount: number, owner?: number): AllocationSpan[];
  /** bytes live by line at two moments (or of two models: pass other) */
  diff(device: number, aUs: number, bUs: number, other?: Model): LineDiff[];
  /** per step (ends ascending): peak inside, allocated/reserved at the end, bytes live per line at each end */
  stepTable(device: number, endsUs: readonly number[]): StepTable;
  /** bytes per category at the peak and at each of `timesUs`; per line at the peak and the last time if withLines */
  categories(device: number, timesUs: readonly number[], withLines?: boolean): CategoryReport;
  summary(): SnapshotSummary;
  /** allocator settings, unknown keys, user metadata, compile contexts and pinned host memory (Note [Snapshot extras]) */
  extras(): SnapshotExtras;
  /** PyTorch snapshot pickle (protocol 4) of the state at `atUs` (default: end) with the trace */
  exportPickle(outPath: string, atUs?: number): void;
  /**
   * What a request and empty_cache() would do at `timeUs` (Infinity = end), answered by the allocator's
   * policy on the simulated device (Note [What-if] in ./whatIf.ts). Throws WhatIfUnavailable when the
   * native reader predates the engine.
   */
  whatIf(device: number, timeUs: number, query?: WhatIfQuery): WhatIfAnswer;
  /**
   * The device's allocation stream replayed under `policy` on a simulated device of `capacityBytes`; `allocConf`:
   * PYTORCH_CUDA_ALLOC_CONF settings for the pytorch policies instead of the data's (a what-if).
   */
  replay(device: number, policy: Policy, capacityBytes?: number, allocConf?: string): ReplayResult;
  close(): void;
  /**
   * Note [First answers] (src/core/base/model/open.ts): compute a panel's first answers for `device` on a worker
   * thread, so the queries that follow do not stall the caller's thread; absent where a model has no worker.
   */
  prefetch?(device: number, maxSpans: number): Promise<void>;
  /** The same for one what-if question with requests only (the summary's verdict), before `whatIf` asks it. */
  prefetchWhatIf?(device: number, timeUs: number, requests: number[]): Promise<void>;
  /** The same for one timeline question (buckets with owners, and the largest bands), before `timeline`/`spans` ask it. */
  prefetchTimeline?(device: number, t0Us: number, t1Us: number, buckets: number, maxSpans: number, owner: number): Promise<void>;
}
