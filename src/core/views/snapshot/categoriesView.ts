// The snapshot panel's Categories tab: what the memory is at the peak and at a chosen moment
// (Note [Categories]), every byte the device holds accounted (categories + cache by cause + not from the
// allocator), the per-step table and the leak findings, from the same computations as `gpumem summary`.
import { beyondAllocated, categoryView, moduleNote } from '../../analyses/categories';
import type { CategoryMoment, Model } from '../../base/model/types';
import type { CategoriesView, CategoryMomentView } from '../../base/protocol/categories';
import { END_OF_TRACE } from '../../base/protocol/snapshot';
import { stepReport } from '../../analyses/steps';
import { keeperSentence, leakSentence, SOURCE_TEXT, toJson } from '../../analyses/summary/steps';
import type { TimeBase } from '../../analyses/steps/timebase';

/** Activations by module listed per moment (the rest are in the activation total). */
const MAX_MODULES = 50;

export function categoriesView(
  model: Model,
  device: number,
  time: TimeBase,
  requestId: number,
  timeUs: number | undefined,
  display: (file: string) => string,
): CategoriesView {
  const r = stepReport(model, device, time.steps);
  const view = categoryView(model, device, r.steps);
  const report = view.report;
  const momentOf = (m: CategoryMoment | null | undefined, label: string): CategoryMomentView | null =>
    m
      ? {
          label,
          timeUs: m.timeUs,
          allocatedBytes: m.allocatedBytes,
          reservedBytes: m.reservedBytes,
          bytes: m.bytes,
          untracedBytes: m.untracedBytes,
          modules: m.modules.slice(0, MAX_MODULES),
          beyond: beyondAllocated(m, model.stateAt(device, m.timeUs, m.events).fragmentation), // Note [Moment events]
        }
      : null;
  let moment: CategoryMomentView | null = null;
  if (timeUs !== undefined) {
    const t = timeUs === END_OF_TRACE ? model.timeRange(device).t1Us : timeUs;
    moment = momentOf(model.categories(device, [t], false).moments[0], timeUs === END_OF_TRACE ? 'the end' : time.label(t));
  }
  const json = toJson(device, r, view);
  return {
    requestId,
    device,
    hasTags: report.hasTags,
    hasPhases: report.hasPhases,
    moduleSource: report.moduleSource,
    moduleNote: moduleNote(report),
    peak: momentOf(report.peak, report.peak ? `the peak, ${time.label(report.peak.timeUs)}` : 'the peak'),
    moment,
    stepSource: json.source === 'none' ? '' : SOURCE_TEXT[json.source],
    steps: json.steps.map((s) => ({
      step: s.step,
      endUs: s.end_us,
      peakAllocatedBytes: s.peak_allocated_bytes,
      allocatedAtEndBytes: s.allocated_at_end_bytes,
      reservedAtEndBytes: s.reserved_at_end_bytes,
      categories: s.categories,
    })),
    leaks: json.leaks.map((l) => ({
      file: l.file,
      displayFile: display(l.file),
      line: l.line,
      growthPerStepBytes: l.growth_per_step_bytes,
      fromStep: l.from_step,
      toStep: l.to_step,
      bytesAtLastEnd: l.bytes_at_last_end,
      category: l.category,
      sentence: leakSentence(l, display(l.file), l.keeper ? display(l.keeper.file) : undefined),
      ...(l.keeper
        ? {
            keeper: {
              file: l.keeper.file,
              displayFile: display(l.keeper.file),
              line: l.keeper.line,
              container: l.keeper.container,
              tensors: l.keeper.tensors,
              bytes: l.keeper.bytes,
              match: l.keeper.match,
              text: keeperSentence(l.keeper, display(l.keeper.file)),
            },
          }
        : {}),
    })),
  };
}
