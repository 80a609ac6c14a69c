// The "GPU Memory Lens" notebook kernel: a NotebookController over VS Code's built-in .ipynb support that runs
// cells in `python3 -m gpumem._kernel` under the tool (src/core/base/kernel), one kernel process per notebook.
// Each kernel is a tracked run (a session folder, a capture, a control socket), so the live panel, the status bar,
// the annotations, Empty Cache and Capture Snapshot follow it as they follow a script; each executed cell gets a
// status-bar item with its figures (src/core/views/notebook).
import * as path from 'node:path';
import * as vscode from 'vscode';
import { buildCommand, expandLaunchTemplate } from '../../core/base/launch';
import { KernelProcess, type DoneReply } from '../../core/base/kernel/process';
import type { CellFigures } from '../../core/base/kernel/protocol';
import { formatBytes } from '../../core/base/units/bytes';
import { CellFiles, cellStatusText, cellTooltip, lineLabel } from '../../core/views/notebook/cellFigures';
import { resolvePython, trackedSession } from '../runs/launcher';
import type { LiveRuns, TrackedRun } from '../runs/liveRuns';

export const KERNEL_ID = 'gpuMemoryLens.kernel';
export const REVEAL_CELL_LINE = 'gpuMemoryLens.revealCellLine';
export const SHOW_CELL_LINES = 'gpuMemoryLens.showCellLines';
const NOTEBOOK_TYPES = ['jupyter-notebook'];

interface KernelSession {
  proc: KernelProcess;
  tracked: TrackedRun;
  dir: string;
  seq: number;
}

/** A cell's figures as the status bar shows them, with the notebook's file map that names its lines. */
interface CellResult {
  figures: CellFigures;
  files: CellFiles;
}

export class GpuMemoryKernel implements vscode.Disposable {
  private readonly controllers: vscode.NotebookController[] = [];
  private readonly sessions = new Map<string, KernelSession>();
  private readonly starting = new Map<string, Promise<KernelSession>>();
  /** per notebook: the cell file of each execution (Note [Cell files]) */
  private readonly files = new Map<string, CellFiles>();
  /** per cell document URI: its latest figures */
  private readonly results = new Map<string, CellResult>();
  private readonly statusChanged = new vscode.EventEmitter<void>();
  private readonly log = vscode.window.createOutputChannel('GPU Memory Lens Kernel');
  private readonly disposables: vscode.Disposable[] = [];

  constructor(
    private readonly extensionRoot: string,
    private readonly runs: LiveRuns,
  ) {
    for (const type of NOTEBOOK_TYPES) {
      const c = vscode.notebooks.createNotebookController(KERNEL_ID, type, 'GPU Memory Lens (Python)');
      c.description = 'Python under GPU memory tracking';
      c.detail = 'Each cell shows its peak allocated above what was live at its start, and what it added to allocated and reserved.';
      c.supportedLanguages = ['python'];
      c.supportsExecutionOrder = true;
      c.executeHandler = (cells, nb, ctl) => this.executeAll(cells, nb, ctl);
      c.interruptHandler = (nb) => this.sessions.get(nb.uri.toString())?.proc.interrupt();
      this.controllers.push(c);
    }
    this.disposables.push(
      ...this.controllers,
      this.statusChanged,
      this.log,
      vscode.notebooks.registerNotebookCellStatusBarItemProvider('jupyter-notebook', {
        onDidChangeCellStatusBarItems: this.statusChanged.event,
        provideCellStatusBarItems: (cell) => this.statusItems(cell),
      }),
      vscode.workspace.onDidCloseNotebookDocument((nb) => void this.shutdown(nb.uri.toString())),
      vscode.commands.registerCommand('gpuMemoryLens.restartKernel', () => this.restart()),
      vscode.commands.registerCommand(REVEAL_CELL_LINE, (cellUri: unknown, line: unknown) => revealCellLine(cellUri, line)),
      vscode.commands.registerCommand(SHOW_CELL_LINES, (cellUri: unknown) => this.pickLine(cellUri)),
    );
  }

  // ---- the cell status bar ---------------------------------------------------------------------------------
  private statusItems(cell: vscode.NotebookCell): vscode.NotebookCellStatusBarItem[] {
    const r = this.results.get(cell.document.uri.toString());
    if (!r) return [];
    const item = new vscode.NotebookCellStatusBarItem(cellStatusText(r.figures), vscode.NotebookCellStatusBarAlignment.Left);
    item.tooltip = cellTooltip(r.figures, r.files);
    item.priority = 100;
    // Note [Cell lines link]: a cell status item's tooltip is plain text in VS Code's API, so the links to the cell's
    // lines are a click away: the item opens a pick of the top lines, and each reveals its cell and line
    // (gpuMemoryLens.revealCellLine, which the annotations' frame links use too).
    if (r.figures.lines.length > 0) item.command = { title: 'Go to a top line', command: SHOW_CELL_LINES, arguments: [cell.document.uri.toString()] };
    return [item];
  }

