// openModel(path): one Model per capture or PyTorch snapshot pickle, answered by the native reader
// (native/addon). Every query is one native call returning one JSON document (never one call per event).
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';
import type {
  AllocationSpan,
  BackwardPeak,
  CategoryReport,
  AllocatorState,
  CaptureEnd,
  CaptureHeaderInfo,
  CurrentFigures,
  FileInfo,
  LineDiff,
  LineStat,
  LineStatsOptions,
  Marker,
  Model,
  OomInfo,
  UserMetadataRow,
  PickleOverview,
  ReadProblem,
  SnapshotExtras,
  SnapshotSummary,
  StepTable,
  SourceFormat,
  Stack,
  TimelineBuckets,
} from './types';
import { splitKeeperNotice } from './keeperNotice';
import { headerInfoFromJson } from './header';
import type { Policy, ReplayResult, WhatIfAnswer, WhatIfHandle, WhatIfQuery } from './whatIf';
import { askReplay, askWhatIf } from './whatIf';

/** The native handle (native/addon/src/addon.cpp): JSON strings out, plain numbers in. */
export interface NativeHandle extends WhatIfHandle {
  format(): string;
  header(): string;
  devices(): string;
  problems(): string;
  fileInfo(): string;
  poll(): number;
  ended(): boolean;
  endRecord(): string;
  timeRange(device: number): string;
  current(device: number): string;
  timeline(device: number, t0Us: number, t1Us: number, buckets: number, owners?: boolean): string;
  stateAt(device: number, timeUs: number, events?: number): string;
  /** options: { backwardOnCaller: true } for the backward() caller's grouping (an older reader ignores it) */
  lineStats(device: number, options?: LineStatsOptions): string;
  /** absent in a reader that predates linking backward to forward */
  backwardPeak?(device: number): string;
  stack(id: number): string;
  markers(device: number): string;
  ooms(): string;
  userMetadata(): string;
  spans(device: number, t0Us: number, t1Us: number, maxCount: number, owner?: number): string;
  diff(device: number, aUs: number, bUs: number, other?: NativeHandle): string;
  stepTable(device: number, endsUs: number[]): string;
  categories(device: number, timesUs: number[], withLines: boolean): string;
  summary(): string;
  extras(): string;
  exportPickle(outPath: string, atUs: number): void;
  eventCount(): number;
  /** {decodeNs, deriveNs, decodeCpuNs, deriveCpuNs}: where opening time went (benchmarks) */
  timings(): string;
  close(): void;
  /** Note [Async queries] in native/addon/src/addon.cpp: one of the queries above on a worker thread, same JSON */
  queryAsync?(kind: 'lineStats' | 'markers' | 'summary' | 'spans' | 'timeline' | 'whatIf', device?: number, ...args: (number | boolean)[]): Promise<string>;
}

interface NativeAddon {
  ModelHandle: new (path: string) => NativeHandle;
  /** reads the file on a worker thread (Note [Async open] in native/addon/src/addon.cpp) */
  openAsync(path: string, background?: boolean, fromUs?: number, toUs?: number): Promise<NativeHandle>;
  /**
   * a pickle's overview as JSON, on a worker thread (Note [First view] in native/addon/src/overview.cpp); indexOnly:
   * a capture's from its index, else a rejection (never a pass over the file)
   */
  overviewAsync(path: string, buckets: number, indexOnly?: boolean, t0Us?: number, t1Us?: number): Promise<string>;
  /** a capture's overview from its index alone, on the calling thread; throws when it has none */
  captureIndex(path: string, buckets: number): string;
}

let addon: NativeAddon | undefined;

/**
 * Where the addon lives: dist/native/ beside the bundle (dist/extension.js and dist/cli.js have
 * __dirname = dist/). GPUMEM_ADDON overrides it (unit tests run the TypeScript sources, which have no
 * bundle directory; they point it at the built dist/native/gpumem_addon.node).
 */
export function addonPath(): string {
  if (process.env.GPUMEM_ADDON) return process.env.GPUMEM_ADDON;
  const here = typeof __dirname === 'string' ? __dirname : path.join(process.cwd(), 'dist');
  return path.join(here, 'native', 'gpumem_addon.node');
}

