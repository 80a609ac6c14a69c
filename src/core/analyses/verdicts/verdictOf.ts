// THE seam for "why did this OOM happen": every view that states an OOM's verdict (gpumem summary text and
// JSON, the snapshot panel's OOM list) calls verdictOf and nothing else.
//
// Note [OOM verdict seam]: the body reads what the capture recorded at the failure (OomRec: requested,
// device free/total, reserved, allocated, largest free block; a pickle's oom entry has only requested and
// device free, the rest come from replaying its trace). Those figures are the answer of the allocator that
// ran, taken after its OOM ladder (cache released, pending frees waited for), so they need no simulation:
// the sim policy (what-if, Note [What-if]) answers questions about moments without an OOM. `state` is the
// allocator state at the failure (stateAt(oom.device, oom.timeUs)), for when a finer answer needs it.
import { formatBytes } from '../../base/units/bytes';
import type { AllocatorState, OomInfo } from '../../base/model/types';

export type OomVerdictKind = 'fragmentation' | 'shortage';

export interface OomVerdict {
  verdict: OomVerdictKind;
  /** one sentence with the numbers that decided it */
  sentence: string;
}

export function verdictOf(oom: OomInfo, state: AllocatorState | undefined): OomVerdict {
  const unallocated = Math.max(0, oom.reservedBytes - oom.allocatedBytes);
  const largest = oom.largestFreeBlockBytes || state?.fragmentation.largestFreeBlockBytes || 0;
  const request = formatBytes(oom.requestedBytes);
  // The allocator's own free memory would have held the request, but in no single block.
  if (unallocated >= oom.requestedBytes) {
    return {
      verdict: 'fragmentation',
      sentence: `A ${request} request failed although ${formatBytes(unallocated)} was reserved but unallocated: the largest free block was ${formatBytes(largest)}, so the cached memory was too fragmented to serve it.`,
    };
  }
  // Nothing held or cached matters when the device could never hold the request (the allocator says the same).
  if (oom.deviceTotalBytes > 0 && oom.requestedBytes > oom.deviceTotalBytes) {
    return {
      verdict: 'shortage',
      sentence: `A ${request} request is larger than the whole GPU (${formatBytes(oom.deviceTotalBytes)}): no freeing or setting can make it fit; check the shape and dtype of the tensor being created.`,
    };
  }
  const device = oom.deviceTotalBytes > 0 ? `${formatBytes(oom.deviceFreeBytes)} free of ${formatBytes(oom.deviceTotalBytes)}` : `${formatBytes(oom.deviceFreeBytes)} free`;
  return {
    verdict: 'shortage',
    sentence: `A ${request} request failed: the device had ${device} and the allocator's cache only ${formatBytes(unallocated)} unallocated, so memory ran short.`,
  };
}
