// LiveRun: one run followed live through its session folder — discovers its processes, opens a Model per
// capture, tails them, and reports what changed. No vscode import; the glue (src/glue/runs/liveRuns.ts) drives
// refresh() from a timer. (A capture opened in the snapshot panel is an OpenedCapture, src/core/views/snapshot;
// a session folder's ranks side by side are a RankSet, src/core/views/ranks.)
import * as path from 'node:path';
import { END_WRITER_FAILURE, type Model, type OomInfo } from '../../base/model/types';
import type { LiveRunView } from '../../base/protocol/live';
import { scanSessionFolder, type ProcessEntry } from '../../base/sessionFolder/processes';
import { LiveCategoriesCache } from './categoriesTrack';
import { figuresOf, trackOf } from './view';
import { budgetOf, budgetSentence } from '../../analyses/summary/budget';
import { notRecorded } from '../../analyses/summary/notRecorded';

export type OpenModel = (capturePath: string) => Model;

export interface RunProcess {
  entry: ProcessEntry;
  model?: Model;
  /** why the capture could not be opened yet (shown in the panel when it persists) */
  openError?: string;
  oomsSeen: number;
  /** records read from its capture so far (the sum of Model.poll's answers, Note [Poll counts records]) */
  records: number;
  /** the capture's latest record time at the last refresh: device samples move it, and the device-used line with it */
  lastUs?: number | null;
  /** its capture's writer failure was reported (Note [Writer failure] in native/allocator/src/writer.cc) */
  writerFailureSeen?: boolean;
}

/** A capture the workload's writer had to stop (disk full, file size limit, folder removed). */
export interface WriterFailure {
  process: RunProcess;
  /** the writer's own words: the path, the error and how much was written */
  message: string;
}

/** One line for people: which process, and the writer's message (or a fallback when it gave none). */
export function writerFailureLine(f: WriterFailure): string {
  return `pid ${f.process.entry.pid}: ${f.message || 'the capture stopped early because it could not be written'}`;
}

export interface RefreshResult {
  /** new events were read or processes appeared */
  changed: boolean;
  /** OOMs read for the first time in this refresh */
  newOoms: { process: RunProcess; oom: OomInfo }[];
  /** captures whose end record (reason 1: the writer could not write) was read in this refresh */
  newWriterFailures: WriterFailure[];
}

export interface RunTotals {
  allocatedBytes: number;
  reservedBytes: number;
  processes: number;
}

export class LiveRun {
  readonly name: string;
  /** false once the workload's terminal closed (set by the glue) */
  running = true;
  private readonly procs = new Map<number, RunProcess>();
  /** Note [Live categories] */
  private readonly categories = new LiveCategoriesCache();

  constructor(
    readonly dir: string,
    private readonly openModel: OpenModel,
  ) {
    this.name = path.basename(dir);
  }

  /**
   * Still producing events: its terminal is open and some process has not written REC_END (or none has
   * started yet). A terminal left open after the workload exited ("press Enter to close") is not live.
   */
  isLive(): boolean {
    if (!this.running) return false;
    const procs = this.processes;
    return procs.length === 0 || procs.some((p) => !(p.model?.ended() ?? false));
  }

  get processes(): RunProcess[] {
    return [...this.procs.values()];
  }

  /** Scan for new processes, open captures that appeared, read what was appended. */
  refresh(): RefreshResult {
    const result: RefreshResult = { changed: false, newOoms: [], newWriterFailures: [] };
    for (const entry of scanSessionFolder(this.dir)) {
      const known = this.procs.get(entry.pid);
      if (!known) {
        this.procs.set(entry.pid, { entry, oomsSeen: 0, records: 0 });
        result.changed = true;
      } else if (entry.socket && !known.entry.socket) {
        known.entry = entry; // the proc file arrived after the capture
      }
    }
    for (const p of this.procs.values()) {
      if (!p.model) {
        try {
          p.model = this.openModel(p.entry.capture);
          p.openError = undefined;
          result.changed = true;
        } catch (e) {
          // Expected for a moment after launch: the capture exists but its header is not written yet.
          p.openError = e instanceof Error ? e.message : String(e);
          continue;
        }
      }
      try {
        const added = p.model.poll();
        // A device sample alone is no allocator record (poll leaves it out) but moves the device-used line: a
        // change for the charts, while the categories' generation (records) stays put (Note [Live categories]).
        const lastUs = p.model.fileInfo().lastUs;
        if (added > 0 || lastUs !== p.lastUs) result.changed = true;
        p.records += added;
        p.lastUs = lastUs;
      } catch (e) {
        p.openError = e instanceof Error ? e.message : String(e);
      }
      // Note [Live categories]: a track whose categories answer is stale gets one more update when it is due
      if (this.categories.owes(p.model, p.records)) result.changed = true;
      const ooms = p.model.ooms();
      for (let i = p.oomsSeen; i < ooms.length; i++) result.newOoms.push({ process: p, oom: ooms[i] });
      p.oomsSeen = ooms.length;
      const failure = p.writerFailureSeen ? undefined : writerFailureOf(p);
      if (failure) {
        p.writerFailureSeen = true; // told once per capture
        result.newWriterFailures.push(failure);
        result.changed = true;
      }
    }
    return result;
  }

