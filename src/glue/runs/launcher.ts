// Run Python File with Memory Tracking: session folder + workload environment (src/core/base/launch) + a
// VS Code terminal running the user's command.
// (Note [Terminal] in src/core/base/launch/terminal.ts says why a real terminal and what the wrapper does.)
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { readValue, type SettingValue } from '../../core/base/settings/parse';
import { SETTINGS, type SettingDecl } from '../../core/base/settings/table';
import { buildCommand, buildWorkloadEnv, expandLaunchTemplate, findPython, locateInstall, terminalEnv, terminalShellLine } from '../../core/base/launch';
import { createSessionFolder } from '../../core/base/sessionFolder';
import type { RecordingSettings } from '../../core/base/launch';
import type { LiveRuns, TrackedRun } from './liveRuns';

async function interpreterFromPythonExtension(resource: vscode.Uri | undefined): Promise<string | undefined> {
  if (!vscode.extensions.getExtension('ms-python.python')) return undefined;
  try {
    const { PythonExtension } = await import('@vscode/python-extension');
    const api = await PythonExtension.api();
    const active = api.environments.getActiveEnvironmentPath(resource);
    const resolved = await api.environments.resolveEnvironment(active);
    return resolved?.executable.uri?.fsPath ?? active.path;
  } catch {
    return undefined; // the Python extension failed to activate: fall back to the setting
  }
}

export async function resolvePython(resource: vscode.Uri | undefined): Promise<string> {
  const fromExt = await interpreterFromPythonExtension(resource);
  if (fromExt) return fromExt;
  return findPython(vscode.workspace.getConfiguration('gpuMemoryLens').get<string>('pythonPath', ''));
}

export function sessionRoot(resource: vscode.Uri | undefined): string {
  const configured = vscode.workspace.getConfiguration('gpuMemoryLens').get<string>('sessionRoot', '').trim();
  const folder = (resource && vscode.workspace.getWorkspaceFolder(resource)) ?? vscode.workspace.workspaceFolders?.[0];
  if (configured) return path.isAbsolute(configured) || !folder ? configured : path.join(folder.uri.fsPath, configured);
  if (!folder) throw new Error('Open a folder first, or set gpuMemoryLens.sessionRoot to where session folders should go.');
  const root = path.join(folder.uri.fsPath, '.gpumem');
  ignoreInGit(root);
  return root;
}

/**
 * Note [Sessions stay out of git]: the default session root lives inside the user's repository; captures
 * (megabytes) and sockets must never show up as changes. A `.gitignore` of `*` inside the folder ignores
 * it without touching the user's own .gitignore.
 */
function ignoreInGit(root: string): void {
  try {
    fs.mkdirSync(root, { recursive: true });
    const file = path.join(root, '.gitignore');
    if (!fs.existsSync(file)) fs.writeFileSync(file, '# GPU Memory Lens session folders (captures, sockets, snapshots)\n*\n');
  } catch {
    // not fatal: createSessionFolder reports an unwritable root with a clear message
  }
}

/**
 * The recording settings as the user set them in VS Code: each read and checked by the settings table (Note
 * [Settings table]), so a wrong value is refused here with the message the CLIs and the bootstrap give.
 */
/**
 * A new session folder for a workload (a script, a notebook's kernel) and the environment that tracks it: the one
 * place both launchers (this file, src/glue/notebook/kernel.ts) build them.
 */
export function trackedSession(extensionRoot: string, resource: vscode.Uri | undefined, label: string, command: string[], cwd: string) {
  const install = locateInstall(path.join(extensionRoot, 'dist'));
  const sessionFolder = createSessionFolder(sessionRoot(resource), label, { command, cwd });
  const env = buildWorkloadEnv({
    sessionDir: sessionFolder.dir,
    allocatorSo: install.allocatorSo,
    pythonPathPrefix: install.pythonDir,
    settings: recordingSettings(),
    userRoots: (vscode.workspace.workspaceFolders ?? []).map((f) => f.uri.fsPath),
  });
  return { sessionFolder, env };
}

export function recordingSettings(): Partial<RecordingSettings> {
  const c = vscode.workspace.getConfiguration();
  const out: Partial<Record<SettingDecl['key'], SettingValue>> = {};
  for (const d of SETTINGS) {
    const raw = d.vscode === undefined ? undefined : c.get<unknown>(d.vscode);
    if (raw !== undefined && d.vscode !== undefined) out[d.key] = readValue(d, raw, d.vscode);
  }
  return out as Partial<RecordingSettings>;
}

