// gpumem_replay: `gpumem replay --json` (Note [What-if] in src/core/base/model/whatIf.ts), each policy with its peak,
// its OOM sentence and the few markers where empty_cache() would release the most.
import { POLICIES, POLICY_LABELS, type Policy } from '../../../base/model/whatIf';
import { replayPolicies } from '../../../analyses/replay';
import { jsonSeconds } from '../../../analyses/steps/timebase';
import { capacityOf } from './capacity';
import { pickDevice } from './common';
import type { Recording } from './subject';

const MARKERS_SHOWN = 3;

export function replayAnswer(rec: Recording, asked: { device?: number; policy?: string; capacity?: string }): object {
  const { model, file } = rec;
  const device = pickDevice(model, file, asked.device);
  const policies: Policy[] = !asked.policy || asked.policy === 'all' ? [...POLICIES] : [asked.policy as Policy];
  const set = replayPolicies(model, device, policies, capacityOf(asked.capacity));
  const own = model.whatIf(device, Infinity).policy;
  const s = (tUs: number) => jsonSeconds((tUs - set.t0Us) / 1e6);
  return {
    file,
    ...(rec.note ? { about: rec.note } : {}),
    device,
    ...(set.capacity.bytes !== undefined ? { capacity_bytes: set.capacity.bytes } : {}),
    capacity_from: set.capacity.source,
    times: 's since the device\'s first allocation',
    recorded_under: own,
    replays: set.results.map((r) => {
      const released = r.emptyCacheAtMarkers.filter((m) => m.releasesBytes > 0);
      return {
        policy: r.policy,
        label: POLICY_LABELS[r.policy],
        peak_reserved_bytes: r.peakReservedBytes,
        peak_allocated_bytes: r.peakAllocatedBytes,
        reserved_per_allocated: Number.isFinite(r.ratio) ? Math.round(r.ratio * 1000) / 1000 : null,
        peak_at_s: s(r.peakAtUs),
        out_of_memory: r.capacityBytes === null
          ? 'not checked (no capacity)'
          : r.oom
            ? { at_s: s(r.oom.tUs), requested_bytes: r.oom.requestedBytes, cause: r.oom.cause, sentence: r.oom.sentence }
            : false,
        ...(released.length
          ? {
              empty_cache_at_markers: [...released]
                .sort((a, b) => b.releasesBytes - a.releasesBytes || a.tUs - b.tUs)
                .slice(0, MARKERS_SHOWN)
                .map((m) => ({ marker: m.name, at_s: s(m.tUs), releases_bytes: m.releasesBytes })),
              ...(released.length > MARKERS_SHOWN ? { markers_releasing_memory: released.length } : {}),
            }
          : {}),
      };
    }),
  };
}