  /** Sum over every process and device: what the status bar shows. */
  totals(): RunTotals {
    const t: RunTotals = { allocatedBytes: 0, reservedBytes: 0, processes: 0 };
    for (const p of this.procs.values()) {
      if (!p.model) continue;
      t.processes++;
      for (const d of p.model.devices()) {
        const f = figuresOf(p.model, d);
        t.allocatedBytes += f.allocatedBytes;
        t.reservedBytes += f.reservedBytes;
      }
    }
    return t;
  }

  /**
   * Which allocators made this run's numbers (from the capture headers): `pytorch` when
   * PyTorch's own allocator was observed, `lens` for ours; empty until a header says (or for old captures).
   */
  allocatorModes(): ('lens' | 'pytorch')[] {
    const modes = new Set<'lens' | 'pytorch'>();
    for (const p of this.procs.values()) {
      const m = p.model?.header().allocatorMode;
      if (m) modes.add(m);
    }
    return [...modes].sort();
  }

  /** The live panel's view at `buckets` points per chart. */
  view(buckets: number): LiveRunView {
    const tracks = [];
    const problems: string[] = [];
    const missing = new Set<string>();  // Note [Not recorded]: once per run, not per process
    for (const p of this.processes) {
      if (!p.model) {
        if (p.openError) problems.push(`pid ${p.entry.pid}: ${p.openError}`);
        continue;
      }
      for (const pr of p.model.problems()) problems.push(`pid ${p.entry.pid}: ${pr.message} (at byte ${pr.offset})`);
      const failure = writerFailureOf(p);
      if (failure) problems.push(writerFailureLine(failure));
      // Note [Capture budget]: which part of the run is in full detail (times from the process's first event).
      const info = p.model.fileInfo();
      const budget = info.originUs === null ? null : budgetOf(info, (us) => (us - (info.originUs ?? 0)) / 1e6);
      if (budget) problems.push(`pid ${p.entry.pid}: ${budgetSentence(budget)}`);
      for (const sentence of notRecorded(p.model.header())) missing.add(sentence);
      const running = this.running && !p.model.ended();
      for (const d of p.model.devices()) {
        const track = trackOf(p.model, d, { pid: p.entry.pid, rank: p.entry.rank, running }, buckets);
        const categories = this.categories.get(p.model, d, p.records);
        if (categories) track.categories = categories;
        tracks.push(track);
      }
    }
    for (const sentence of missing) problems.push(`Not recorded: ${sentence}`);
    const view: LiveRunView = { name: this.name, running: this.running && tracks.some((t) => t.running), tracks, problems };
    const origin = this.originUs();
    if (origin !== undefined) view.originS = origin / 1e6;
    return view;
  }

  /** The earliest event time (µs since the epoch) over every process and device, if any has one. */
  private originUs(): number | undefined {
    let origin: number | undefined;
    for (const p of this.procs.values()) {
      if (!p.model) continue;
      for (const d of p.model.devices()) {
        const { t0Us, t1Us } = p.model.timeRange(d);
        // the reader answers 0..0 for a device with no event yet
        if (Number.isFinite(t0Us) && t0Us > 0 && t1Us >= t0Us && (origin === undefined || t0Us < origin)) origin = t0Us;
      }
    }
    return origin;
  }

  /** Processes that can take control commands (a socket is known and the capture has not ended). */
  controllable(): RunProcess[] {
    return this.processes.filter((p) => p.entry.socket && !(p.model?.ended() ?? false));
  }

  close(): void {
    for (const p of this.procs.values()) {
      try {
        p.model?.close();
      } catch {
        // closing is best effort; the model owns no resource worth failing a dispose for
      }
      p.model = undefined;
    }
  }
}

/** The writer failure a process's capture ended with, if it did. */
function writerFailureOf(p: RunProcess): WriterFailure | undefined {
  const end = p.model?.endRecord();
  return end && end.reason === END_WRITER_FAILURE ? { process: p, message: end.message } : undefined;
}
