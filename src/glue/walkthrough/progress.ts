// The first-run walkthrough's progress (contributes.walkthroughs in package.json): each step completes on a
// context key that the part doing the work sets once it has really happened, not when its button is pressed.
/**
 * Note [Walkthrough progress]: a step's completionEvents could be `onCommand:` its button's command, but a
 * command can be run and fail (no folder, Restricted Mode, no running workload), and the work can be done
 * another way (the ▷ menu, the Explorer, a capture opened from the session folder). So each step waits for
 * `onContext:gpuMemoryLens.walkthrough.<step>`, set here by the composition root when the part reports it:
 * the sample written or opened, a tracked run started, lines annotated in an editor, a snapshot or capture
 * shown in the snapshot panel, a budget test run with verdicts. VS Code keeps a completed step completed.
 */
import * as vscode from 'vscode';

export const WALKTHROUGH_STEPS = ['sampleOpened', 'runStarted', 'linesShown', 'snapshotOpened', 'budgetRun'] as const;
export type WalkthroughStep = (typeof WALKTHROUGH_STEPS)[number];

/** The context key a step's completionEvents wait for (package.json names the same). */
export function contextKey(step: WalkthroughStep): string {
  return `gpuMemoryLens.walkthrough.${step}`;
}

export class WalkthroughProgress {
  private readonly done = new Set<WalkthroughStep>();

  /** Marks a step done (once per window: setting the key again would be a wasted round trip). */
  mark(step: WalkthroughStep): void {
    if (this.done.has(step)) return;
    this.done.add(step);
    void vscode.commands.executeCommand('setContext', contextKey(step), true);
  }
}
