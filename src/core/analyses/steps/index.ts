// Steps and leaks of one device of a model: the figures `gpumem summary`, the panels and the hover share.
import type { Model, StepTable } from '../../base/model/types';
import type { Steps } from './detect';
import { attachKeepers, type KeptLeak } from './keeper';
import { findLeaks } from './leaks';

export { detectSteps, stepAt, type Step, type Steps, type StepSource } from './detect';
export { findLeaks, MIN_GROWING_STEPS, type LeakFinding } from './leaks';
export { attachKeepers, keepers, type Keeper, type KeptLeak } from './keeper';

export interface StepReport {
  steps: Steps;
  table: StepTable;
  /** findings with the line that keeps their memory alive, where the workload found one (Note [Leak keeper]) */
  leaks: KeptLeak[];
}

/**
 * The step table and leaks of one device. Steps are process-wide (the step facts of every device count; they are
 * written once): callers pass the ones the time base detected (TimeBase.steps), so every view numbers alike.
 */
export function stepReport(model: Model, device: number, steps: Steps): StepReport {
  const table = model.stepTable(device, steps.steps.map((s) => s.endUs));
  return { steps, table, leaks: attachKeepers(model, device, findLeaks(table)) };
}