export function loadAddon(): NativeAddon {
  if (addon) return addon;
  const file = addonPath();
  if (!fs.existsSync(file)) {
    throw new Error(`GPU Memory Lens: the native reader is missing (${file}); rebuild it with \`npm run build\` or reinstall the extension`);
  }
  addon = createRequire(file)(file) as NativeAddon;
  return addon;
}

/** Opens a capture (.gpumem) or a PyTorch snapshot pickle; throws an Error that says what to do next. */
export function openModel(file: string): Model {
  const handle = new (loadAddon().ModelHandle)(file);
  return new NativeModel(file, handle);
}

/**
 * Like openModel, but the native reader parses the file on a worker thread: the caller's event loop keeps
 * running meanwhile (the extension host stays responsive while a 10 M-event pickle is read). Rejects with
 * the same actionable Error openModel throws.
 */
export async function openModelAsync(file: string, background = false, window?: TimeWindow): Promise<Model> {
  const handle = window
    ? await loadAddon().openAsync(file, background, Math.floor(window.fromUs), Math.ceil(window.toUs))
    : await loadAddon().openAsync(file, background);
  return new NativeModel(file, handle);
}

/**
 * Note [Range-first open] (native/addon/src/range_open.cpp): a time window of a pickle, [fromUs, toUs] inclusive,
 * in the model's times. Only its events are held; every figure of a moment inside it equals the full open's.
 */
export interface TimeWindow {
  fromUs: number;
  toUs: number;
}

/**
 * Pickles from this size on are not opened whole by the panel: the first view is shown and the user picks a
 * window of it (Note [Range-first open]); the full open of a 3 GB pickle would hold about its size in memory.
 */
export const RANGE_FIRST_MIN_BYTES = 2 * 2 ** 30;

/**
 * Note [First view] (native/addon/src/overview.cpp): a pickle's or capture's allocated and reserved over the whole
 * run as `buckets` min/max buckets with the peaks, read on a worker thread without building the model (a capture's
 * from its index: Note [Capture first view]). Undefined when the file is not one that pass reads (the caller then
 * shows the full model when it comes).
 */
export async function openOverviewAsync(file: string, buckets = OVERVIEW_BUCKETS): Promise<PickleOverview | undefined> {
  try {
    return parse<PickleOverview>(await loadAddon().overviewAsync(file, buckets));
  } catch {
    return undefined;
  }
}

/**
 * Note [Rank row from the index] (native/addon/src/capture_overview.cpp): a capture's overview from its index alone,
 * with `row` when the index carries it, read on a worker thread; undefined when the file is not a capture with an
 * index (a pickle, an older writer's capture, one whose process died), which the caller then opens in full. Costs the
 * same for any size of capture: the header, the file's last 32 bytes and the index.
 */
export async function openCaptureIndexAsync(file: string, buckets: number, window?: { t0Us: number; t1Us: number }): Promise<PickleOverview | undefined> {
  try {
    // buckets 0: the figures without series; window: every device's max series over it (the ranks view's shared
    // axis), 0 outside the device's own range, and empty min series
    const json = window ? await loadAddon().overviewAsync(file, buckets, true, window.t0Us, window.t1Us) : await loadAddon().overviewAsync(file, buckets, true);
    return parse<PickleOverview>(json);
  } catch {
    return undefined;
  }
}

/** The same on the calling thread (the CLI's rank table: a few KiB per capture). */
export function captureIndex(file: string, buckets: number): PickleOverview | undefined {
  try {
    return parse<PickleOverview>(loadAddon().captureIndex(file, buckets));
  } catch {
    return undefined;
  }
}

/** Buckets of the first view: finer than a wide panel's pixels, so the page never shows coarser steps. */
export const OVERVIEW_BUCKETS = 2048;
/**
 * Pickles below this open in about the overview's time (the 55 k-event fixture, 5 MiB: 20 ms), so the full
 * open is not delayed for a first view the user would not see.
 */
