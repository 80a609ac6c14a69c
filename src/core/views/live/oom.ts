// The words of the OOM notification (no vscode): which line asked, for how much, and why it failed.
import { formatBytes } from '../../base/units/bytes';
import type { BackwardOf, Frame, OomInfo } from '../../base/model/types';

function baseName(file: string): string {
  const i = Math.max(file.lastIndexOf('/'), file.lastIndexOf('\\'));
  return i >= 0 ? file.slice(i + 1) : file;
}

/**
 * Note [OOM verdict]: DESIGN §3 / OomInfo.verdict — "fragmentation" when reserved − allocated could have
 * held the request (the memory exists but no single free block is large enough); otherwise "shortage".
 * The sentence gives the numbers that decided it, so the user can check the verdict.
 */
//
// A request made by the backward of a forward op (Note [Linked backward stacks] in src/core/base/model/types.ts) has
// the forward line as its frame: the sentence says it was that line's backward, and which node ran, so "out of
// memory at y = self.conv(x)" is not read as the forward failing.
export function oomMessage(o: OomInfo, frame: Frame | undefined, backwardOf?: BackwardOf): string {
  const line = frame ? `${baseName(frame.file)}:${frame.line}` : 'a line without Python frames';
  const where = backwardOf && frame ? `in the backward of ${line} (${backwardOf.node})` : `at ${line}`;
  const unallocated = Math.max(0, o.reservedBytes - o.allocatedBytes);
  const why =
    o.verdict === 'fragmentation'
      ? `fragmentation: ${formatBytes(unallocated)} reserved but unallocated, yet the largest free block is ${formatBytes(o.largestFreeBlockBytes)}`
      : `shortage: ${formatBytes(o.deviceFreeBytes)} free on the device (of ${formatBytes(o.deviceTotalBytes)}) and ${formatBytes(unallocated)} cached`;
  return `CUDA out of memory ${where} on cuda:${o.device}: requested ${formatBytes(o.requestedBytes)} — ${why}.`;
}
