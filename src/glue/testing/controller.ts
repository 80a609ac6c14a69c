// The Testing view's "GPU Memory budgets": pytest tests with a gpu_memory marker, run under the tool, each passed
// or failed with the plugin's message and a link that opens the capture.
/**
 * Note [Testing view]:
 * - Discovery is a scan of the workspace's test files' text (findBudgetTests in src/core/views/testing), not
 *   `pytest --collect-only`: no Python runs to list tests (fast, works in Restricted Mode, no environment needed),
 *   and the view follows edits as the file changes. What it cannot see (a marker set through `pytestmark`) still
 *   runs when its file is run.
 * - A run is one `python -m pytest -p gpumem <ids>` per workspace folder, in a session folder made by
 *   trackedSession (the environment of Run Python File with Memory Tracking), so the plugin uses that run's capture
 *   and writes its rows there. The verdicts come from the rows (the "result" row is pytest's own outcome and
 *   failure text, Note [pytest budgets]), not from parsing pytest's output, which goes to the run's output as is.
 * - Each test's figures (its own peak, what was live at its start, what it left) are one line of the run's output
 *   under that test, passed tests included (verdictLine); a failed test's message gives them too.
 * - A failed test's message is Markdown trusted for two commands only: the frame link of each line at the peak
 *   (gpuMemoryLens.openFrame) and "Open capture" (gpuMemoryLens.openTestCapture → the snapshot panel). Its location
 *   is the test's `def` line.
 * - A line's file is the workload's real path; under the folder it is named as the workspace names it (a folder
 *   reached through a symbolic link would otherwise show, and open, the link's target), relative in the text.
 * - An error before pytest starts (no interpreter, a wrong setting) errors each test with its message.
 * - Untrusted workspaces list the tests but cannot run them: running executes the workspace's code.
 * - The extension activates on a workspace that has test files (workspaceContains in package.json): VS Code has no
 *   activation event for the Testing view, which shows no controller (and no view at all) until one is created.
 * - test/e2e/testing.test.mjs runs it in a real VS Code: Run Tests in the view, the verdicts, the message's figures
 *   against the capture, a line link and Open capture.
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { findBudgetTests, isRunOf, OPEN_CAPTURE_COMMAND, parseRows, verdictLine, verdictMarkdown, verdicts, type TestVerdict } from '../../core/views/testing';
import { OPEN_FRAME_COMMAND } from '../../core/views/annotations';
import { resolvePython, trackedSession } from '../runs/launcher';

const TEST_GLOB = '**/{test_*.py,*_test.py}';
const EXCLUDE = '**/{node_modules,.venv,venv,.git,.gpumem,site-packages}/**';

interface Entry {
  file: vscode.Uri;
  name: string; // id inside the file: test_x, TestA::test_x
}

export class BudgetTests implements vscode.Disposable {
  private readonly controller = vscode.tests.createTestController('gpuMemoryLens.budgets', 'GPU Memory budgets');
  private readonly entries = new WeakMap<vscode.TestItem, Entry>();
  private readonly disposables: vscode.Disposable[] = [];

  /** @param onVerdicts  called after a run whose tests got verdicts (Note [Walkthrough progress]) */
  constructor(
    private readonly extensionRoot: string,
    private readonly onVerdicts: () => void = () => {},
  ) {
    this.controller.resolveHandler = async (item) => {
      if (!item) await this.discoverAll();
    };
    this.controller.refreshHandler = () => this.discoverAll();
    this.disposables.push(
      this.controller,
      this.controller.createRunProfile('Run with GPU memory tracking', vscode.TestRunProfileKind.Run, (req, token) => this.run(req, token), true),
      vscode.commands.registerCommand(OPEN_CAPTURE_COMMAND, async (capture: unknown) => {
        if (typeof capture !== 'string') return;
        if (!fs.existsSync(capture)) {
          void vscode.window.showWarningMessage(`GPU Memory Lens: the capture ${capture} is gone.`);
          return;
        }
        await vscode.commands.executeCommand('gpuMemoryLens.openSnapshot', vscode.Uri.file(capture));
      }),
    );
    const watcher = vscode.workspace.createFileSystemWatcher(TEST_GLOB);
    this.disposables.push(
      watcher,
      watcher.onDidCreate((u) => void this.discoverFile(u)),
      watcher.onDidChange((u) => void this.discoverFile(u)),
      watcher.onDidDelete((u) => this.controller.items.delete(u.toString())),
    );
  }

