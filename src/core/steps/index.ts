// Steps and leaks of one device of a model: the figures `gpumem summary`, the panels and the hover share.
import type { Model, StepTable } from '../model/types';
import { detectSteps, type Steps } from './detect';
import { findLeaks, type LeakFinding } from './leaks';

export { detectSteps, stepAt, type Step, type Steps, type StepSource } from './detect';
export { findLeaks, MIN_GROWING_STEPS, type LeakFinding } from './leaks';

export interface StepReport {
  steps: Steps;
  table: StepTable;
  leaks: LeakFinding[];
}

/** Steps are process-wide: the step facts of every device of the model count (they are written once). */
export function stepReport(model: Model, device: number): StepReport {
  const markers = model.devices().flatMap((d) => model.markers(d));
  const { t0Us } = model.timeRange(device);
  const steps = detectSteps(markers, t0Us);
  const table = model.stepTable(device, steps.steps.map((s) => s.endUs));
  return { steps, table, leaks: findLeaks(table) };
}
