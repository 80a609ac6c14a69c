// Leak findings from the step table: memory a line keeps adding at every step end.
//
// Note [Leak rule]: a line whose bytes live at step end grow at ≥ MIN_GROWING_STEPS consecutive step ends
// (strictly, each end above the one before) is a finding. Steady-state training holds the same bytes per line
// at every step end (parameters, gradients, optimizer state after the first step); lazily created state
// grows once or twice, not three times in a row. The growth per step is the run's total growth divided by
// its length, so a line that grows by the same tensor every step reports that tensor's size. Only the latest
// qualifying run of each line is reported: it is the one still going on.
//
// The line that *keeps* a finding's memory alive (history.append(loss)) is found by the workload and tied to the
// finding in ./keeper.ts (Note [Leak keeper] there; the search itself: Note [Leak keeper search] in
// native/python/gpumem/_keeper.py). The allocation line stays the finding.
import type { StepTable } from '../../base/model/types';

export const MIN_GROWING_STEPS = 3;

export interface LeakFinding {
  file: string;
  line: number;
  /** average bytes added per step over the growing run */
  growthPerStepBytes: number;
  /** the run: bytes grew at every step end from fromStep+1 to toStep (1-based) */
  fromStep: number;
  toStep: number;
  growingSteps: number;
  bytesAtLastEnd: number;
}

export function findLeaks(table: StepTable, minGrowing = MIN_GROWING_STEPS): LeakFinding[] {
  const out: LeakFinding[] = [];
  for (const l of table.lines) {
    const v = l.bytesAtEnds;
    let best: { from: number; to: number } | undefined;
    let from = 0;
    for (let i = 1; i <= v.length; i++) {
      if (i < v.length && v[i] > v[i - 1]) continue;
      // run of increases from index `from` to `i - 1`
      if (i - 1 - from >= minGrowing) best = { from, to: i - 1 };
      from = i;
    }
    if (!best) continue;
    const growing = best.to - best.from;
    out.push({
      file: l.file,
      line: l.line,
      growthPerStepBytes: (v[best.to] - v[best.from]) / growing,
      fromStep: best.from + 1,
      toStep: best.to + 1,
      growingSteps: growing,
      bytesAtLastEnd: v[v.length - 1],
    });
  }
  return out.sort((a, b) => b.growthPerStepBytes - a.growthPerStepBytes);
}
