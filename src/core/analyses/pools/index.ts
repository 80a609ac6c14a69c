// Private pools, pinned host memory and blocks of unknown history, read from a moment's segments.
//
// Note [Private pools]: PyTorch tags each segment with the pool that owns it (segment_pool_id): (0, 0) is the
// default large/small pools; a private pool is a MemPool or a graph_pool_handle() (id (0, n): the user made it) or
// the pool a CUDA graph capture made for itself (id (n, 0)), as c10's MemPool::graph_pool_handle numbers them.
// Memory in a private pool serves only that pool's allocations, so its free bytes are not free for the rest of the
// program: each pool gets its own reserved, active and free figures. Its fragmentation is the share of its free
// bytes outside its largest free block (0 when it has none free): what a request of the pool's largest free size
// could not use; 1 − largest/free, the same reading the segment map's verdict gives a device.
import type { BlockInfo, HostMemory, SegmentInfo } from '../../base/model/types';
import { breakdownFromSegments } from '../breakdown/breakdown';
import type { HostView } from '../../base/protocol/snapshot';

export type PoolKind = 'mempool' | 'graph';

export interface PoolFigures {
  poolId: [number, number];
  /** mempool: id (0, n), made by the user (torch.cuda.MemPool, graph_pool_handle); graph: (n, 0), a graph capture's own */
  kind: PoolKind;
  segments: number;
  blocks: number;
  reservedBytes: number;
  allocatedBytes: number;
  /** allocated + pending free (PyTorch's active) */
  activeBytes: number;
  requestedBytes: number;
  /** reserved − active: free for this pool's allocations only */
  freeBytes: number;
  largestFreeBlockBytes: number;
  freeBlocks: number;
  /** 1 − largest free / free (0 when nothing is free), Note [Private pools] */
  fragmentation: number;
}

export function poolKind(id: readonly [number, number]): PoolKind {
  return id[0] === 0 ? 'mempool' : 'graph';
}

/** "MemPool (0, 1)" / "CUDA graph pool (1, 0)". */
export function poolLabel(id: readonly [number, number]): string {
  return `${poolKind(id) === 'mempool' ? 'MemPool' : 'CUDA graph pool'} (${id[0]}, ${id[1]})`;
}

/** The private pools of a moment's segments, in order of first segment address. */
export function privatePools(segments: readonly SegmentInfo[]): PoolFigures[] {
  const byPool = new Map<string, SegmentInfo[]>();
  for (const s of segments) {
    if (!s.poolId || (s.poolId[0] === 0 && s.poolId[1] === 0)) continue;
    const key = `${s.poolId[0]},${s.poolId[1]}`;
    const list = byPool.get(key);
    if (list) list.push(s);
    else byPool.set(key, [s]);
  }
  return [...byPool.values()].map((segs) => {
    const b = breakdownFromSegments(segs);
    const active = b.allocatedBytes + b.pendingFreeBytes;
    const free = b.reservedBytes - active;
    const id = segs[0].poolId as [number, number];
    return {
      poolId: [id[0], id[1]],
      kind: poolKind(id),
      segments: segs.length,
      blocks: segs.reduce((n, s) => n + s.blocks.length, 0),
      reservedBytes: b.reservedBytes,
      allocatedBytes: b.allocatedBytes,
      activeBytes: active,
      requestedBytes: b.requestedBytes,
      freeBytes: free,
      largestFreeBlockBytes: b.largestFreeBlockBytes,
      freeBlocks: b.freeBlocks,
      fragmentation: free > 0 ? 1 - b.largestFreeBlockBytes / free : 0,
    };
  });
}

/** Note [Untraced blocks]: allocated blocks whose allocation the trace does not hold. */
export function untracedBlocks(segments: readonly SegmentInfo[]): { blocks: number; bytes: number } {
  let blocks = 0;
  let bytes = 0;
  for (const s of segments)
    for (const b of s.blocks as BlockInfo[])
      if (b.untraced) {
        blocks++;
        bytes += b.size;
      }
  return { blocks, bytes };
}

/**
 * Pinned host memory's own totals (Note [Host memory] in native/addon/src/model.h), at the snapshot's moment: the
 * protocol's HostView without its segment rows, plus the bytes requested.
 */
export type HostFigures = Omit<HostView, 'rows'> & { requestedBytes: number };

export function hostFigures(host: HostMemory): HostFigures {
  const b = breakdownFromSegments(host.segments);
  const active = b.allocatedBytes + b.pendingFreeBytes;
  let blocks = 0;
  let allocatedBlocks = 0;
  for (const s of host.segments) {
    blocks += s.blocks.length;
    for (const bl of s.blocks) if (bl.state === 'active_allocated') allocatedBlocks++;
  }
  return {
    segments: host.segments.length,
    blocks,
    allocatedBlocks,
    reservedBytes: b.reservedBytes,
    allocatedBytes: b.allocatedBytes,
    activeBytes: active,
    requestedBytes: b.requestedBytes,
    cachedBytes: b.reservedBytes - active,
    largestFreeBlockBytes: b.largestFreeBlockBytes,
    peakAllocatedBytes: host.peakAllocatedBytes,
    peakAtTimeUs: host.peakAtTimeUs,
    events: host.events,
  };
}
