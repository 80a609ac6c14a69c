// Where reserved memory is, block by block: the "why does reserved exceed allocated" answer.
//
// Note [Breakdown]: PyTorch's allocated_bytes counts blocks handed to tensors (state active_allocated);
// reserved_bytes counts whole segments. What a user actually asked for is `requested` (Σ requested_size of
// allocated blocks), so the panel explains reserved − requested, which splits exactly into four parts:
//   cached free      inactive blocks in segments holding no active block: empty_cache() releases these;
//   split remainders inactive blocks in segments that also hold an active block: stuck until those free;
//   pending free     blocks freed by Python but still used by another stream (record_stream);
//   rounding waste   size − requested_size inside allocated blocks (512 B rounding, whole-block handouts).
// reserved − allocated is the first three; rounding waste lives inside allocated. An expandable segment
// counts like any other: its unmapped tail is not reserved, so it is not in total_size either.
import type { BreakdownView } from '../protocol/snapshot';
import type { SegmentInfo } from '../model/types';

export function breakdownFromSegments(segments: readonly SegmentInfo[]): BreakdownView {
  const b: BreakdownView = {
    reservedBytes: 0,
    allocatedBytes: 0,
    requestedBytes: 0,
    cachedFreeBytes: 0,
    splitRemainderBytes: 0,
    pendingFreeBytes: 0,
    roundingWasteBytes: 0,
    freeBlocks: 0,
    largestFreeBlockBytes: 0,
  };
  for (const seg of segments) {
    b.reservedBytes += seg.totalSize;
    let inactive = 0;
    let holdsActive = false;
    for (const block of seg.blocks) {
      if (block.state === 'active_allocated') {
        holdsActive = true;
        b.allocatedBytes += block.size;
        b.requestedBytes += block.requestedSize;
        b.roundingWasteBytes += block.size - block.requestedSize;
      } else if (block.state === 'active_pending_free') {
        holdsActive = true;
        b.pendingFreeBytes += block.size;
      } else {
        inactive += block.size;
        b.freeBlocks++;
        if (block.size > b.largestFreeBlockBytes) b.largestFreeBlockBytes = block.size;
      }
    }
    if (holdsActive) b.splitRemainderBytes += inactive;
    else b.cachedFreeBytes += inactive;
  }
  return b;
}

/** reserved − allocated (what memory_summary() calls non-releasable + releasable cache). */
export function unallocatedBytes(b: BreakdownView): number {
  return b.cachedFreeBytes + b.splitRemainderBytes + b.pendingFreeBytes;
}
