// The one-time warning when a workload's capture writer had to stop (disk full, file size limit, session
// folder removed): the workload goes on without recording, and the user must hear it here as well as in
// its stderr. The live panel lists the same line under its problems.
import * as vscode from 'vscode';
import { writerFailureLine } from '../../core/views/live';
import type { WriterFailureEvent } from './liveRuns';

export async function notifyWriterFailure(e: WriterFailureEvent, showLivePanel: () => void): Promise<void> {
  const choice = await vscode.window.showWarningMessage(`GPU Memory Lens: ${writerFailureLine(e)}`, 'Show Live Panel');
  if (choice === 'Show Live Panel') showLivePanel();
}
