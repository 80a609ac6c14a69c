// What-if replay of allocator policies: the device's allocation stream replayed on the simulated
// device under each policy (native/allocator's sim backend, through the reader's `replay`), shared by
// `gpumem replay` and the snapshot panel's table. Note [What-if] in src/core/base/model/whatIf.ts.
import type { Model } from '../../base/model/types';
import type { Policy, ReplayResult } from '../../base/model/whatIf';

export interface Capacity {
  /** undefined: unknown; the replay then runs without an OOM check */
  bytes?: number;
  /** where the figure comes from, in words */
  source: string;
}

/**
 * The device's capacity as the data records it: the capture header's device total, else the last NVML
 * sample's total, else an OOM record's device total. A PyTorch pickle usually has none of them.
 */
export function deviceCapacity(model: Model, device: number): Capacity {
  const fromHeader = model.header().devices.find((d) => d.index === device)?.totalBytes;
  if (fromHeader) return { bytes: fromHeader, source: "the capture's device record" };
  const sampled = model.current(device).deviceTotalBytes;
  if (sampled) return { bytes: sampled, source: 'the device-memory samples' };
  const oom = model.ooms().find((o) => o.device === device && o.deviceTotalBytes > 0);
  if (oom) return { bytes: oom.deviceTotalBytes, source: 'the out-of-memory record' };
  return { source: 'unknown: the data does not record the device size' };
}

export interface ReplaySet {
  device: number;
  capacity: Capacity;
  /** the trace's first event, for times in seconds */
  t0Us: number;
  results: ReplayResult[];
}

export function replayPolicies(model: Model, device: number, policies: readonly Policy[], capacityBytes?: number): ReplaySet {
  let capacity: Capacity = capacityBytes === undefined ? deviceCapacity(model, device) : { bytes: capacityBytes, source: 'given' };
  const results = policies.map((p) => model.replay(device, p, capacity.bytes));
  // Without a recorded size the engine still checks against a device of its choosing: say which, and that
  // it is an assumption.
  const used = results[0]?.capacityBytes;
  if (capacity.bytes === undefined && typeof used === 'number' && used > 0) {
    capacity = { bytes: used, source: "an assumption: the data does not record the device's size (--capacity sets it)" };
  }
  return { device, capacity, t0Us: model.timeRange(device).t0Us, results };
}

/** The device to replay by default: the first with trace events. */
export function defaultDevice(model: Model): number | undefined {
  const devices = model.devices();
  return devices.find((d) => model.timeRange(d).t1Us > model.timeRange(d).t0Us) ?? devices[0];
}
