// Note [What the engine cannot answer]: the what-if engine, the policy replays and the advice's predictions run the
// allocator's own policy on the simulated device, seeded with the allocator state the data recorded (Note [What-if]
// in src/core/base/model/whatIf.ts). Where the data has no such state, or its allocator is not one the engine models,
// any answer would be the engine's empty device passed off as the run's ("empty_cache() would release 0 B of 0 B"),
// so none is offered and one line says why instead:
//  - PyTorch's cudaMallocAsync backend (or any backend but its native caching allocator): the driver's stream-ordered
//    pool decides what is reserved and released, not a policy the engine simulates (and PyTorch gives no trace of it);
//  - a device with no allocation recorded one by one (figures only): no allocator state at all;
//  - a moment after the events stopped (--record-steps N): the allocator's state then is not known.
import type { Model } from '../../base/model/types';

/** Why the engine cannot answer about `device` at `timeUs` (Infinity: the end), or undefined when it can. */
export function whyNoWhatIf(model: Model, device: number, timeUs = Infinity): string | undefined {
  const backend = model.header().pytorchAllocatorBackend;
  if (backend && backend !== 'native') {
    return `PyTorch's ${backend} backend is not an allocator the what-if engine models (it simulates PyTorch's caching allocator and the GPU Memory Lens allocator)`;
  }
  const d = model.summary().devices.find((x) => x.device === device);
  if (d && d.events === 0 && d.peak_allocated_bytes > 0) {
    return 'allocations were not recorded one by one on this device (figures only): there is no allocator state to ask about';
  }
  const off = model.fileInfo().eventsOffUs;
  if (off !== undefined && off !== null && timeUs >= off) {
    return `allocations after the recorded steps were not recorded one by one: the allocator's state ${timeUs === Infinity ? 'at the end' : 'then'} is not known`;
  }
  return undefined;
}

/** Why no policy can be replayed on `device` (the whole stream), or undefined when it can. */
export function whyNoReplay(model: Model, device: number): string | undefined {
  return whyNoWhatIf(model, device, -Infinity);
}
