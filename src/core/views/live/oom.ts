// The words of the OOM notification (no vscode): which line asked, for how much, and why it failed.
import { formatBytes } from '../../base/units/bytes';
import type { Frame, OomInfo } from '../../base/model/types';

function baseName(file: string): string {
  const i = Math.max(file.lastIndexOf('/'), file.lastIndexOf('\\'));
  return i >= 0 ? file.slice(i + 1) : file;
}

/**
 * Note [OOM verdict]: DESIGN §3 / OomInfo.verdict — "fragmentation" when reserved − allocated could have
 * held the request (the memory exists but no single free block is large enough); otherwise "shortage".
 * The sentence gives the numbers that decided it, so the user can check the verdict.
 */
export function oomMessage(o: OomInfo, frame: Frame | undefined): string {
  const where = frame ? `${baseName(frame.file)}:${frame.line}` : 'a line without Python frames';
  const unallocated = Math.max(0, o.reservedBytes - o.allocatedBytes);
  const why =
    o.verdict === 'fragmentation'
      ? `fragmentation: ${formatBytes(unallocated)} reserved but unallocated, yet the largest free block is ${formatBytes(o.largestFreeBlockBytes)}`
      : `shortage: ${formatBytes(o.deviceFreeBytes)} free on the device (of ${formatBytes(o.deviceTotalBytes)}) and ${formatBytes(unallocated)} cached`;
  return `CUDA out of memory at ${where} on cuda:${o.device}: requested ${formatBytes(o.requestedBytes)} — ${why}.`;
}