export class Launcher {
  constructor(
    private readonly extensionRoot: string,
    private readonly runs: LiveRuns,
  ) {}

  /** Launches `file` (or the active Python editor's file). Returns the run, or undefined if cancelled. */
  async run(fileArg?: vscode.Uri): Promise<TrackedRun | undefined> {
    if (!vscode.workspace.isTrusted) {
      void vscode.window.showErrorMessage(
        'GPU Memory Lens: running a workload executes code from this folder, which is in Restricted Mode. Trust the workspace (Manage Workspace Trust) to run it.',
      );
      return undefined;
    }
    const file = fileArg instanceof vscode.Uri ? fileArg : await activePythonFile();
    const template = vscode.workspace.getConfiguration('gpuMemoryLens').get<string>('launchCommand', '').trim();
    if (!template && (!file || file.scheme !== 'file' || !file.fsPath.endsWith('.py'))) {
      void vscode.window.showErrorMessage('GPU Memory Lens: open a Python file to run, or set gpuMemoryLens.launchCommand.');
      return undefined;
    }
    const doc = file && vscode.workspace.textDocuments.find((d) => d.uri.toString() === file.toString());
    if (doc?.isDirty) await doc.save(); // run what the user sees

    const python = await resolvePython(file);
    const filePath = file?.scheme === 'file' ? file.fsPath : '';
    const cmd = template ? expandLaunchTemplate(template, { file: filePath, python }) : buildCommand(python, { kind: 'script', path: filePath });
    const folder = (file && vscode.workspace.getWorkspaceFolder(file)) ?? vscode.workspace.workspaceFolders?.[0];
    const cwd = folder?.uri.fsPath ?? (filePath ? path.dirname(filePath) : process.cwd());
    const label = filePath ? path.basename(filePath) : cmd.file;
    const { sessionFolder, env } = trackedSession(this.extensionRoot, file, label, [cmd.file, ...cmd.args], cwd);
    const terminal = vscode.window.createTerminal({
      name: `GPU Memory: ${label}`,
      cwd,
      env: terminalEnv(env),
      shellPath: '/bin/sh',
      shellArgs: ['-c', terminalShellLine(cmd)],
      iconPath: new vscode.ThemeIcon('pulse'),
    });
    terminal.show(true);
    const tracked = this.runs.add(sessionFolder.dir, label, terminal);
    if (file?.scheme === 'file') tracked.script = file;
    return tracked;
  }

  /** Stop Workload: Ctrl-C to the workload's terminal (clean exit, capture closed); pick one if several. */
  async stop(): Promise<void> {
    const running = this.runs.running().filter((s) => s.terminal);
    if (running.length === 0) {
      void vscode.window.showInformationMessage('GPU Memory Lens: no workload is running.');
      return;
    }
    const target = running.length === 1 ? running[0] : await pickRun(running, 'Stop which workload?');
    if (!target?.terminal) return;
    target.terminal.sendText('\u0003', false);
  }
}

/**
 * The file Run means when given none: the active editor's; with no text editor active (the walkthrough, a panel
 * or the terminal has the focus) the one Python file that is visible, as the user sees it. That editor becomes
 * the active one, so the live panel opens beside it rather than over it (its lines get annotated).
 */
async function activePythonFile(): Promise<vscode.Uri | undefined> {
  const active = vscode.window.activeTextEditor;
  if (active) return active.document.uri;
  const python = vscode.window.visibleTextEditors.filter((e) => e.document.languageId === 'python' && e.document.uri.scheme === 'file');
  if (python.length !== 1) return undefined;
  const [editor] = python;
  await vscode.window.showTextDocument(editor.document, { viewColumn: editor.viewColumn, preserveFocus: false });
  return editor.document.uri;
}

export async function pickRun(list: readonly TrackedRun[], title: string): Promise<TrackedRun | undefined> {
  const pick = await vscode.window.showQuickPick(
    list.map((s) => ({ label: s.label, description: s.run.name, detail: s.run.dir, tracked: s })),
    { title, placeHolder: title },
  );
  return pick?.tracked;
}

