// The OOM notification: which line asked, for how much, and whether the memory existed but was split
// up (fragmentation) or did not exist (shortage); actions to open a snapshot of that moment and go to
// the line.
import * as path from 'node:path';
import * as vscode from 'vscode';
import { formatBytes } from '../core/format/bytes';
import type { Frame } from '../core/model/types';
import { OPEN_FRAME_COMMAND } from '../core/annotations';
import type { OomEvent } from './sessions';
import { openSnapshot } from './actions';

export function oomMessage(e: OomEvent, frame: Frame | undefined): string {
  const o = e.oom;
  const where = frame ? `${path.basename(frame.file)}:${frame.line}` : 'an unknown line (no Python frames)';
  const unallocated = o.reservedBytes - o.allocatedBytes;
  const why =
    o.verdict === 'fragmentation'
      ? `fragmentation: ${formatBytes(unallocated)} was reserved but unallocated, yet the largest free block was only ${formatBytes(o.largestFreeBlockBytes)}`
      : `shortage: only ${formatBytes(o.deviceFreeBytes)} free on the device of ${formatBytes(o.deviceTotalBytes)} and ${formatBytes(unallocated)} cached`;
  return `CUDA out of memory at ${where} on cuda:${o.device}: requested ${formatBytes(o.requestedBytes)} — ${why}.`;
}

export async function notifyOom(e: OomEvent, snapshotOfOom: () => Promise<vscode.Uri | undefined>): Promise<void> {
  const model = e.process.model;
  const frame = model?.stack(e.oom.stackId)?.frames[0];
  const actions = ['Open Snapshot', ...(frame ? ['Go to Line'] : [])];
  const choice = await vscode.window.showErrorMessage(`GPU Memory Lens: ${oomMessage(e, frame)}`, ...actions);
  if (choice === 'Go to Line' && frame) {
    await vscode.commands.executeCommand(OPEN_FRAME_COMMAND, frame.file, frame.line);
  } else if (choice === 'Open Snapshot') {
    const uri = await snapshotOfOom();
    if (uri) await openSnapshot(uri);
  }
}
