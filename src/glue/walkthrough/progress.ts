// The first-run walkthrough's progress (contributes.walkthroughs in package.json): each step completes when the
// part doing its work reports that it has really happened, not when its button is pressed.
/**
 * Note [Walkthrough progress]: a step's completionEvents could be `onCommand:` its button's command, but a command
 * can be run and fail (no folder, Restricted Mode, no running workload), and the work can be done another way (the
 * ▷ menu, the Explorer, a capture opened from the session folder). So the composition root marks a step when the
 * part reports it: the sample written or opened, a tracked run started, lines annotated in an editor, a snapshot
 * or capture shown in the snapshot panel, a budget test run with verdicts. Marking does two things:
 * - sets `gpuMemoryLens.walkthrough.<step>`, the context key the step's completionEvents wait for (`onContext:`);
 * - runs VS Code's `welcome.markStepComplete` with the step's id. VS Code creates the walkthroughs' service only
 *   when something first asks for it (the Welcome page, a walkthrough opened), and a context key already true by
 *   then never completes its step (the service records the key as seen without progressing the step). The
 *   command creates the service and completes the step, whenever the work happened.
 * VS Code keeps a completed step completed, across windows.
 */
import * as vscode from 'vscode';
import { contextKey, stepId, type WalkthroughStep } from '../../core/views/walkthrough/steps';

export class WalkthroughProgress {
  private readonly done = new Set<WalkthroughStep>();

  /** Marks a step done (once per window: the work of a step is usually done many times). */
  mark(step: WalkthroughStep): void {
    if (this.done.has(step)) return;
    this.done.add(step);
    void vscode.commands.executeCommand('setContext', contextKey(step), true);
    // A VS Code without the command still completes the step through the context key.
    void Promise.resolve(vscode.commands.executeCommand('welcome.markStepComplete', stepId(step))).catch(() => undefined);
  }
}
