// The PyTorch-allocator mode's observer, built in the background before the user's first run (Note [Observer
// build ahead] in native/python/gpumem/_observer_build.py): at activation, when the workspace becomes trusted, and when the
// Python extension's active environment changes. A notification with progress shows only while a build really
// runs (build-observer --json says when it starts); a Python without torch, or an observer built before, shows
// nothing. Untrusted workspaces build nothing (the interpreter may be the workspace's own).
import * as path from 'node:path';
import * as vscode from 'vscode';
import { buildObserver, installPaths, observerBuildCommand, type ObserverBuildResult } from '../../core/base/launch';
import { resolvePython } from './launcher';

export class ObserverPrebuild implements vscode.Disposable {
  private readonly disposables: vscode.Disposable[] = [];
  private running: Promise<void> | undefined;
  private again = false;
  private readonly done = new Map<string, ObserverBuildResult>(); // interpreter → what its build said

  constructor(
    private readonly extensionRoot: string,
    private readonly log: (line: string) => void = () => undefined,
  ) {
    this.disposables.push(
      vscode.workspace.onDidGrantWorkspaceTrust(() => this.schedule()),
      vscode.workspace.onDidChangeConfiguration((e) => {
        if (e.affectsConfiguration('gpuMemoryLens.allocator') || e.affectsConfiguration('gpuMemoryLens.pythonPath')) this.schedule();
      }),
    );
    void this.watchEnvironments();
    this.schedule();
  }

  private async watchEnvironments(): Promise<void> {
    if (!vscode.extensions.getExtension('ms-python.python')) return;
    try {
      const { PythonExtension } = await import('@vscode/python-extension');
      const api = await PythonExtension.api();
      this.disposables.push(api.environments.onDidChangeActiveEnvironmentPath(() => this.schedule()));
    } catch {
      // the Python extension failed to activate: the setting's interpreter is used
    }
  }

  /** Builds for the interpreter a run would use now, unless the mode never observes or the folder is untrusted. */
  schedule(): void {
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = this.buildOnce().finally(() => {
      this.running = undefined;
      if (this.again) {
        this.again = false;
        this.schedule();
      }
    });
  }

  private async buildOnce(): Promise<void> {
    if (!vscode.workspace.isTrusted) return;
    const mode = vscode.workspace.getConfiguration('gpuMemoryLens').get<string>('allocator', 'auto');
    if (mode === 'lens') return;
    let python: string;
    try {
      python = await resolvePython(vscode.workspace.workspaceFolders?.[0]?.uri);
    } catch {
      return; // no interpreter yet: a run would say so
    }
    if (this.done.has(python)) return;
    const cmd = observerBuildCommand(python, installPaths(path.resolve(this.extensionRoot)).pythonDir, process.env);
    let finishProgress: (() => void) | undefined;
    const result = await buildObserver(cmd, (start) => {
      this.log(`building the observer of PyTorch's allocator for torch ${start.torch} in ${start.folder}`);
      const finished = new Promise<void>((resolve) => (finishProgress = resolve));
      void vscode.window.withProgress(
        {
          location: vscode.ProgressLocation.Notification,
          title: `GPU Memory Lens: building the observer of PyTorch's allocator for torch ${start.torch} (once per torch version, about 30 s)`,
        },
        () => finished,
      );
    });
    finishProgress?.();
    this.done.set(python, result);
    if (result.built) {
      this.log(result.already ? `the observer is built for torch ${result.torch ?? '?'}` : `built the observer in ${result.seconds ?? '?'} s`);
    } else {
      this.log(`the observer is not built for ${python}: ${result.why ?? 'unknown reason'}`);
      // Only worth a message when the user asked for this mode by name: `auto` takes the lens instead.
      if (mode === 'pytorch' && result.why && !result.no_cuda && !/has no torch/.test(result.why)) {
        void vscode.window.showWarningMessage(
          `GPU Memory Lens: the observer of PyTorch's allocator cannot be built (${result.why}); runs record from PyTorch's memory history instead.`,
        );
      }
    }
  }

  dispose(): void {
    for (const d of this.disposables) d.dispose();
  }
}