export const OVERVIEW_MIN_BYTES = 32 * 2 ** 20;
/** Note [Full open after the first paint]: the longest the full open waits for the overview's paint. */
export const FIRST_PAINT_WAIT_MS = 2000;

/**
 * Opens `file` as the snapshot panel does (Note [First view]): for a big pickle, the overview first (handed to
 * `onOverview` as soon as it is read), then the model. The two run one after the other, never side by side, and the
 * full open after an overview at a lower priority: on a 2-core machine it would slow the first view it follows.
 */
export async function openModelFirstView(
  file: string,
  onOverview: (o: PickleOverview) => void | Promise<unknown>,
  minBytes = OVERVIEW_MIN_BYTES,
): Promise<Model> {
  let size = 0;
  try {
    size = (await fs.promises.stat(file)).size;
  } catch {
    // openModelAsync says what is wrong with the path
  }
  // A capture's overview comes from its index (a few KiB at its end, Note [Capture first view] in
  // native/addon/src/capture_overview.cpp), or a tree-less pass when it has none; a pickle's from a first pass.
  if (size >= minBytes) {
    const overview = await openOverviewAsync(file);
    if (overview && overview.devices.length) {
      // Note [Full open after the first paint]: the full open waits until the overview is painted (onOverview's
      // promise), at most FIRST_PAINT_WAIT_MS: on 2 cores, even at a lower priority, it slowed the page that paints it.
      const shown: unknown = onOverview(overview);
      if (shown instanceof Promise) {
        let timer: ReturnType<typeof setTimeout> | undefined;
        await Promise.race([shown.catch(() => undefined), new Promise((r) => (timer = setTimeout(r, FIRST_PAINT_WAIT_MS)))]);
        clearTimeout(timer);
      }
      // With the overview on screen, the full open runs below the page's priority (OpenWorker in native/addon/src/addon.cpp).
      return openModelAsync(file, true);
    }
  }
  return openModelAsync(file);
}

const parse = <T>(json: string): T => JSON.parse(json) as T;
/** Note [First answers in turns]: the answers key of a what-if question with requests only (undefined: not kept) */
const whatIfKey = (device: number, timeUs: number, q?: WhatIfQuery): string | undefined =>
  q?.policy !== undefined || q?.capacityBytes !== undefined ? undefined : `whatIf:${device}:${timeUs}:${(q?.requests ?? []).join(',')}`;
const endOrNumber = (v: number | null): number => (v === null ? Infinity : v);

class NativeModel implements Model {
  readonly format: SourceFormat;
  private readonly stacks = new Map<number, Stack | undefined>();
  private readonly markerCache = new Map<number, Marker[]>();
  private headerCache: { json: string; info: CaptureHeaderInfo } | undefined;
  /** a pickle's extras never change; a capture's are read again after a poll */
  private extrasCache: SnapshotExtras | undefined;
  private closed = false;
  /** Note [First answers]: JSON answers computed on a worker thread, by query and arguments, until the next poll() */
  private readonly answers = new Map<string, string>();

  constructor(
    readonly path: string,
    readonly handle: NativeHandle,
  ) {
    this.format = handle.format() as SourceFormat;
  }