  dispose(): void {
    for (const d of this.disposables.splice(0)) d.dispose();
  }

  private async discoverAll(): Promise<void> {
    const files = await vscode.workspace.findFiles(TEST_GLOB, EXCLUDE, 2000);
    await Promise.all(files.map((f) => this.discoverFile(f)));
  }

  private async discoverFile(file: vscode.Uri): Promise<void> {
    let text: string;
    try {
      text = new TextDecoder().decode(await vscode.workspace.fs.readFile(file));
    } catch {
      this.controller.items.delete(file.toString());
      return;
    }
    const tests = findBudgetTests(text);
    if (!tests.length) {
      this.controller.items.delete(file.toString());
      return;
    }
    const fileItem = this.controller.createTestItem(file.toString(), vscode.workspace.asRelativePath(file), file);
    this.entries.set(fileItem, { file, name: '' });
    fileItem.children.replace(
      tests.map((t) => {
        const item = this.controller.createTestItem(`${file.toString()}::${t.name}`, t.name, file);
        item.range = new vscode.Range(t.line - 1, 0, t.line - 1, 0);
        this.entries.set(item, { file, name: t.name });
        return item;
      }),
    );
    this.controller.items.add(fileItem);
  }

  /** The leaf tests a request names (a file item stands for its tests), minus the excluded ones. */
  private leaves(req: vscode.TestRunRequest): vscode.TestItem[] {
    const roots: vscode.TestItem[] = [];
    if (req.include) roots.push(...req.include);
    else this.controller.items.forEach((i) => roots.push(i));
    const out: vscode.TestItem[] = [];
    const walk = (i: vscode.TestItem) => {
      if (req.exclude?.includes(i)) return;
      if (i.children.size === 0) out.push(i);
      else i.children.forEach(walk);
    };
    roots.forEach(walk);
    return out.filter((i) => this.entries.get(i)?.name);
  }

  private async run(req: vscode.TestRunRequest, token: vscode.CancellationToken): Promise<void> {
    const run = this.controller.createTestRun(req);
    try {
      if (!vscode.workspace.isTrusted) {
        run.appendOutput('GPU Memory Lens: running tests executes code from this folder, which is in Restricted Mode. Trust the workspace to run them.\r\n');
        return;
      }
      const byFolder = new Map<vscode.WorkspaceFolder, vscode.TestItem[]>();
      for (const item of this.leaves(req)) {
        const folder = vscode.workspace.getWorkspaceFolder(item.uri!);
        if (!folder) continue;
        byFolder.set(folder, [...(byFolder.get(folder) ?? []), item]);
      }
      for (const [folder, items] of byFolder) {
        if (token.isCancellationRequested) break;
        try {
          await this.runFolder(run, folder, items, token);
        } catch (e) {
          // No interpreter, an unwritable session root, a wrong setting: each test says why it did not run (in
          // the output alone, the tests would stay "not yet run" with nothing on them).
          const message = `GPU Memory Lens: ${(e as Error).message}`;
          run.appendOutput(message + '\r\n');
          items.forEach((i) => run.errored(i, new vscode.TestMessage(message)));
        }
      }
    } finally {
      run.end();
    }
  }