  private async pickLine(cellUri: unknown): Promise<void> {
    const r = typeof cellUri === 'string' ? this.results.get(cellUri) : undefined;
    if (!r) return;
    const picks = r.figures.lines.map((l) => ({ label: lineLabel(l, r.files), description: `${formatBytes(l.bytes)}${l.function && l.function !== '<module>' ? ` in ${l.function}` : ''}`, l }));
    const pick = await vscode.window.showQuickPick(picks, { title: 'Top lines at the cell’s peak (its own allocations)' });
    if (!pick) return;
    const cell = r.files.cellOf(pick.l.file);
    if (cell) await revealCellLine(cell.cell, pick.l.line);
    else await vscode.commands.executeCommand('gpuMemoryLens.openFrame', pick.l.file, pick.l.line);
  }

  /** The frame path of a cell document's latest execution (the annotations paint cells with it). */
  framePathOf(doc: vscode.TextDocument): string | undefined {
    if (doc.uri.scheme !== 'vscode-notebook-cell') return undefined;
    const nbKey = doc.uri.with({ scheme: 'file', fragment: '' }).toString();
    return this.files.get(nbKey)?.latestFile(doc.uri.toString());
  }

  /** The cell (document URI) a frame's file was compiled from, if it is a cell file. */
  cellOfFile(file: string): string | undefined {
    for (const f of this.files.values()) {
      const c = f.cellOf(file);
      if (c) return c.cell;
    }
    return undefined;
  }

  // ---- running cells ----------------------------------------------------------------------------------------
  private async executeAll(cells: vscode.NotebookCell[], nb: vscode.NotebookDocument, ctl: vscode.NotebookController): Promise<void> {
    for (const cell of cells) {
      if (!(await this.executeOne(cell, nb, ctl))) break; // like Jupyter: a failed cell stops "run all"
    }
  }

  private async executeOne(cell: vscode.NotebookCell, nb: vscode.NotebookDocument, ctl: vscode.NotebookController): Promise<boolean> {
    const exec = ctl.createNotebookCellExecution(cell);
    exec.start(Date.now());
    await exec.clearOutput();
    let session: KernelSession;
    try {
      session = await this.session(nb);
    } catch (e) {
      await exec.appendOutput(new vscode.NotebookCellOutput([vscode.NotebookCellOutputItem.error(e as Error)]));
      exec.end(false, Date.now());
      return false;
    }
    const files = this.filesOf(nb);
    const file = path.join(session.dir, 'cells', `cell-${++session.seq}.py`);
    files.add(file, cell.document.uri.toString());
    let last: { name: string; output: vscode.NotebookCellOutput } | undefined;
    const append = (name: string, item: vscode.NotebookCellOutputItem): void => {
      if (last && last.name === name && name !== 'result' && name !== 'error') {
        void exec.appendOutputItems(item, last.output);
        return;
      }
      last = { name, output: new vscode.NotebookCellOutput([item]) };
      void exec.appendOutput(last.output);
    };
    let done: DoneReply | undefined;
    try {
      done = await session.proc.execute(cell.document.getText(), file, {
        stream: (name, text) => append(name, name === 'stdout' ? vscode.NotebookCellOutputItem.stdout(text) : vscode.NotebookCellOutputItem.stderr(text)),
        result: (text) => append('result', vscode.NotebookCellOutputItem.text(text, 'text/plain')),
        error: (ename, evalue, tb) => append('error', vscode.NotebookCellOutputItem.error({ name: ename, message: evalue, stack: tb.join('\n') })),
      });
    } catch (e) {
      append('error', vscode.NotebookCellOutputItem.error({ name: 'KernelDied', message: `${(e as Error).message}. Run the cell again to start a new kernel (a new capture).` }));
    }
    if (done) {
      exec.executionOrder = done.execution_count;
      files.setCount(file, done.execution_count);
      if (done.figures) this.results.set(cell.document.uri.toString(), { figures: done.figures, files });
      this.statusChanged.fire();
    }
    exec.end(done?.ok ?? false, Date.now());
    return done?.ok ?? false;
  }

  private filesOf(nb: vscode.NotebookDocument): CellFiles {
    const key = nb.uri.toString();
    let f = this.files.get(key);
    if (!f) this.files.set(key, (f = new CellFiles()));
    return f;
  }

  private session(nb: vscode.NotebookDocument): Promise<KernelSession> {
    const key = nb.uri.toString();
    const live = this.sessions.get(key);
    if (live?.proc.alive) return Promise.resolve(live);
    let p = this.starting.get(key);
    if (!p) {
      p = this.start(nb).finally(() => this.starting.delete(key));
      this.starting.set(key, p);
    }
    return p;
  }

