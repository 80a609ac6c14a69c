// gpumem_categories: what the memory is at the peak, a step end or a time (Note [Categories] in
// native/addon/src/categories.cpp), with the cache and what lies outside the allocator, and the lines holding most.
import type { CategoryMoment } from '../../../base/model/types';
import { timeBaseOf } from '../../../analyses/steps/timebase';
import { beyondAllocated, moduleNote } from '../../../analyses/categories';
import { ToolError } from './toolError';
import { categoryFields, momentLines, pickDevice, when } from './common';
import type { Recording } from './subject';

const TOP_MODULES = 8;
const TOP_LINES = 8;

export function categoriesAnswer(rec: Recording, asked: { device?: number; step?: number; time_s?: number }): object {
  const { model, file } = rec;
  const device = pickDevice(model, file, asked.device);
  if (asked.step !== undefined && asked.time_s !== undefined) throw new ToolError('give step or time_s, not both');
  const time = timeBaseOf(model);
  let moment: { label: string; tUs?: number } = { label: 'the peak' };
  if (asked.step !== undefined) {
    const steps = time.steps.steps;
    const s = steps.find((x) => x.index === asked.step);
    if (!s) {
      throw new ToolError(
        steps.length ? `there is no step ${asked.step}: the recording has steps ${steps[0].index} to ${steps[steps.length - 1].index}` : 'the recording has no training steps: ask for the peak or a time_s',
      );
    }
    moment = { label: `the end of step ${s.index}`, tUs: s.endUs };
  } else if (asked.time_s !== undefined) {
    const { t0Us, t1Us } = model.timeRange(device);
    const tUs = time.originUs + asked.time_s * 1e6;
    if (tUs > t1Us) throw new ToolError(`time_s ${asked.time_s} is after the recording ends (${((t1Us - time.originUs) / 1e6).toFixed(3)} s)`);
    moment = { label: `${asked.time_s} s`, tUs: Math.max(tUs, t0Us) };
  }
  const report = model.categories(device, moment.tUs === undefined ? [] : [moment.tUs], true);
  const m: CategoryMoment | null = moment.tUs === undefined ? report.peak : (report.moments[0] ?? null);
  if (!m) throw new ToolError(`${file} has no allocation events on device ${device}: there are no categories to give`);
  const frag = model.stateAt(device, m.timeUs, m.events).fragmentation; // Note [Moment events]
  const beyond = beyondAllocated(m, frag);
  return {
    file,
    ...(rec.note ? { about: rec.note } : {}),
    device,
    moment: moment.label,
    // a step end is named by `moment`; the step in progress just after it would read as the next one
    ...(asked.step !== undefined ? { at_s: when(time, m.timeUs).at_s } : when(time, m.timeUs)),
    allocated_bytes: m.allocatedBytes,
    reserved_bytes: m.reservedBytes,
    categories: {
      ...categoryFields(m.bytes),
      ...(m.untracedBytes ? { before_the_trace_bytes: m.untracedBytes } : {}),
    },
    ...(m.keptBytes ? { activations_kept_by_a_container_bytes: m.keptBytes } : {}),
    ...(report.hasTags ? {} : { no_optimizer_step_seen: 'parameters, gradients and optimizer state count as other' }),
    ...(report.hasPhases ? {} : { no_backward_seen: 'activations and temporaries count as other' }),
    ...(m.modules.length
      ? { activations_by_module: m.modules.slice(0, TOP_MODULES).map((x) => ({ module: x.module, bytes: x.bytes })), modules_are: moduleNote(report) }
      : {}),
    cache: {
      reserved_minus_allocated_bytes: beyond.cacheBytes,
      ...(beyond.cachedFreeBytes ? { free_segments_empty_cache_releases_bytes: beyond.cachedFreeBytes } : {}),
      ...(beyond.splitRemainderBytes ? { split_remainders_bytes: beyond.splitRemainderBytes } : {}),
      ...(beyond.pendingFreeBytes ? { awaiting_streams_bytes: beyond.pendingFreeBytes } : {}),
    },
    ...(beyond.notFromAllocatorBytes !== undefined
      ? { device_used_bytes: beyond.deviceUsedBytes, outside_the_allocator_bytes: beyond.notFromAllocatorBytes }
      : {}),
    top_lines: momentLines(m, TOP_LINES),
  };
}
