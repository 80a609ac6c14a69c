// Composition root: the only place that creates long-lived objects; everything disposable is
// registered on context.subscriptions here, so deactivation releases timers, watchers, decoration
// types, panels and open captures in one place.
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { openModel } from './core/base/model/open';
import type { LiveAction } from './core/base/protocol';
import { WorkloadActions } from './glue/runs/actions';
import { AnnotationController, type AnnotationSource } from './glue/annotations/controller';
import { registerOpenFrame } from './glue/annotations/openFrame';
import { Launcher } from './glue/runs/launcher';
import { LivePanel } from './glue/live/panel';
import { notifyOom } from './glue/runs/oom';
import { notifyWriterFailure } from './glue/runs/writerFailure';
import { LiveRuns, type OomEvent } from './glue/runs/liveRuns';
import { ObserverPrebuild } from './glue/runs/observerBuild';
import { MemoryStatusBar } from './glue/runs/statusBar';
import { GpuMemoryKernel, revealCellLine } from './glue/notebook/kernel';
import { registerSnapshotFeatures } from './glue/snapshot';
import { BudgetTests } from './glue/testing/controller';
import { registerAssistantTools } from './glue/assistant/tools';
import { registerWalkthrough, WalkthroughProgress } from './glue/walkthrough';

export function activate(context: vscode.ExtensionContext): void {
  const runs = new LiveRuns(openModel);
  const actions = new WorkloadActions(runs);
  const launcher = new Launcher(context.extensionUri.fsPath, runs);
  const livePanel = new LivePanel(context.extensionUri, runs, {
    run: (action: LiveAction) => (action === 'emptyCache' ? actions.emptyCache() : actions.captureSnapshot()),
  });
  const kernel = new GpuMemoryKernel(context.extensionUri.fsPath, runs);
  const walkthrough = new WalkthroughProgress();
  const annotations = new AnnotationController(
    () => liveAnnotationSources(runs),
    (doc) => kernel.framePathOf(doc),
    () => walkthrough.mark('linesShown'),
  );
  context.subscriptions.push(
    runs,
    livePanel,
    kernel,
    annotations,
    new MemoryStatusBar(runs),
    new ObserverPrebuild(context.extensionUri.fsPath),
    registerAssistantTools(runs),
    new BudgetTests(context.extensionUri.fsPath, () => walkthrough.mark('budgetRun')),
    ...registerWalkthrough(context.extensionUri.fsPath, walkthrough),
    runs.onDidChange(() => annotations.refresh()),
    runs.onDidOom((e) => void notifyOom(e, () => Promise.resolve(snapshotAtOom(e)))),
    runs.onDidWriterFailure((e) => void notifyWriterFailure(e, () => livePanel.show())),
    registerOpenFrame(async (file, line) => {
      const cell = kernel.cellOfFile(file);
      if (cell) await revealCellLine(cell, line);
      return cell !== undefined;
    }),
    vscode.commands.registerCommand('gpuMemoryLens.run', async (uri?: vscode.Uri) => {
      try {
        const tracked = await launcher.run(uri);
        if (tracked) walkthrough.mark('runStarted');
        if (tracked && vscode.workspace.getConfiguration('gpuMemoryLens').get<boolean>('livePanel.openOnRun', true)) livePanel.show(true, tracked.script);
      } catch (e) {
        void vscode.window.showErrorMessage(`GPU Memory Lens: ${(e as Error).message}`);
      }
    }),
    vscode.commands.registerCommand('gpuMemoryLens.stop', () => launcher.stop()),
    vscode.commands.registerCommand('gpuMemoryLens.emptyCache', () => actions.emptyCache()),
    vscode.commands.registerCommand('gpuMemoryLens.captureSnapshot', () => actions.captureSnapshot()),
    vscode.commands.registerCommand('gpuMemoryLens.showLivePanel', () => livePanel.show()),
    vscode.commands.registerCommand('gpuMemoryLens.toggleAnnotations', () => {
      const on = annotations.toggle();
      vscode.window.setStatusBarMessage(`GPU Memory Lens: line annotations ${on ? 'on' : 'off'}`, 3000);
    }),
  );
  registerSnapshotFeatures(context, {
    showModelAnnotations: (model, where) => {
      walkthrough.mark('snapshotOpened'); // called once a snapshot or capture is open in the panel
      return annotations.showModel(model, where);
    },
  });
}

/** The focused run's captures feed the annotations (the one the user is looking at). */
function liveAnnotationSources(runs: LiveRuns): AnnotationSource[] {
  const focused = runs.focused;
  if (!focused) return [];
  const procs = focused.run.processes.filter((p) => p.model);
  return procs.map((p) => ({
    model: p.model!,
    where: procs.length > 1 ? (p.entry.rank !== undefined ? `rank ${p.entry.rank}` : `pid ${p.entry.pid}`) : '',
  }));
}

/**
 * A PyTorch pickle of the allocator state at the OOM, written next to the capture. The capture holds
 * the state (REC_STATE follows every REC_OOM), so this works after the workload died of the OOM.
 */
function snapshotAtOom(e: OomEvent): vscode.Uri | undefined {
  const model = e.process.model;
  if (!model) return undefined;
  const dir = path.dirname(e.process.entry.capture);
  let out = path.join(dir, `oom-${e.process.entry.pid}-${Math.round(e.oom.timeUs)}.pickle`);
  try {
    if (!fs.existsSync(out)) model.exportPickle(out, e.oom.timeUs);
  } catch (err) {
    void vscode.window.showWarningMessage(`GPU Memory Lens: could not export the OOM snapshot (${(err as Error).message}); opening the capture instead.`);
    out = e.process.entry.capture;
  }
  return vscode.Uri.file(out);
}

export function deactivate(): void {}
