// Where reserved memory is, block by block: the "why does reserved exceed allocated" answer.
//
// Note [Breakdown]: PyTorch's allocated_bytes counts blocks handed to tensors (state active_allocated);
// reserved_bytes counts whole segments (for an expandable segment: its mapped pages). What a user actually
// asked for is `requested` (Σ requested_size of allocated blocks), so the panel explains reserved − requested.
// What empty_cache() can give back depends on the kind of segment, so the free bytes are named per kind:
//   cached free          inactive blocks in segments holding no active block (fixed or expandable):
//                        empty_cache() releases them whole;
//   releasable pages     in an expandable segment that still holds tensors, the whole pages inside free
//                        blocks: empty_cache() unmaps them (PyTorch's unmap_block and ours round a free block
//                        inward to page boundaries, counted from the segment's start);
//   sub-page remainders  the rest of those free blocks, smaller than a page: they stay;
//   split remainders     inactive blocks in fixed segments that also hold an active block: a fixed segment
//                        is released only whole, so these stay until its tensors are freed;
//   pending free         blocks freed by Python but still used by another stream (record_stream);
//   rounding waste       size − requested_size inside allocated blocks (512 B rounding, whole-block handouts).
// requested + the six parts = reserved, exactly. reserved − allocated is everything but requested and
// rounding waste. A page is 2 MiB in the small pool and 20 MiB in the large one (kSmallBuffer/kLargeBuffer,
// in PyTorch and in native/allocator alike) unless the data names the segment's page size.
//
// This is a static reading of the blocks; what empty_cache() and a request *would do* is the allocator's
// own answer (Note [What-if], src/core/base/model/whatIf.ts), and tests check that the two agree.
import type { BreakdownView } from '../../base/protocol/snapshot';
import type { SegmentInfo } from '../../base/model/types';

const MiB = 1024 * 1024;

/** The mapping granularity of an expandable segment's pages. */
export function pageBytes(seg: Pick<SegmentInfo, 'pool' | 'pageSize'>): number {
  if (seg.pageSize && seg.pageSize > 0) return seg.pageSize;
  return seg.pool === 'small' ? 2 * MiB : 20 * MiB;
}

/** Bytes of whole pages inside [start, start + size), pages counted from `base`. */
export function wholePageBytes(base: number, start: number, size: number, page: number): number {
  const first = base + Math.ceil((start - base) / page) * page;
  const last = base + Math.floor((start + size - base) / page) * page;
  return Math.max(0, last - first);
}

export function emptyBreakdown(): BreakdownView {
  return {
    reservedBytes: 0,
    allocatedBytes: 0,
    requestedBytes: 0,
    cachedFreeBytes: 0,
    releasablePageBytes: 0,
    subPageRemainderBytes: 0,
    splitRemainderBytes: 0,
    pendingFreeBytes: 0,
    roundingWasteBytes: 0,
    freeBlocks: 0,
    largestFreeBlockBytes: 0,
    expandableSegments: 0,
    fixedSegments: 0,
  };
}

export function breakdownFromSegments(segments: readonly SegmentInfo[]): BreakdownView {
  const b = emptyBreakdown();
  for (const seg of segments) {
    b.reservedBytes += seg.totalSize;
    if (seg.expandable) b.expandableSegments++;
    else b.fixedSegments++;
    let inactive = 0;
    let pages = 0;
    let holdsActive = false;
    const page = pageBytes(seg);
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
        if (seg.expandable) pages += wholePageBytes(seg.address, block.address, block.size, page);
        b.freeBlocks++;
        if (block.size > b.largestFreeBlockBytes) b.largestFreeBlockBytes = block.size;
      }
    }
    if (!holdsActive) b.cachedFreeBytes += inactive;
    else if (seg.expandable) {
      b.releasablePageBytes += pages;
      b.subPageRemainderBytes += inactive - pages;
    } else b.splitRemainderBytes += inactive;
  }
  return b;
}

/** reserved − allocated (what memory_summary() calls non-releasable + releasable cache). */
export function unallocatedBytes(b: BreakdownView): number {
  return b.cachedFreeBytes + b.releasablePageBytes + b.subPageRemainderBytes + b.splitRemainderBytes + b.pendingFreeBytes;
}

/** Free bytes (not pending): what requests could be served from. */
export function freeBytes(b: BreakdownView): number {
  return b.cachedFreeBytes + b.releasablePageBytes + b.subPageRemainderBytes + b.splitRemainderBytes;
}

/** What this reading of the blocks says empty_cache() releases (the engine's answer must agree). */
export function releasableBytes(b: BreakdownView): number {
  return b.cachedFreeBytes + b.releasablePageBytes;
}
