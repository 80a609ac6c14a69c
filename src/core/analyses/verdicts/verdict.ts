// The one-sentence answer at the top of the summary: how much is reserved but unallocated, and what the
// allocator that made the data would do about a request and about empty_cache().
import { formatBytes } from '../../base/units/bytes';
import type { Model, OomInfo } from '../../base/model/types';
import type { WhatIfAnswer } from '../../base/model/whatIf';
import { POLICY_LABELS, POLICY_SOURCE_WORDS, WhatIfUnavailable } from '../../base/model/whatIf';
import type { BreakdownView } from '../../base/protocol/snapshot';
import { freeBytes, unallocatedBytes } from '../breakdown/breakdown';
import { whyNoWhatIf } from '../replay/unmodelled';

/**
 * Note [Verdict]: the sentence states the figures (unallocated bytes, free blocks, the largest one), then
 * only what the allocator's own policy answers (Note [What-if] in src/core/base/model/whatIf.ts):
 *  - when the free bytes are split (total > largest block), a round request size that fits in the total
 *    but in no single block (`probeRequestSize`) is asked of the engine, and the sentence says what it
 *    answered: served from the cache (e.g. the lens policy's trim on growth remaps free pages), the device
 *    grows by N (fragmentation costs memory), or it fails;
 *  - the largest request served without reserving more, and what empty_cache() would release.
 * Without an answer (a reader without the engine) it makes no claim about either. An OOM in the file takes
 * precedence: the sentence then explains the last OOM instead.
 */
export function verdictSentence(b: BreakdownView, whatIf?: WhatIfAnswer, lastOom?: OomInfo): string {
  if (lastOom) return oomSentence(lastOom);
  const unallocated = unallocatedBytes(b);
  if (b.reservedBytes === 0) return 'Nothing is reserved: the allocator holds no device memory at this moment.';
  if (unallocated === 0) {
    return `All ${formatBytes(b.reservedBytes)} reserved is allocated to tensors: there is no cache to reclaim.`;
  }
  const blocks = `${b.freeBlocks} free block${b.freeBlocks === 1 ? '' : 's'}`;
  let sentence = `${formatBytes(unallocated)} reserved but unallocated in ${blocks}, largest ${formatBytes(b.largestFreeBlockBytes)}`;
  const probe = probeRequestSize(b);
  const answer = probe === undefined ? undefined : whatIf?.requests.find((r) => r.bytes === probe);
  if (whatIf && answer) {
    const size = formatBytes(answer.bytes);
    if (answer.outcome === 'from-cache') {
      const how = whatIf.policy === 'lens' ? ': trim on growth remaps free pages' : '';
      sentence += `: a ${size} request, larger than any free block, would still be served without reserving more${how}`;
    } else if (answer.outcome === 'grows') {
      sentence += `: a ${size} request fits in the free bytes but in no free block, so the allocator would reserve ${formatBytes(answer.growsByBytes)} more for it (fragmentation)`;
    } else {
      sentence += `: a ${size} request would fail (out of memory) although the free bytes would hold it (fragmentation)`;
    }
  } else if (b.freeBlocks === 1) {
    sentence += ': one contiguous block, no fragmentation';
  }
  sentence += '.';
  if (whatIf) {
    sentence += ` The largest request served without reserving more is ${formatBytes(whatIf.largestWithoutGrowthBytes)}.`;
    sentence +=
      whatIf.emptyCacheReleasesBytes > 0
        ? ` empty_cache() would release ${formatBytes(whatIf.emptyCacheReleasesBytes)}.`
        : ' empty_cache() would release nothing.';
  }
  if (b.pendingFreeBytes > 0) sentence += ` ${formatBytes(b.pendingFreeBytes)} waits on other streams (record_stream).`;
  if (whatIf) sentence += ` (${POLICY_LABELS[whatIf.policy]} policy, from ${POLICY_SOURCE_WORDS[whatIf.policySource]}.)`;
  return sentence;
}

/** The request to ask the engine about: a round size that fits in the free bytes but in no free block. */
export function probeRequestSize(b: BreakdownView): number | undefined {
  return failingRequestSize(b.largestFreeBlockBytes, freeBytes(b));
}

/**
 * What verdictAt asks the engine (requests: the probe, or none), or undefined when it asks nothing (an OOM, nothing
 * reserved or nothing unallocated): Note [First answers in turns] asks it on a worker first.
 */
export function verdictQuery(b: BreakdownView, lastOom?: OomInfo): { requests?: number[] } | undefined {
  if (lastOom || b.reservedBytes === 0 || unallocatedBytes(b) === 0) return undefined;
  const probe = probeRequestSize(b);
  return probe === undefined ? {} : { requests: [probe] };
}

/**
 * The verdict at a moment of `model`: asks the engine with the data's own policy, then words its answer.
 * A reader without the engine gives the figures only; an engine error is said, never papered over.
 */
export function verdictAt(model: Model, device: number, timeUs: number, b: BreakdownView, lastOom?: OomInfo): string {
  // Note [What the engine cannot answer] (../replay/unmodelled.ts): no allocator state, or not one the engine models
  const why = lastOom ? undefined : whyNoWhatIf(model, device, timeUs);
  if (why) return b.reservedBytes === 0 ? `No allocator state to explain: ${why}.` : `When its events were last recorded: ${verdictSentence(b)} No what-if answer: ${why}.`;
  const query = verdictQuery(b, lastOom);
  if (!query) return verdictSentence(b, undefined, lastOom);
  let answer: WhatIfAnswer | undefined;
  try {
    answer = model.whatIf(device, timeUs, query.requests ? query : undefined);
  } catch (err) {
    if (err instanceof WhatIfUnavailable) return verdictSentence(b);
    return `${verdictSentence(b)} (The what-if engine could not answer: ${err instanceof Error ? err.message : String(err)}.)`;
  }
  return verdictSentence(b, answer);
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
