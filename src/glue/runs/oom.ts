// The OOM notification: which line asked, for how much, and whether the memory existed but was split
// up (fragmentation) or did not exist (shortage); actions to open a snapshot of that moment and go to
// the line, and "Open Advice": the capture in the snapshot panel on its "What to do" tab.
import * as vscode from 'vscode';
import { userFrame } from '../../core/base/model/frames';
import { oomMessage } from '../../core/views/live';
import { OPEN_FRAME_COMMAND } from '../../core/views/annotations';
import type { OomEvent } from './liveRuns';
import { openSnapshot } from './actions';
import { requestTab } from '../snapshot/tabRequests';

export const OPEN_ADVICE = 'Open Advice';

export async function notifyOom(e: OomEvent, snapshotOfOom: () => Promise<vscode.Uri | undefined>): Promise<void> {
  const model = e.process.model;
  const stack = model?.stack(e.oom.stackId);
  const frame = userFrame(stack?.frames ?? []);
  const actions = ['Open Snapshot', OPEN_ADVICE, ...(frame ? ['Go to Line'] : [])];
  const choice = await vscode.window.showErrorMessage(`GPU Memory Lens: ${oomMessage(e.oom, frame, stack?.backwardOf)}`, ...actions);
  if (choice === 'Go to Line' && frame) {
    await vscode.commands.executeCommand(OPEN_FRAME_COMMAND, frame.file, frame.line);
  } else if (choice === OPEN_ADVICE) {
    const uri = vscode.Uri.file(e.process.entry.capture);
    requestTab(uri, 'advice');
    await openSnapshot(uri);
  } else if (choice === 'Open Snapshot') {
    const uri = await snapshotOfOom();
    if (uri) await openSnapshot(uri);
  }
}