  private async runFolder(run: vscode.TestRun, folder: vscode.WorkspaceFolder, items: vscode.TestItem[], token: vscode.CancellationToken): Promise<void> {
    const cwd = folder.uri.fsPath;
    const rel = (item: vscode.TestItem) => path.relative(cwd, this.entries.get(item)!.file.fsPath).split(path.sep).join('/');
    const ids = items.map((i) => `${rel(i)}::${this.entries.get(i)!.name}`);
    const python = await resolvePython(folder.uri);
    const command = [python, '-m', 'pytest', '-p', 'gpumem', ...ids];
    const { sessionFolder, env } = trackedSession(this.extensionRoot, folder.uri, 'pytest', command, cwd);
    items.forEach((i) => run.started(i));
    run.appendOutput(`$ ${command.join(' ')}\r\n`);
    const code = await new Promise<number | null>((resolve) => {
      const child = spawn(command[0], command.slice(1), { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
      const out = (b: Buffer) => run.appendOutput(b.toString().replace(/\r?\n/g, '\r\n'));
      child.stdout.on('data', out);
      child.stderr.on('data', out);
      const cancel = token.onCancellationRequested(() => child.kill('SIGINT'));
      child.on('error', (e) => {
        run.appendOutput(`GPU Memory Lens: could not start ${python}: ${e.message}\r\n`);
        cancel.dispose();
        resolve(null);
      });
      child.on('close', (c) => {
        cancel.dispose();
        resolve(c);
      });
    });
    const rows = fs
      .readdirSync(sessionFolder.dir)
      .filter((f) => f.startsWith('pytest-') && f.endsWith('.jsonl'))
      .flatMap((f) => parseRows(fs.readFileSync(path.join(sessionFolder.dir, f), 'utf8')));
    const results = verdicts(rows);
    if (results.length > 0) this.onVerdicts();
    for (const item of items) {
      const mine = results.filter((v) => isRunOf(v.nodeid, rel(item), this.entries.get(item)!.name));
      if (!mine.length) {
        if (token.isCancellationRequested) run.skipped(item);
        else run.errored(item, new vscode.TestMessage(`No result from pytest (exit code ${code}); see the output.`));
        continue;
      }
      report(run, item, mine, folderPaths(cwd));
    }
  }
}

/**
 * A workspace folder's path as the editor names it and as the workload's frames name it: Python records a file's
 * real path (symbolic links resolved), so a folder reached through a link (a home folder on another disk, a
 * checkout linked into place) has frames under another prefix than its documents.
 */
function folderPaths(cwd: string): { cwd: string; real: string } {
  try {
    return { cwd, real: fs.realpathSync(cwd) };
  } catch {
    return { cwd, real: cwd };
  }
}

/** A frame's file as the workspace names it: under the folder (by either path) → under the folder's own path. */
function inFolder(file: string, { cwd, real }: { cwd: string; real: string }): string {
  if (!path.isAbsolute(file)) return file;
  for (const root of [cwd, real]) {
    const rel = path.relative(root, file);
    if (!rel.startsWith('..') && !path.isAbsolute(rel)) return path.join(cwd, rel);
  }
  return file;
}

function report(run: vscode.TestRun, item: vscode.TestItem, mine: TestVerdict[], folder: { cwd: string; real: string }): void {
  for (const v of mine) {
    const line = verdictLine(v);
    if (line) run.appendOutput(line + '\r\n', undefined, item);
  }
  const failed = mine.filter((v) => v.outcome === 'failed' || v.outcome === 'crashed');
  if (!failed.length) {
    if (mine.every((v) => v.outcome === 'skipped')) run.skipped(item);
    else run.passed(item);
    return;
  }
  const show = (f: string) => (path.isAbsolute(f) && !path.relative(folder.cwd, f).startsWith('..') ? path.relative(folder.cwd, f) : f);
  const messages = failed.map((v) => {
    // the lines' links open the workspace's document, and read relative to the folder
    const lines = v.lines.map((l) => ({ ...l, file: inFolder(l.file, folder) }));
    const md = new vscode.MarkdownString(
      (mine.length > 1 ? `**${v.nodeid}**\n\n` : '') + verdictMarkdown({ ...v, lines }, show),
    );
    md.isTrusted = { enabledCommands: [OPEN_FRAME_COMMAND, OPEN_CAPTURE_COMMAND] };
    const m = new vscode.TestMessage(md);
    if (item.uri && item.range) m.location = new vscode.Location(item.uri, item.range);
    return m;
  });
  run.failed(item, messages);
}