  header(): CaptureHeaderInfo {
    // A live capture's header may arrive after the first poll: re-parse only when its JSON changed.
    const json = this.handle.header();
    const devices = this.fileInfo().devices;
    const key = json + JSON.stringify(devices);
    if (this.headerCache?.json !== key) this.headerCache = { json: key, info: headerInfoFromJson(json, devices) };
    return this.headerCache.info;
  }
  fileInfo(): FileInfo {
    return parse<FileInfo>(this.handle.fileInfo());
  }
  devices(): number[] {
    return parse<number[]>(this.handle.devices());
  }
  problems(): ReadProblem[] {
    return parse<ReadProblem[]>(this.handle.problems());
  }
  poll(): number {
    this.markerCache.clear();
    this.extrasCache = undefined;
    this.answers.clear();
    return this.handle.poll();
  }
  ended(): boolean {
    return this.handle.ended();
  }
  endRecord(): CaptureEnd | null {
    return parse<CaptureEnd | null>(this.handle.endRecord());
  }
  timeRange(device: number): { t0Us: number; t1Us: number } {
    return parse(this.handle.timeRange(device));
  }
  current(device: number): CurrentFigures {
    return parse<CurrentFigures>(this.handle.current(device));
  }
  timeline(device: number, t0Us: number, t1Us: number, buckets: number, owners = false): TimelineBuckets {
    const json = this.answers.get(`timeline:${device}:${t0Us}:${t1Us}:${buckets}:${owners}`) ?? this.handle.timeline(device, t0Us, t1Us, buckets, owners);
    const tl = parse<TimelineBuckets & { deviceUsedMax?: (number | null)[] }>(json);
    if (tl.deviceUsedMax) tl.deviceUsedMax = tl.deviceUsedMax.map((v) => (v === null ? NaN : v));
    return tl as TimelineBuckets;
  }
  stateAt(device: number, timeUs: number, events?: number): AllocatorState {
    return parse<AllocatorState>(this.handle.stateAt(device, timeUs, events)); // no events: by time (the addon's default)
  }
  lineStats(device: number, options?: LineStatsOptions): LineStat[] {
    // the prefetched answer (Note [First answers]) is the default grouping's
    if (options?.backwardOnCaller) return parse<LineStat[]>(this.handle.lineStats(device, { backwardOnCaller: true }));
    return parse<LineStat[]>(this.answers.get(`lineStats:${device}`) ?? this.handle.lineStats(device));
  }
  backwardPeak(device: number): BackwardPeak | null {
    return this.handle.backwardPeak ? parse<BackwardPeak | null>(this.handle.backwardPeak(device)) : null;
  }
  stack(id: number): Stack | undefined {
    if (!this.stacks.has(id)) this.stacks.set(id, parse<Stack | null>(this.handle.stack(id)) ?? undefined);
    return this.stacks.get(id);
  }
  markers(device: number): Marker[] {
    return this.markersShared(device).map((m) => ({ ...m }));
  }
  markersShared(device: number): readonly Readonly<Marker>[] {
    // Note [Marker cache]: a panel's first paint asks for a device's markers twice (the time base's step
    // detection and the timeline's markers), and a 256 MiB budgeted capture of an hour holds ~23 k step markers:
    // 1.8 MB of JSON, ~0.1 s a read. The parsed markers are kept until the next poll() (the only way a model
    // gains records); markers() gives each caller its own array of its own objects, as before.
    let cached = this.markerCache.get(device);
    if (!cached) {
      // a leak keeper's notice: its sentence is the label, its JSON the detail (Note [Leak keeper])
      cached = parse<Marker[]>(this.answers.get(`markers:${device}`) ?? this.handle.markers(device)).map(splitKeeperNotice);
      this.markerCache.set(device, cached);
    }
    return cached;
  }
  userMetadata(): UserMetadataRow[] {
    return parse<UserMetadataRow[]>(this.handle.userMetadata());
  }

