// gpumem_leaks: the leak findings of the step table with their keepers (Note [Leak rule], Note [Leak keeper]) and
// the steps cut to the ones that tell the story: the first two, the last two and the one with the highest peak.
// A finding's `kept_by` is its keeper's index in `keepers`; `keeper_is_probable` when no block of the keeper was
// allocated on the finding's line and it went to the largest finding (keeperMatch 'largest').
import { timeBaseOf, jsonSeconds } from '../../../analyses/steps/timebase';
import { stepReport, MIN_GROWING_STEPS } from '../../../analyses/steps';
import { categoryView } from '../../../analyses/categories';
import { keeperSentence, SOURCE_TEXT, toJson, type KeeperJson } from '../../../analyses/summary/steps';
import { pickDevice } from './common';
import type { Recording } from './subject';

const LEAKS_SHOWN = 10;

export function leaksAnswer(rec: Recording, asked: { device?: number }): object {
  const { model, file } = rec;
  const device = pickDevice(model, file, asked.device);
  const time = timeBaseOf(model);
  const report = stepReport(model, device, time.steps);
  const head = { file, ...(rec.note ? { about: rec.note } : {}), device };
  if (report.steps.source === 'none' || report.table.steps.length === 0) {
    return {
      ...head,
      steps: 0,
      leaks: [],
      why: 'no training step was recorded (no optimizer.step() after backward(), no gpumem.step() or "step N" marks, no profiler step ranges), so memory cannot be compared from step to step',
    };
  }
  const json = toJson(device, report, categoryView(model, device, report.steps));
  const rows = json.steps;
  const top = rows.reduce((a, b) => (b.peak_allocated_bytes > a.peak_allocated_bytes ? b : a));
  const shown = json.leaks.slice(0, LEAKS_SHOWN);
  // one keeper (history.append(loss)) usually keeps the memory of several lines: each is told once, leaks point at it
  const keepers: object[] = [];
  const keeperKeys: string[] = [];
  const keeperIndex = (k: KeeperJson): number => {
    const key = `${k.time_us} ${k.file}:${k.line} ${k.container}`;
    let i = keeperKeys.indexOf(key);
    if (i < 0) {
      i = keeperKeys.push(key) - 1;
      keepers.push({
        keeper: i,
        kept_at: k.line ? `${k.file}:${k.line}` : k.file || 'unknown',
        ...(k.code ? { code: k.code } : {}),
        ...(k.container ? { container: k.container } : {}),
        container_type: k.container_type,
        ...(k.scope ? { in: k.scope } : {}),
        how: k.how === 'assigns' ? 'assigned' : k.how === 'stores' ? 'stored' : 'unknown',
        tensors_with_autograd_graphs: k.tensors,
        [k.complete ? 'holds_bytes' : 'holds_at_least_bytes']: k.bytes,
        found_at_step: k.step,
        sentence: keeperSentence({ ...k, match: 'address' }),
      });
    }
    return i;
  };
  const keep = new Set([0, 1, rows.length - 2, rows.length - 1, rows.indexOf(top)].filter((i) => i >= 0 && i < rows.length));
  return {
    ...head,
    steps: rows.length,
    steps_from: SOURCE_TEXT[json.source],
    rule: `a leak is a line whose memory live at step end grew at ${MIN_GROWING_STEPS} or more step ends in a row`,
    leaks: shown.map((l) => ({
      allocated_at: `${l.file}:${l.line}`,
      growth_per_step_bytes: l.growth_per_step_bytes,
      grew_over_steps: [l.from_step, l.to_step],
      at_last_step_end_bytes: l.bytes_at_last_end,
      ...(l.category ? { kind: l.category } : {}),
      ...(l.kept_bytes ? { activations_kept_past_backward_bytes: l.kept_bytes } : {}),
      ...(l.keeper ? { kept_by: keeperIndex(l.keeper), ...(l.keeper.match === 'largest' ? { keeper_is_probable: true } : {}) } : {}),
    })),
    ...(keepers.length ? { keepers } : {}),
    ...(json.leaks.length > LEAKS_SHOWN ? { more_leaks: json.leaks.length - LEAKS_SHOWN } : {}),
    ...(json.leaks.length === 0 ? { no_leak: `no line's memory at step end grew at ${MIN_GROWING_STEPS} step ends in a row` } : {}),
    step_figures: [...keep]
      .sort((a, b) => a - b)
      .map((i) => ({
        step: rows[i].step,
        end_s: jsonSeconds(time.seconds(rows[i].end_us)),
        peak_allocated_bytes: rows[i].peak_allocated_bytes,
        allocated_at_end_bytes: rows[i].allocated_at_end_bytes,
        reserved_at_end_bytes: rows[i].reserved_at_end_bytes,
        ...(rows[i] === top ? { highest_peak: true } : {}),
      })),
  };
}
