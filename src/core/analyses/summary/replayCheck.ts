// `gpumem summary`'s self-check of the replay (Note [Replay check] in ../replay/check.ts): per device with
// allocations, the policy that ran replayed on the simulated device against the peak reserved the run recorded, or
// which setting is not modelled (then no figure). `gpumem advise` states the same check in its evidence.
import type { Model, SnapshotSummary } from '../../base/model/types';
import type { ReplayCheck } from '../../base/model/whatIf';
import { WhatIfUnavailable } from '../../base/model/whatIf';
import { replayCheck, replayCheckSentence } from '../replay/check';

/** Adds `replay_check` to every device of `summary` that has events (the hook summarizeFile calls). */
export function addReplayCheck(model: Model, summary: SnapshotSummary & { devices: { device: number; events: number; replay_check?: ReplayCheck }[] }): void {
  for (const d of summary.devices) {
    if (d.events === 0) continue;
    try {
      d.replay_check = replayCheck(model, d.device);
    } catch (err) {
      // A reader built before the engine: no check (never a guessed one).
      if (!(err instanceof WhatIfUnavailable)) throw err;
    }
  }
}

/** The text report's lines, one per device that has a check. */
export function replayCheckText(summary: { devices: { device: number; replay_check?: ReplayCheck }[] }): string {
  const out = summary.devices.filter((d) => d.replay_check).map((d) => `Self-check, device ${d.device}: ${replayCheckSentence(d.replay_check as ReplayCheck)}`);
  return out.length ? '\n' + out.join('\n') : '';
}
