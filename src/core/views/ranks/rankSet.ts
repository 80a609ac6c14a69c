// RankSet: the captures of a session folder (or several) as the snapshot panel shows them, the ranks side by
// side; answers the webview when the panel is opened on a folder.
//
// Note [Ranks side by side]: a torchrun/SLURM job leaves one capture per rank. The panel shows them as
// one view: the rank table of `gpumem summary DIR…` (the same rows and flags as rankTable(): rankRowOf and
// tableOf, so the panel and the CLI never disagree on a peak or a flag) and under it each rank's allocated/reserved
// timeline, all on ONE time axis. The axis is the captures' own clock (µs since the epoch, Note [JSON-safe
// numbers]): ranks of one host share it, and ranks of several hosts are as aligned as their clocks are (NTP:
// milliseconds, well below a training step).
// Each rank's series is min/max-bucketed by the reader (Model.timeline) over the shared window, so a capture of
// any length costs `buckets` numbers per rank (Note [Only what is drawn]); a budgeted capture's compacted ranges
// answer from their restated buckets the same way. A click on a rank posts `openRank`; the glue opens that
// capture in its own snapshot panel (the rank's full tabs), so this view stays a table and one picture.
// The models are opened a few at a time, in parallel on the reader's worker threads, each once, and closed at once:
// 64 ranks never hold 64 open files (Note [Ranks off the host thread]). The slowest rank and the ranks that ran out
// of memory are marked (Note [Rank marks]).
import path from 'node:path';
import { openCaptureIndexAsync, openModelAsync } from '../../base/model/open';
import type { RankRowView, RanksView, SnapshotHostMessage, SnapshotWebviewMessage } from '../../base/protocol/snapshot';
import { rankRowOf, rankRowOfIndex, tableOf, type RankRow, type RankTable } from '../../analyses/ranks/index';
import { rankTableText } from '../../analyses/ranks/report';
import { formatBytes } from '../../base/units/bytes';

/** One rank's series per pixel column of the panel: the page is ~1,000 px wide, so 600 buckets is plenty. */
export const RANK_BUCKETS = 600;
/** Captures read at once: libuv's pool has 4 threads (UV_THREADPOOL_SIZE), and each open holds one model. */
export const RANK_READS_AT_ONCE = 4;
/** A rank's series is read over its own range this many times finer than the panel's, then put on the shared axis. */
export const RANK_FINE = 4;

/**
 * Note [Rank marks]: besides the peak flags (Note [Rank flags]), two ranks are marked because a user of a stuck or
 * failed job asks for them first: the slowest rank (the longest from its first to its last event; with two ranks or
 * more, the first in rank order of the longest) and every rank that ran out of memory. Their rows carry their peak
 * and their top line at the peak like every row.
 */
export function rankMarks(rows: readonly { ooms: number; device: number | null; t0Us: number; t1Us: number }[]): ('slowest' | 'oom')[][] {
  const marks = rows.map((r) => (r.ooms > 0 ? ['oom' as const] : []) as ('slowest' | 'oom')[]);
  let slowest = -1;
  for (const [i, r] of rows.entries()) {
    if (r.device === null) continue;
    if (slowest < 0 || r.t1Us - r.t0Us > rows[slowest].t1Us - rows[slowest].t0Us) slowest = i;
  }
  if (rows.filter((r) => r.device !== null).length >= 2 && slowest >= 0) marks[slowest].unshift('slowest');
  return marks;
}

/** A rank's fine series over its own range, on the shared axis: each bucket the max of the fine ones it overlaps. */
function onSharedAxis(fine: readonly number[], own: { t0Us: number; t1Us: number }, t0Us: number, t1Us: number, buckets: number): number[] {
  const out = new Array<number>(buckets).fill(0);
  if (fine.length === 0) return out;
  const o1 = Math.max(own.t1Us, own.t0Us + 1);
  const fw = (o1 - own.t0Us) / fine.length;
  const w = (t1Us - t0Us) / buckets;
  for (let b = 0; b < buckets; b++) {
    const b0 = t0Us + b * w;
    const b1 = b0 + w;
    // Before its first event and after its last the rank's process held nothing that it recorded: the reader carries
    // the end state forward, which on a shared axis would draw a finished rank as still holding memory.
    if (b1 <= own.t0Us || b0 > own.t1Us) continue;
    const j0 = Math.max(0, Math.floor((b0 - own.t0Us) / fw));
    const j1 = Math.min(fine.length - 1, Math.max(j0, Math.ceil((b1 - own.t0Us) / fw) - 1));
    let v = 0;
    for (let j = j0; j <= j1; j++) v = Math.max(v, fine[j]);
    out[b] = v;
  }
  return out;
}

