// The replay's self-check: the policy that ran, replayed on the simulated device, against the peak reserved the run
// itself recorded. One computation for `gpumem summary` (its `replay_check`) and `gpumem advise` (the fidelity of
// every prediction), so the two never disagree.
//
// Note [Replay check]: replaying the policy that made the data must give back the run's own peak reserved: that is
// what says the simulation can be trusted for the other policies. The check is
//  - modelled: the replay's peak reserved (`predicted_bytes`) beside the recorded one and how far apart they are;
//  - not modelled: a setting the run used is not modelled (garbage_collection_threshold, the cudaMallocAsync backend,
//    a key the engine does not know: Note [Settings of the data] in native/addon/src/alloc_conf.h), or the data has
//    no allocation to replay; `not_modelled` says which and there is no predicted figure, nor any prediction built
//    on that policy's replay.
// The recorded peak is the reader's own (the capture's segment events, PyTorch's peak where figures only). A budgeted
// capture's compacted ranges keep their restated moments, not every event (FORMAT.md §5), so its replay is of the
// events the file holds and its check may differ from the unbudgeted capture's.
import { formatBytes } from '../../base/units/bytes';
import type { Model } from '../../base/model/types';
import type { Policy, ReplayCheck, ReplayResult } from '../../base/model/whatIf';
import { POLICY_LABELS, WhatIfUnavailable } from '../../base/model/whatIf';
import { whyNoReplay } from './unmodelled';

export type { ReplayCheck } from '../../base/model/whatIf';

/** The check for `device`; `own` is the replay of the data's policy when the caller has it already. */
export function replayCheck(model: Model, device: number, own?: ReplayResult): ReplayCheck {
  const cur = model.current(device);
  const recorded = cur.peakReservedBytes > 0 ? cur.peakReservedBytes : cur.peakAllocatedBytes;
  const noFigure = (policy: Policy, source: ReplayCheck['policy_source'], why: string): ReplayCheck => ({
    policy,
    policy_source: source,
    predicted_bytes: null,
    recorded_bytes: recorded,
    modelled: false,
    not_modelled: [why],
    deviation: null,
    alloc_conf: '',
    settings_source: '',
  });
  // Note [What the engine cannot answer] (./unmodelled.ts): figures only, or an allocator the engine does not model
  const none = whyNoReplay(model, device);
  let w: ReturnType<Model['whatIf']>;
  try {
    w = model.whatIf(device, Infinity);
  } catch (err) {
    // The engine cannot ask its policy about this state (a file whose segments are not of its policy's kind): no
    // figure, and the summary never fails for it.
    if (err instanceof WhatIfUnavailable) throw err;
    return noFigure('pytorch', 'assumed', none ?? (err as Error).message);
  }
  if (none) return noFigure(w.policy, w.policySource, none);
  let mine: ReplayResult;
  try {
    mine = own ?? model.replay(device, w.policy);
  } catch (err) {
    // The engine could not run this data at all (a pickle whose state before its trace does not restore): no figure.
    if (err instanceof WhatIfUnavailable) throw err;
    return noFigure(w.policy, w.policySource, (err as Error).message);
  }
  const predicted = mine.modelled ? mine.peakReservedBytes : null;
  return {
    policy: w.policy,
    policy_source: w.policySource,
    predicted_bytes: predicted,
    recorded_bytes: recorded,
    modelled: mine.modelled,
    not_modelled: [...mine.notModelled],
    deviation: predicted !== null && recorded > 0 ? Math.abs(predicted - recorded) / recorded : null,
    alloc_conf: mine.allocConf,
    settings_source: mine.settingsSource,
  };
}

/** "GPU Memory Lens (expandable + trim)" with its settings when it ran with any: "PyTorch (fixed segments), max_split_size_mb:64". */
export function policyWithSettings(policy: Policy, allocConf: string): string {
  return allocConf ? `${POLICY_LABELS[policy]}, ${allocConf}` : POLICY_LABELS[policy];
}

/** One sentence: "replay of the policy that ran (…): 13.7 GiB against 13.7 GiB recorded (0.0 % apart)", or why there is no figure. */
export function replayCheckSentence(c: ReplayCheck): string {
  const who = `replay of the policy that ran (${policyWithSettings(c.policy, c.alloc_conf)})`;
  if (!c.modelled || c.predicted_bytes === null) return `${who}: not modelled, so no figure: ${c.not_modelled.join('; ')}`;
  const apart = c.deviation === null ? '' : ` (${(c.deviation * 100).toFixed(1)} % apart)`;
  const assumed = c.settings_source === 'defaults' ? "; PyTorch's default settings assumed (the data does not record them)" : '';
  return `${who}: ${formatBytes(c.predicted_bytes)} against ${formatBytes(c.recorded_bytes)} recorded${apart}${assumed}`;
}
