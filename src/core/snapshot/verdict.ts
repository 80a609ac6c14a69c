// The one-sentence answer at the top of the summary: how much is reserved but unusable, and why.
import { formatBytes } from '../format/bytes';
import type { OomInfo } from '../model/types';
import type { BreakdownView } from '../protocol/snapshot';
import { unallocatedBytes } from './breakdown';

/**
 * Note [Verdict]: the sentence names the unallocated bytes, how many free blocks they are in and the largest
 * one, then the consequence a user can act on. When the free bytes are split (total > largest block) it
 * names a round request size that fits in the total but in no single block: that request cannot be served
 * from the cache and needs a new segment (or fails when the device is full) — fragmentation made concrete.
 * An OOM in the file takes precedence: the sentence then explains the last OOM instead.
 */
export function verdictSentence(b: BreakdownView, lastOom?: OomInfo): string {
  if (lastOom) return oomSentence(lastOom);
  const unallocated = unallocatedBytes(b);
  if (b.reservedBytes === 0) return 'Nothing is reserved: the allocator holds no device memory at this moment.';
  if (unallocated === 0) {
    return `All ${formatBytes(b.reservedBytes)} reserved is allocated to tensors: there is no cache to reclaim.`;
  }
  const blocks = `${b.freeBlocks} free block${b.freeBlocks === 1 ? '' : 's'}`;
  let sentence = `${formatBytes(unallocated)} reserved but unallocated in ${blocks}, largest ${formatBytes(b.largestFreeBlockBytes)}`;
  const request = failingRequestSize(b.largestFreeBlockBytes, b.cachedFreeBytes + b.splitRemainderBytes);
  if (request !== undefined) {
    sentence += `: a ${formatBytes(request)} request would fail from fragmentation and need a new segment`;
  } else if (b.freeBlocks === 1) {
    sentence += ': one contiguous block, no fragmentation';
  }
  const releasable = b.cachedFreeBytes > 0 ? ` ${formatBytes(b.cachedFreeBytes)} of it is whole free segments that empty_cache() would release.` : '';
  const pending = b.pendingFreeBytes > 0 ? ` ${formatBytes(b.pendingFreeBytes)} waits on other streams (record_stream).` : '';
  return `${sentence}.${releasable}${pending}`;
}

function oomSentence(oom: OomInfo): string {
  const free = oom.reservedBytes - oom.allocatedBytes;
  const head = `Out of memory: a ${formatBytes(oom.requestedBytes)} request failed`;
  if (oom.verdict === 'fragmentation') {
    return `${head} although ${formatBytes(free)} was reserved but unallocated; the largest free block was ${formatBytes(oom.largestFreeBlockBytes)}, so fragmentation caused it.`;
  }
  return `${head}: the device had ${formatBytes(oom.deviceFreeBytes)} free of ${formatBytes(oom.deviceTotalBytes)} and the cache only ${formatBytes(free)} unallocated, so memory ran short.`;
}

// Round sizes a user recognises: 1, 1.5, 2, 2.5, 3, 4, 5, 6, 8 × 1, 10 or 100 × a power of 1024, in ascending order.
const MANTISSAS = [1, 1.5, 2, 2.5, 3, 4, 5, 6, 8];

/** The smallest round size > largest free block and ≤ total free, or undefined when there is none. */
export function failingRequestSize(largestFree: number, totalFree: number): number | undefined {
  if (totalFree <= largestFree) return undefined;
  for (let unit = 1; unit <= totalFree; unit *= 1024) {
    for (const scale of [1, 10, 100]) {
      for (const m of MANTISSAS) {
        const size = m * scale * unit;
        if (size > largestFree && size <= totalFree) return size;
      }
    }
  }
  return undefined;
}
