// The running (and recently finished) runs of this window: one LiveRun per launch, each tied to
// its terminal. Polls captures on a timer and tells listeners when something changed; the listeners
// (panel, status bar, annotations) throttle themselves.
import * as vscode from 'vscode';
import type { OomInfo } from '../../core/base/model/types';
import { LiveRun, type OpenModel, type RunProcess, type WriterFailure } from '../../core/views/live';

export interface TrackedRun {
  run: LiveRun;
  terminal?: vscode.Terminal;
  /** what the user launched, for pickers: "train.py" */
  label: string;
  /** the script the run came from, where it was a file: the live panel opens beside its editor */
  script?: vscode.Uri;
}

export interface WriterFailureEvent extends WriterFailure {
  tracked: TrackedRun;
}

export interface OomEvent {
  tracked: TrackedRun;
  process: RunProcess;
  oom: OomInfo;
}

// Note [Poll period]: 100 ms keeps the figures a user watches within a frame or two of the workload
// while costing one read() per capture when nothing was appended. Views throttle on top of it.
const POLL_MS = 100;

export class LiveRuns implements vscode.Disposable {
  private readonly runs: TrackedRun[] = [];
  private focusedRun: TrackedRun | undefined;
  private readonly timer: ReturnType<typeof setInterval>;
  private readonly changed = new vscode.EventEmitter<void>();
  private readonly oom = new vscode.EventEmitter<OomEvent>();
  private readonly writerFailure = new vscode.EventEmitter<WriterFailureEvent>();
  private readonly disposables: vscode.Disposable[] = [];
  readonly onDidChange = this.changed.event;
  readonly onDidOom = this.oom.event;
  /** once per capture whose writer had to stop (disk full, file size limit, folder removed) */
  readonly onDidWriterFailure = this.writerFailure.event;

  constructor(private readonly openModel: OpenModel) {
    this.timer = setInterval(() => this.tick(), POLL_MS);
    this.disposables.push(
      this.changed,
      this.oom,
      this.writerFailure,
      vscode.window.onDidCloseTerminal((t) => {
        const tracked = this.runs.find((s) => s.terminal === t);
        if (!tracked) return;
        tracked.terminal = undefined;
        tracked.run.running = false;
        this.tick(); // read the tail the workload wrote while exiting
        this.changed.fire();
      }),
      // Several runs: the one whose terminal the user looks at is the one the panel and status bar follow.
      vscode.window.onDidChangeActiveTerminal((t) => {
        const tracked = t && this.runs.find((s) => s.terminal === t);
        if (tracked && tracked !== this.focusedRun) this.focus(tracked);
      }),
    );
  }

  get all(): readonly TrackedRun[] {
    return this.runs;
  }

  /** The run the status bar and the live panel follow: the latest launched, or the one picked. */
  get focused(): TrackedRun | undefined {
    return this.focusedRun;
  }

  focus(tracked: TrackedRun): void {
    this.focusedRun = tracked;
    this.changed.fire();
  }

  /** A run tied to its terminal, or (live) to a process the caller ends with finish(): the notebook kernel. */
  add(dir: string, label: string, terminal?: vscode.Terminal, live = terminal !== undefined): TrackedRun {
    const tracked: TrackedRun = { run: new LiveRun(dir, this.openModel), terminal, label };
    if (!live) tracked.run.running = false;
    this.runs.push(tracked);
    this.focusedRun = tracked;
    this.tick();
    this.changed.fire();
    return tracked;
  }

  /** The process behind a run added without a terminal has ended: read its tail, it is no longer live. */
  finish(tracked: TrackedRun): void {
    if (!tracked.run.running) return;
    tracked.run.running = false;
    this.tick();
    this.changed.fire();
  }

  running(): TrackedRun[] {
    return this.runs.filter((s) => s.run.isLive());
  }

  private tick(): void {
    let any = false;
    for (const tracked of this.runs) {
      // Every capture of a finished run read to its REC_END: nothing more can arrive.
      const procs = tracked.run.processes;
      if (!tracked.run.running && procs.length > 0 && procs.every((p) => p.model?.ended())) continue;
      const r = tracked.run.refresh();
      any ||= r.changed;
      for (const { process, oom } of r.newOoms) this.oom.fire({ tracked, process, oom });
      for (const f of r.newWriterFailures) this.writerFailure.fire({ tracked, ...f });
    }
    if (any) this.changed.fire();
  }

  dispose(): void {
    clearInterval(this.timer);
    for (const s of this.runs) s.run.close();
    for (const d of this.disposables) d.dispose();
  }
}
