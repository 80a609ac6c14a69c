// Composition root: the only place that creates long-lived objects; everything disposable is
// registered on context.subscriptions here. (Owned by the live-experience work; see src/glue/.)
import * as vscode from 'vscode';

export function activate(context: vscode.ExtensionContext): void {
  const notYet = (name: string) => () => vscode.window.showWarningMessage(`GPU Memory Lens: ${name} is not available yet.`);
  for (const [id, name] of [
    ['gpuMemoryLens.run', 'Run Python File with Memory Tracking'],
    ['gpuMemoryLens.stop', 'Stop Workload'],
    ['gpuMemoryLens.emptyCache', 'Empty Cache'],
    ['gpuMemoryLens.captureSnapshot', 'Capture Snapshot'],
    ['gpuMemoryLens.openSnapshot', 'Open Snapshot…'],
    ['gpuMemoryLens.showLivePanel', 'Show Live Panel'],
    ['gpuMemoryLens.toggleAnnotations', 'Toggle Line Annotations'],
  ] as const) {
    context.subscriptions.push(vscode.commands.registerCommand(id, notYet(name)));
  }
}

export function deactivate(): void {}
