// The model every view is computed from: one per opened capture or PyTorch snapshot pickle.
// Plain data only (structured-clone safe), so the same objects travel to webviews unchanged.
// No `vscode` import anywhere under src/core.
//
// Units: bytes are numbers (exact up to 2^53, i.e. 8 PiB); times are microseconds since the Unix epoch
// (`timeUs`), matching PyTorch's `time_us`, so captures and pickles share one axis.

export type SourceFormat = 'gpumem-capture' | 'pytorch-pickle';

export interface Frame {
  file: string;
  line: number;
  name: string;
}

/** A call stack, innermost frame first. `backward`: allocated on an autograd thread. */
export interface Stack {
  id: number;
  frames: Frame[];
  backward: boolean;
}

export type BlockState = 'active_allocated' | 'active_pending_free' | 'inactive';

export interface BlockInfo {
  address: number;
  size: number;
  requestedSize: number;
  state: BlockState;
  stackId: number; // 0 = unknown
}

export interface SegmentInfo {
  device: number;
  address: number;
  totalSize: number;
  stream: number;
  pool: 'small' | 'large' | 'private';
  expandable: boolean;
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

export type MarkerKind = 'user' | 'range_begin' | 'range_end' | 'empty_cache' | 'snapshot' | 'oom' | 'notice';

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
  /** allocations counted here that came from autograd threads */
  backwardBytesAtPeak: number;
  /** heaviest stacks through this line, by bytes at peak */
  topStacks: { stackId: number; bytesAtPeak: number; count: number }[];
  /** its owner group on the timeline (TimelineOwners): < lines.length its own, lines.length "other lines"; −1 owns nothing */
  ownerGroup: number;
}

export interface DeviceSummary {
  device: number;
  reserved_bytes: number;
  allocated_bytes: number;
  segments: number;
  blocks: number;
  allocated_blocks: number;
  largest_free_block_bytes: number;
  events: number;
  peak_allocated_bytes: number;
  peak_at_time_us: number;
}

export interface TopLine {
  file: string;
  line: number;
  bytes_at_peak: number;
}

/** `gpumem summary FILE --json` (issue #4 defines every field exactly). */
export interface SnapshotSummary {
  format: SourceFormat;
  devices: DeviceSummary[];
  top_lines: TopLine[];
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
}

export interface CaptureHeaderInfo {
  pid?: number;
  rank?: number;
  worldSize?: number;
  host?: string;
  argv?: string[];
  torchVersion?: string;
  devices: { index: number; name: string; totalBytes: number }[];
}

/** Damage found while reading: everything before `offset` was read. */
export interface ReadProblem {
  offset: number;
  message: string;
}

export interface CurrentFigures {
  allocatedBytes: number;
  reservedBytes: number;
  peakAllocatedBytes: number;
  peakReservedBytes: number;
  /** last NVML sample, if any */
  deviceUsedBytes?: number;
  deviceTotalBytes?: number;
  timeUs: number;
}

/**
 * One opened capture or pickle. Implemented in src/core/model/ on top of the native addon
 * (native/addon); every method returns plain data computed natively and delivered in one batch.
 */
export interface Model {
  readonly format: SourceFormat;
  readonly path: string;
  header(): CaptureHeaderInfo;
  devices(): number[];
  /** damage found so far (truncated tail, unknown record…); empty for a clean file */
  problems(): ReadProblem[];
  /** Live tail: decode bytes appended since the last call. Returns the number of new events. */
  poll(): number;
  /** true once the capture's REC_END was read (the workload exited cleanly) */
  ended(): boolean;
  timeRange(device: number): { t0Us: number; t1Us: number };
  current(device: number): CurrentFigures;
  /** owners: also the owner groups per bucket (TimelineOwners; costs a pass over new events) */
  timeline(device: number, t0Us: number, t1Us: number, buckets: number, owners?: boolean): TimelineBuckets;
  /** allocator state at `timeUs` (Infinity = end of the capture) */
  stateAt(device: number, timeUs: number): AllocatorState;
  /** per-line statistics (DESIGN §3), sorted by selfBytesAtPeak descending */
  lineStats(device: number): LineStat[];
  stack(id: number): Stack | undefined;
  markers(device: number): Marker[];
  ooms(): OomInfo[];
  /** allocation lifetimes overlapping [t0Us, t1Us]; at most maxCount, largest first (level of detail) */
  /** owner ≥ 0: only allocations of that owner group (TimelineOwners) */
  spans(device: number, t0Us: number, t1Us: number, maxCount: number, owner?: number): AllocationSpan[];
  /** bytes live by line at two moments (or of two models: pass other) */
  diff(device: number, aUs: number, bUs: number, other?: Model): LineDiff[];
  summary(): SnapshotSummary;
  /** PyTorch snapshot pickle (protocol 4) of the state at `atUs` (default: end) with the trace */
  exportPickle(outPath: string, atUs?: number): void;
  close(): void;
}
