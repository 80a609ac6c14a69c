// RankSet: the captures of a session folder (or several) as the snapshot panel shows them, the ranks side by
// side; answers the webview when the panel is opened on a folder.
//
// Note [Ranks side by side]: a torchrun/SLURM job leaves one capture per rank (issue 16). The panel shows them as
// one view: the rank table of `gpumem summary DIR…` (the same rows and flags as rankTable(): rankRowOf and
// tableOf, so the panel and the CLI never disagree on a peak or a flag) and under it each rank's allocated/reserved
// timeline, all on ONE time axis. The axis is the captures' own clock (µs since the epoch, Note [JSON-safe
// numbers]): ranks of one host share it, and ranks of several hosts are as aligned as their clocks are (NTP:
// milliseconds, well below a training step).
// Each rank's series is min/max-bucketed by the reader (Model.timeline) over the shared window, so a capture of
// any length costs `buckets` numbers per rank (Note [Only what is drawn]); a budgeted capture's compacted ranges
// answer from their restated buckets the same way. A click on a rank posts `openRank`; the glue opens that
// capture in its own snapshot panel (the rank's full tabs), so this view stays a table and one picture.
// The models are opened one at a time, on the reader's worker thread, and closed at once: 64 ranks never hold 64
// open files (Note [Ranks off the host thread]).
import path from 'node:path';
import { openModelAsync } from '../../base/model/open';
import type { RankRowView, RanksView, SnapshotHostMessage, SnapshotWebviewMessage } from '../../base/protocol/snapshot';
import { rankRowOf, tableOf, type RankRow, type RankTable } from '../../analyses/ranks/index';
import { rankTableText } from '../../analyses/ranks/report';

/** One rank's series per pixel column of the panel: the page is ~1,000 px wide, so 600 buckets is plenty. */
export const RANK_BUCKETS = 600;

export interface RankSetOptions {
  title: string;
  /** how a recorded path is shown (the glue makes it workspace-relative); identity by default */
  displayPath?: (file: string) => string;
  buckets?: number;
}

export class RankSet {
  private constructor(
    readonly table: RankTable,
    private readonly built: RanksView,
  ) {}

  /**
   * Reads the captures and builds the view. Note [Ranks off the host thread]: each capture is read by
   * openModelAsync on the reader's worker thread, one rank at a time (two passes: rows and time ranges, then each
   * rank's series on the shared axis), so the extension host answers other work between ranks instead of stalling
   * for the whole folder (64 large ranks took seconds of synchronous reads). One model is open at a time.
   */
  static async open(files: readonly string[], options: RankSetOptions): Promise<RankSet> {
    if (files.length === 0) throw new Error(`${options.title}: no captures (*.gpumem) in it: open a session folder that gpumem run wrote`);
    const display = options.displayPath ?? ((f: string) => f);
    const buckets = options.buckets ?? RANK_BUCKETS;
    // First pass: each rank's row, and its time range on its peak's device (for the shared axis).
    const rows: RankRow[] = [];
    const ranges = new Map<string, { t0Us: number; t1Us: number }>();
    for (const file of files) {
      const m = await openModelAsync(file);
      try {
        const row = rankRowOf(file, m);
        rows.push(row);
        if (row.device !== null) ranges.set(file, m.timeRange(row.device));
      } finally {
        m.close();
      }
    }
    const table = tableOf(rows);
    const known = [...ranges.values()];
    const t0Us = known.length ? Math.min(...known.map((r) => r.t0Us)) : 0;
    const t1Us = known.length ? Math.max(t0Us + 1, ...known.map((r) => r.t1Us)) : 1;
    const ranks: RankRowView[] = [];
    for (const [index, r] of table.ranks.entries()) {
      let allocatedMax: number[] = [];
      let reservedMax: number[] = [];
      const own = ranges.get(r.file) ?? { t0Us: 0, t1Us: 0 };
      if (r.device !== null) {
        const m = await openModelAsync(r.file);
        try {
          const tl = m.timeline(r.device, t0Us, t1Us, buckets);
          allocatedMax = Array.from(tl.allocatedMax);
          reservedMax = Array.from(tl.reservedMax);
        } finally {
          m.close();
        }
        // Before its first event and after its last the rank's process held nothing that it recorded: the reader
        // carries the end state forward, which on a shared axis would draw a finished rank as still holding memory.
        const width = (t1Us - t0Us) / buckets;
        for (let b = 0; b < buckets; b++) {
          const b0 = t0Us + b * width;
          if (b0 + width <= own.t0Us || b0 > own.t1Us) allocatedMax[b] = reservedMax[b] = 0;
        }
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
        problems: r.problems,
        t0Us: own.t0Us,
        t1Us: own.t1Us,
        allocatedMax,
        reservedMax,
      });
    }
    // The sentences under the CLI's table (outliers, OOMs), without the table itself.
    const text = rankTableText(table).split('\n');
    const sentences = text.slice(2 + table.ranks.length).filter((l) => !l.startsWith('note: '));
    const view: RanksView = { title: options.title, medianPeakAllocatedBytes: table.median_peak_allocated_bytes, t0Us, t1Us, buckets, ranks, sentences };
    return new RankSet(table, view);
  }

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
