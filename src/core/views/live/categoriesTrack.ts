// The live panel's categories over time and leak findings, per track.
//
// Note [Live categories]: categories cost a pass over the trace (Note [Categories]) and the step table another,
// so the live panel does not recompute them with every update (10 a second): a track's categories are
// recomputed when its capture grew (its `generation`, the records read so far, moved) and at least
// `minIntervalMs` (2 s) passed since the last computation; in between the last answer is sent again. That answer
// can be stale at the run's end: the last records (the leak keeper's notice, written after the last event) arrive
// inside the interval and nothing arrives after them. `owes()` says, once per generation, when a track's answer is
// stale and due; the live run counts that as a change, so one more update goes out and recomputes (the trailing
// edge). They are sampled at `points` moments evenly spread over the trace (each the bytes live right after the
// moment, the same rule as everywhere), enough for a stacked chart the width of the panel; the exact figures are
// in the snapshot panel. A capture still in its first forward has no phase facts yet: everything is "other" until
// a backward runs (the chart says so through `hasPhases`).
import { categoryView, moduleNote } from '../../analyses/categories';
import { CATEGORIES } from '../../base/protocol/categories';
import type { Category, Model } from '../../base/model/types';
import type { LiveCategories } from '../../base/protocol/live';
import { stepReport } from '../../analyses/steps';
import { leakSentence, toJson } from '../../analyses/summary/steps';
import { timeBaseOf } from '../../analyses/steps/timebase';

interface Entry {
  generation: number;
  /** the generation owes() last reported as stale */
  owed?: number;
  at: number;
  value: LiveCategories;
}

export class LiveCategoriesCache {
  private readonly entries = new WeakMap<Model, Map<number, Entry>>();
  computed = 0;

  constructor(
    private readonly minIntervalMs = 2000,
    private readonly points = 120,
    private readonly now: () => number = Date.now,
  ) {}

  /** `generation`: how much of the capture was read (it moves whenever a record arrives) */
  get(model: Model, device: number, generation: number): LiveCategories | undefined {
    const { t0Us, t1Us } = model.timeRange(device);
    if (!(t1Us > t0Us) || !Number.isFinite(t0Us)) return undefined;
    let perDevice = this.entries.get(model);
    if (!perDevice) this.entries.set(model, (perDevice = new Map()));
    const e = perDevice.get(device);
    const t = this.now();
    if (e && (e.generation === generation || t - e.at < this.minIntervalMs)) return e.value;
    this.computed++;
    let value: LiveCategories;
    try {
      value = liveCategories(model, device, t0Us, t1Us, this.points);
    } catch {
      return e?.value; // a reader without categories (or a damaged tail mid-read): the chart keeps its last answer
    }
    perDevice.set(device, { generation, at: t, value });
    return value;
  }

  /**
   * true when an answer last given for one of the model's tracks is older than what was read and a recomputation
   * is due; said once per generation, so a hidden panel (which asks for no view) does not make every later
   * refresh a change. Only tracks that were answered can owe: their entries are the ones looked at.
   */
  owes(model: Model, generation: number): boolean {
    let owed = false;
    for (const e of this.entries.get(model)?.values() ?? []) {
      if (e.generation === generation || e.owed === generation || this.now() - e.at < this.minIntervalMs) continue;
      e.owed = generation;
      owed = true;
    }
    return owed;
  }
}

export function liveCategories(model: Model, device: number, t0Us: number, t1Us: number, points: number): LiveCategories {
  const n = Math.max(2, Math.floor(points));
  const times = Array.from({ length: n }, (_, i) => t0Us + ((t1Us - t0Us) * i) / (n - 1));
  const report = model.categories(device, times, false);
  const bytes = Object.fromEntries(CATEGORIES.map((c) => [c, report.moments.map((m) => m.bytes[c])])) as Record<Category, number[]>;
  const time = timeBaseOf(model);
  const r = stepReport(model, device, time.steps);
  const leaks = r.leaks.length ? toJson(device, r, categoryView(model, device, r.steps)).leaks : [];
  return {
    t: times.map((x) => x / 1e6),
    bytes,
    hasTags: report.hasTags,
    hasPhases: report.hasPhases,
    moduleNote: moduleNote(report),
    steps: r.steps.steps.map((s) => ({ index: s.index, endS: s.endUs / 1e6 })),
    leaks: leaks.map((l) => ({
      file: l.file,
      line: l.line,
      growthPerStepBytes: l.growth_per_step_bytes,
      category: l.category,
      sentence: leakSentence(l),
      ...(l.keeper ? { keeper: { file: l.keeper.file, line: l.keeper.line, container: l.keeper.container } } : {}),
    })),
  };
}