function rankName(r: RankRowView): string {
  return r.rank === null ? r.fileName : `rank ${r.rank}`;
}

export interface RankSetOptions {
  title: string;
  /** how a recorded path is shown (the glue makes it workspace-relative); identity by default */
  displayPath?: (file: string) => string;
  buckets?: number;
  /** captures read at once (RANK_READS_AT_ONCE) */
  readsAtOnce?: number;
  /** false: every rank by a full open, never from its index (tests and benchmarks compare the two) */
  useIndex?: boolean;
}

export class RankSet {
  private constructor(
    readonly table: RankTable,
    private readonly built: RanksView,
  ) {}

  /**
   * Reads the captures and builds the view. Note [Ranks off the host thread]: each capture is read by
   * openModelAsync on the reader's worker threads, RANK_READS_AT_ONCE at a time (8 ranks of 1 M events
   * side by side; libuv's pool has 4 threads), each once: its row, its own time range and its series over that range
   * at RANK_FINE × the panel's buckets, then the model is closed. The series are put on the shared axis when every
   * range is known (each shared bucket the max of the fine buckets it overlaps, so every peak stays the rank's peak).
   * The extension host's thread only turns JSON into rows between reads; at most RANK_READS_AT_ONCE models are open.
   * A capture whose index carries the row (Note [Rank row from the index]) is not opened at all: its row, range and
   * series (the index's buckets, resampled on the worker) cost its header, its last 32 bytes and its index.
   */
  static async open(files: readonly string[], options: RankSetOptions): Promise<RankSet> {
    if (files.length === 0) throw new Error(`${options.title}: no captures (*.gpumem) in it: open a session folder that gpumem run wrote`);
    const display = options.displayPath ?? ((f: string) => f);
    const buckets = options.buckets ?? RANK_BUCKETS;
    const fine = buckets * RANK_FINE;
    interface Read {
      row: RankRow;
      own: { t0Us: number; t1Us: number };
      /** a full open's fine series over the rank's own range, or (onAxis) the index's series on the shared axis */
      allocated: number[];
      reserved: number[];
      onAxis?: boolean;
      /** Note [Rank row from the index]: the row came from the capture's index; its series are read once the axis is known */
      indexed?: boolean;
    }
    const reads: Read[] = new Array(files.length);
    let inFlight = 0;
    let mostInFlight = 0;
    const readsAtOnce = options.readsAtOnce ?? RANK_READS_AT_ONCE;
    /** `fn` over `items`, `readsAtOnce` at a time. */
    const pool = async (items: readonly number[], fn: (i: number) => Promise<void>) => {
      let next = 0;
      const worker = async () => {
        while (next < items.length) {
          const i = items[next++];
          inFlight++;
          mostInFlight = Math.max(mostInFlight, inFlight);
          try {
            await fn(i);
          } finally {
            inFlight--;
          }
        }
      };
      await Promise.all(Array.from({ length: Math.min(items.length, readsAtOnce) }, worker));
    };
    /** The rank by a full open: its row, its own range and its series over that range at RANK_FINE × the buckets. */
    const openFully = async (i: number): Promise<Read> => {
      const m = await openModelAsync(files[i]);
      try {
        const row = rankRowOf(files[i], m);
        let own = { t0Us: 0, t1Us: 0 };
        let allocated: number[] = [];
        let reserved: number[] = [];
        if (row.device !== null) {
          own = m.timeRange(row.device);
          const tl = m.timeline(row.device, own.t0Us, Math.max(own.t1Us, own.t0Us + 1), fine);
          allocated = Array.from(tl.allocatedMax);
          reserved = Array.from(tl.reservedMax);
        }
        return { row, own, allocated, reserved };
      } finally {
        m.close();
      }
    };
    const all = files.map((_, i) => i);
    // Note [Rank row from the index]: the row and the rank's range from the capture's index alone (a few KiB);
    // a capture without it is opened in full.
    await pool(all, async (i) => {
      const index = options.useIndex === false ? undefined : await openCaptureIndexAsync(files[i], 0);
      const row = rankRowOfIndex(files[i], index);
      const dev = row && index?.devices.find((d) => d.device === row.device);
      if (row && (row.device === null || dev)) {
        reads[i] = { row, own: dev ? { t0Us: dev.rangeT0Us, t1Us: dev.rangeT1Us } : { t0Us: 0, t1Us: 0 }, allocated: [], reserved: [], indexed: true };
        return;
      }
      reads[i] = await openFully(i);
    });
    const known = reads.filter((r) => r.row.device !== null).map((r) => r.own);
    const t0Us = known.length ? Math.min(...known.map((r) => r.t0Us)) : 0;
    const t1Us = known.length ? Math.max(t0Us + 1, ...known.map((r) => r.t1Us)) : 1;
    // The indexed ranks' series straight on the shared axis, from their indexes' buckets (an envelope of the full
    // open's, Note [Capture first view]); a capture that changed since is opened in full after all.
    await pool(
      all.filter((i) => reads[i].indexed && reads[i].row.device !== null),
      async (i) => {
        const r = reads[i];
        const index = await openCaptureIndexAsync(files[i], buckets, { t0Us, t1Us });
        const dev = index?.devices.find((d) => d.device === r.row.device);
        if (dev && dev.rangeT0Us === r.own.t0Us && dev.rangeT1Us === r.own.t1Us) {
          Object.assign(r, { allocated: dev.allocatedMax, reserved: dev.reservedMax, onAxis: true });
          return;
        }
        const full = await openFully(i);
        Object.assign(r, full, { indexed: false });
      },
    );
    const indexed = reads.filter((r) => r.indexed).length;
    const byFile = new Map(reads.map((r) => [r.row.file, r]));
    const table = tableOf(reads.map((r) => r.row));
    const marks = rankMarks(table.ranks.map((r) => ({ ooms: r.ooms, device: r.device, ...(byFile.get(r.file)?.own ?? { t0Us: 0, t1Us: 0 }) })));
    const ranks: RankRowView[] = [];
    for (const [index, r] of table.ranks.entries()) {
      const read = byFile.get(r.file);
      const own = read?.own ?? { t0Us: 0, t1Us: 0 };
      let allocatedMax: number[] = [];
      let reservedMax: number[] = [];
      if (r.device !== null && read) {
        allocatedMax = read.onAxis ? read.allocated : onSharedAxis(read.allocated, own, t0Us, t1Us, buckets);
        reservedMax = read.onAxis ? read.reserved : onSharedAxis(read.reserved, own, t0Us, t1Us, buckets);
      }
      ranks.push({
        index,
        fileName: path.basename(r.file),
        host: r.host,
        rank: r.rank,
        worldSize: r.world_size,
        pid: r.pid,
        device: r.device,
        deviceName: r.device_name,
        peakAllocatedBytes: r.peak_allocated_bytes,
        peakReservedBytes: r.peak_reserved_bytes,
        ooms: r.ooms,
        topLine: r.top_line ? { file: r.top_line.file, displayFile: display(r.top_line.file), line: r.top_line.line, bytesAtPeak: r.top_line.bytes_at_peak } : null,
        flag: r.flag,
        marks: marks[index],
        problems: r.problems,
        t0Us: own.t0Us,
        t1Us: own.t1Us,
        allocatedMax,
        reservedMax,
      });
    }
    // The sentences under the CLI's table (outliers, OOMs), without the table itself; then the slowest rank's.
    const text = rankTableText(table).split('\n');
    const sentences = text.slice(2 + table.ranks.length).filter((l) => !l.startsWith('note: '));
    const slow = ranks.find((r) => r.marks.includes('slowest'));
    if (slow) {
      const where = slow.topLine ? `; top line at its peak ${slow.topLine.displayFile}:${slow.topLine.line}` : '';
      sentences.push(`Slowest: ${rankName(slow)}, ${((slow.t1Us - slow.t0Us) / 1e6).toFixed(2)} s from its first to its last event; peak allocated ${formatBytes(slow.peakAllocatedBytes)}${where}.`);
    }
    const view: RanksView = { title: options.title, medianPeakAllocatedBytes: table.median_peak_allocated_bytes, t0Us, t1Us, buckets, ranks, sentences };
    const set = new RankSet(table, view);
    set.readsAtOnceSeen = mostInFlight;
    set.fromIndex = indexed;
    return set;
  }

  /** the most captures that were being read at one time (Note [Ranks off the host thread]) */
  readsAtOnceSeen = 0;
  /** the ranks whose row came from their capture's index (Note [Rank row from the index]), not a full open */
  fromIndex = 0;

  /** The capture the rank row `index` came from (for the glue's openRank). */
  file(index: number): string | undefined {
    return this.table.ranks[index]?.file;
  }

  view(): RanksView {
    return this.built;
  }

  /** The answer to a (checked) webview message; undefined for what the glue handles (openRank, goToSource…). */
  handle(msg: SnapshotWebviewMessage): SnapshotHostMessage[] | undefined {
    if (msg.type === 'ready') return [{ type: 'ranks', view: this.view() }];
    return undefined;
  }
}
