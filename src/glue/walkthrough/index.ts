// The first-run walkthrough's commands: Open Sample (its first step's button) and Get Started (opens it).
import * as vscode from 'vscode';
import { SAMPLE_FILES, WALKTHROUGH_ID, type SampleKind } from '../../core/views/walkthrough/steps';
import { openSample } from './sample';
import type { WalkthroughProgress } from './progress';

export { WalkthroughProgress } from './progress';

export function registerWalkthrough(extensionRoot: string, progress: WalkthroughProgress): vscode.Disposable[] {
  return [
    // A command link passes its argument ("test": the budget test); the palette passes none (the script).
    vscode.commands.registerCommand('gpuMemoryLens.openSample', async (kind?: unknown) => {
      const which: SampleKind = typeof kind === 'string' && kind in SAMPLE_FILES ? (kind as SampleKind) : 'script';
      const opened = await openSample(extensionRoot, which);
      if (opened && which === 'script') progress.mark('sampleOpened');
    }),
    vscode.commands.registerCommand('gpuMemoryLens.openWalkthrough', async () => {
      await vscode.commands.executeCommand('workbench.action.openWalkthrough', WALKTHROUGH_ID, false);
      // VS Code opens a walkthrough as a preview tab, which the next editor opened in its group replaces: Capture
      // Snapshot's panel would close it halfway through. Kept, it stays a tab beside the snapshot.
      await vscode.commands.executeCommand('workbench.action.keepEditor');
    }),
  ];
}
