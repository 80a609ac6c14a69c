// The OOM notification: which line asked, for how much, and whether the memory existed but was split
// up (fragmentation) or did not exist (shortage); actions to open a snapshot of that moment and go to
// the line.
import * as vscode from 'vscode';
import { oomMessage, userFrame } from '../core/session';
import { OPEN_FRAME_COMMAND } from '../core/annotations';
import type { OomEvent } from './sessions';
import { openSnapshot } from './actions';

export async function notifyOom(e: OomEvent, snapshotOfOom: () => Promise<vscode.Uri | undefined>): Promise<void> {
  const model = e.process.model;
  const frame = userFrame(model?.stack(e.oom.stackId)?.frames ?? []);
  const actions = ['Open Snapshot', ...(frame ? ['Go to Line'] : [])];
  const choice = await vscode.window.showErrorMessage(`GPU Memory Lens: ${oomMessage(e.oom, frame)}`, ...actions);
  if (choice === 'Go to Line' && frame) {
    await vscode.commands.executeCommand(OPEN_FRAME_COMMAND, frame.file, frame.line);
  } else if (choice === 'Open Snapshot') {
    const uri = await snapshotOfOom();
    if (uri) await openSnapshot(uri);
  }
}