  ooms(): OomInfo[] {
    return parse<OomInfo[]>(this.handle.ooms());
  }
  spans(device: number, t0Us: number, t1Us: number, maxCount: number, owner = -1): AllocationSpan[] {
    const json = this.answers.get(`spans:${device}:${t0Us}:${t1Us}:${maxCount}:${owner}`) ?? this.handle.spans(device, t0Us, t1Us, maxCount, owner);
    const spans = parse<(Omit<AllocationSpan, 'endUs'> & { endUs: number | null })[]>(json);
    return spans.map((s) => ({ ...s, endUs: endOrNumber(s.endUs) }));
  }
  diff(device: number, aUs: number, bUs: number, other?: Model): LineDiff[] {
    const otherHandle = other instanceof NativeModel ? other.handle : undefined;
    if (other && !otherHandle) throw new Error('diff: the other model must come from openModel');
    return parse<LineDiff[]>(this.handle.diff(device, aUs, bUs, otherHandle));
  }
  stepTable(device: number, endsUs: readonly number[]): StepTable {
    return parse<StepTable>(this.handle.stepTable(device, [...endsUs]));
  }
  categories(device: number, timesUs: readonly number[], withLines = false): CategoryReport {
    return parse<CategoryReport>(this.handle.categories(device, [...timesUs], withLines));
  }
  summary(): SnapshotSummary {
    return parse<SnapshotSummary>(this.answers.get('summary') ?? this.handle.summary());
  }
  extras(): SnapshotExtras {
    this.extrasCache ??= parse<SnapshotExtras>(this.handle.extras());
    return this.extrasCache;
  }
  exportPickle(outPath: string, atUs?: number): void {
    this.handle.exportPickle(outPath, atUs ?? Infinity);
  }
  whatIf(device: number, timeUs: number, query?: WhatIfQuery): WhatIfAnswer {
    const key = whatIfKey(device, timeUs, query);
    const prepared = key === undefined ? undefined : this.answers.get(key);
    if (prepared !== undefined) return askWhatIf({ whatIf: () => prepared }, device, timeUs, query);
    return askWhatIf(this.handle, device, timeUs, query);
  }
  async prefetchWhatIf(device: number, timeUs: number, requests: number[]): Promise<void> {
    const ask = this.handle.queryAsync?.bind(this.handle);
    const key = whatIfKey(device, timeUs, { requests });
    if (!ask || this.closed || key === undefined || this.answers.has(key)) return;
    // an addon without the query (older build) rejects: whatIf() then asks on this thread
    const json = await ask('whatIf', device, timeUs, ...requests).catch(() => undefined);
    if (json !== undefined) this.answers.set(key, json);
  }
  replay(device: number, policy: Policy, capacityBytes?: number, allocConf?: string): ReplayResult {
    return askReplay(this.handle, device, policy, capacityBytes, allocConf);
  }
  /**
   * Note [First answers]: a panel's first paint asks a fresh model for its summary, markers, lines and the whole run's
   * timeline with its largest bands: at 13 M events 20-170 ms each, which would stall the extension host once the model
   * arrives. They are computed here first, one after the other on a worker thread (Note [Async queries] in
   * native/addon/src/addon.cpp), and kept by arguments, so the panel's queries find them; the timeline's bucket count
   * is the page's, so that query is warmed (its owner checkpoints, built once) rather than answered. Nothing else may
   * use the model until this resolves.
   */
  async prefetch(device: number, maxSpans: number): Promise<void> {
    const ask = this.handle.queryAsync?.bind(this.handle);
    if (!ask || this.closed) return;
    const { t0Us, t1Us } = this.timeRange(device);
    if (!(t1Us > t0Us)) return;
    this.answers.set('summary', await ask('summary'));
    this.answers.set(`markers:${device}`, await ask('markers', device));
    this.answers.set(`lineStats:${device}`, await ask('lineStats', device));
    this.answers.set(`spans:${device}:${t0Us}:${t1Us}:${maxSpans}:-1`, await ask('spans', device, t0Us, t1Us, maxSpans, -1));
    this.answers.set(`timeline:${device}:${t0Us}:${t1Us}:${OVERVIEW_BUCKETS}:true`, await ask('timeline', device, t0Us, t1Us, OVERVIEW_BUCKETS, true));
  }
  /**
   * Note [First answers]: one timeline question's native answers (min/max buckets with owners, and the largest bands)
   * computed on a worker thread and kept for the synchronous calls that follow with the same arguments (at 10 M
   * events they take 40-70 ms each on the caller's thread). Nothing else may use the model until this resolves.
   */
  async prefetchTimeline(device: number, t0Us: number, t1Us: number, buckets: number, maxSpans: number, owner: number): Promise<void> {
    const ask = this.handle.queryAsync?.bind(this.handle);
    if (!ask || this.closed) return;
    const tl = `timeline:${device}:${t0Us}:${t1Us}:${buckets}:true`;
    const sp = `spans:${device}:${t0Us}:${t1Us}:${maxSpans}:${owner}`;
    if (!this.answers.has(tl)) this.answers.set(tl, await ask('timeline', device, t0Us, t1Us, buckets, true));
    if (!this.answers.has(sp)) this.answers.set(sp, await ask('spans', device, t0Us, t1Us, maxSpans, owner));
  }
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.handle.close();
  }
}
