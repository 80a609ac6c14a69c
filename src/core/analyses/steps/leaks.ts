// Leak findings from the step table: memory a line keeps adding at every step end.
//
// Note [Leak rule]: a line whose bytes live at step end grow at ≥ MIN_GROWING_STEPS consecutive step ends
// (strictly, each end above the one before) is a finding. Steady-state training holds the same bytes per line
// at every step end (parameters, gradients, optimizer state after the first step); lazily created state
// grows once or twice, not three times in a row. The growth per step is the run's total growth divided by
// its length, so a line that grows by the same tensor every step reports that tensor's size. Only the latest
// qualifying run of each line is reported: it is the one still going on.
//
// The growth is looked for in the bytes the line's live tensors *asked for* (requestedAtEnds), and reported in its
// blocks' bytes (bytesAtEnds, what allocated_bytes count). A block can be bigger than its request by which cached block
// met it: PyTorch hands out a free block whole when splitting would leave 1 MiB or less, and the PyTorch-allocator
// mode records those blocks as they are (Note [Observed block sizes] in native/allocator/src/observer.cc). So a
// line's blocks can grow at three step ends in a row with nothing more kept (test/unit/reference/observed_wander.py
// builds such a run); GPT-2 small's allocated bytes at step end did, twice in 80 steps, on an H100
// (test/gpu/probes/keeper_streaks.py). The same wander is why the keeper reads requested bytes (Note [Keeper reads
// requested bytes] in native/python/gpumem/_keeper.py).
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
    const asked = l.requestedAtEnds ?? v;
    let best: { from: number; to: number } | undefined;
    let from = 0;
    for (let i = 1; i <= v.length; i++) {
      if (i < v.length && asked[i] > asked[i - 1]) continue;
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