  /** A new kernel process for `nb`: a new session folder, so a new capture (Note [Kernel restarts]). */
  private async start(nb: vscode.NotebookDocument): Promise<KernelSession> {
    if (!vscode.workspace.isTrusted) {
      throw new Error('The GPU Memory Lens kernel runs code from this folder, which is in Restricted Mode. Trust the workspace (Manage Workspace Trust) to start it.');
    }
    const key = nb.uri.toString();
    const python = await resolvePython(nb.uri);
    const nbPath = nb.uri.scheme === 'file' ? nb.uri.fsPath : '';
    const folder = vscode.workspace.getWorkspaceFolder(nb.uri) ?? vscode.workspace.workspaceFolders?.[0];
    const cwd = nbPath ? path.dirname(nbPath) : (folder?.uri.fsPath ?? process.cwd());
    const template = vscode.workspace.getConfiguration('gpuMemoryLens').get<string>('kernel.command', '').trim();
    const cmd = template ? expandLaunchTemplate(template, { file: nbPath, python }) : buildCommand(python, { kind: 'module', name: 'gpumem._kernel' });
    const label = nbPath ? path.basename(nbPath) : 'notebook';
    const { sessionFolder, env } = trackedSession(this.extensionRoot, nb.uri, label, [cmd.file, ...cmd.args], cwd);
    const tracked = this.runs.add(sessionFolder.dir, `${label} (kernel)`, undefined, true);
    this.log.appendLine(`[${new Date().toISOString()}] starting the kernel of ${label}: ${[cmd.file, ...cmd.args].join(' ')} (session ${sessionFolder.dir})`);
    const proc = new KernelProcess(
      { ...cmd, cwd, env },
      {
        log: (text) => this.log.append(text),
        exit: (code, signal) => {
          this.log.appendLine(`[${new Date().toISOString()}] the kernel of ${label} ended (${signal ?? `code ${code}`})`);
          this.runs.finish(tracked);
        },
      },
    );
    const session: KernelSession = { proc, tracked, dir: sessionFolder.dir, seq: 0 };
    this.sessions.set(key, session);
    const ready = await Promise.race([
      proc.ready,
      new Promise<never>((_res, rej) => setTimeout(() => rej(new Error('the kernel did not start within 60 s (see the "GPU Memory Lens Kernel" output)')), 60_000)),
    ]);
    this.log.appendLine(`kernel pid ${ready.pid}, Python ${ready.python}, cells run by ${ready.shell === 'ipython' ? 'IPython' : 'exec (IPython is not installed)'}`);
    return session;
  }

  /**
   * Note [Kernel restarts]: Restart Kernel ends the notebook's kernel process (its capture ends with its clean
   * REC_END) and forgets the cells' figures; the next cell starts a new process in a new session folder, so a new
   * capture, as a script's second run is a new run. The previous capture stays in its folder.
   */
  async restart(): Promise<void> {
    const nb = vscode.window.activeNotebookEditor?.notebook;
    const key = nb?.uri.toString() ?? [...this.sessions.keys()].at(-1);
    if (!key || !this.sessions.has(key)) {
      void vscode.window.showInformationMessage('GPU Memory Lens: no GPU Memory Lens kernel is running for this notebook.');
      return;
    }
    await this.shutdown(key);
    vscode.window.setStatusBarMessage('GPU Memory Lens: kernel restarted; the next cell starts a new capture', 4000);
  }

  private async shutdown(key: string): Promise<void> {
    const s = this.sessions.get(key);
    if (!s) return;
    this.sessions.delete(key);
    await s.proc.shutdown();
    this.runs.finish(s.tracked);
    const files = this.files.get(key);
    if (files) {
      for (const cellUri of [...this.results.keys()]) if (this.results.get(cellUri)!.files === files) this.results.delete(cellUri);
      files.clear();
    }
    this.statusChanged.fire();
  }

  dispose(): void {
    for (const key of [...this.sessions.keys()]) void this.shutdown(key);
    for (const d of this.disposables) d.dispose();
  }
}

/** Reveals a cell (by its document URI) in its notebook and selects one of its lines (1-based). */
export async function revealCellLine(cellUri: unknown, line: unknown): Promise<void> {
  if (typeof cellUri !== 'string' || typeof line !== 'number') return;
  for (const nb of vscode.workspace.notebookDocuments) {
    const cell = nb.getCells().find((c) => c.document.uri.toString() === cellUri);
    if (!cell) continue;
    await vscode.window.showNotebookDocument(nb, { selections: [new vscode.NotebookRange(cell.index, cell.index + 1)], preserveFocus: false });
    const pos = new vscode.Position(Math.max(0, Math.min(line - 1, cell.document.lineCount - 1)), 0);
    await vscode.window.showTextDocument(cell.document, { selection: new vscode.Range(pos, pos) });
    return;
  }
  void vscode.window.showWarningMessage('GPU Memory Lens: that cell is no longer open.');
}
