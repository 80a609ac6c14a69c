// gpumem_peak_lines: the per-line statistics (DESIGN §3) of the lines holding the most at the peak, each with its
// heaviest call stack cut to the user's frames.
import type { Model } from '../../../base/model/types';
import { timeBaseOf } from '../../../analyses/steps/timebase';
import { pickDevice, percent, when } from './common';
import type { Recording } from './subject';

const STACK_FRAMES = 6;

function stackOf(model: Model, stackId: number | undefined): string[] | undefined {
  if (!stackId) return undefined;
  const st = model.stack(stackId);
  if (!st) return undefined;
  const frames = st.frames.filter((f) => f.user).slice(0, STACK_FRAMES).map((f) => `${f.file}:${f.line} in ${f.name}`);
  if (st.backward) frames.unshift('(allocated by backward() on an autograd thread)');
  return frames.length ? frames : undefined;
}

export function peakLinesAnswer(rec: Recording, asked: { device?: number; top?: number }): object {
  const { model, file } = rec;
  const device = pickDevice(model, file, asked.device);
  const top = asked.top ?? 10;
  const time = timeBaseOf(model);
  const dev = model.summary().devices.find((d) => d.device === device);
  const peak = dev?.peak_allocated_bytes ?? model.current(device).peakAllocatedBytes;
  const all = model.lineStats(device);
  const held = all.filter((l) => l.selfBytesAtPeak > 0); // callers hold memory only through these: inclusive_at_peak
  const shown = held.slice(0, top);
  const heldBytes = held.reduce((s, l) => s + l.selfBytesAtPeak, 0);
  const shownBytes = shown.reduce((s, l) => s + l.selfBytesAtPeak, 0);
  return {
    file,
    ...(rec.note ? { about: rec.note } : {}),
    device,
    peak: { allocated_bytes: peak, ...(dev && dev.events > 0 ? when(time, dev.peak_at_time_us) : {}) },
    lines: shown.map((l) => {
      const stack = stackOf(model, l.topStacks[0]?.stackId);
      return {
        file: l.file,
        line: l.line,
        self_at_peak_bytes: l.selfBytesAtPeak,
        percent_of_peak: percent(l.selfBytesAtPeak, peak),
        ...(l.inclusiveBytesAtPeak !== l.selfBytesAtPeak ? { inclusive_at_peak_bytes: l.inclusiveBytesAtPeak } : {}),
        ...(l.backwardBytesAtPeak ? { by_backward_at_peak_bytes: l.backwardBytesAtPeak } : {}),
        allocated_in_total_bytes: l.totalAllocatedBytes,
        allocations: l.allocCount,
        live_at_end_bytes: l.liveNowBytes,
        ...(stack ? { heaviest_stack: stack } : {}),
      };
    }),
    lines_with_memory_at_peak: held.length,
    ...(held.length > shown.length ? { other_lines_at_peak_bytes: heldBytes - shownBytes } : {}),
    // allocations with no user frame (made inside libraries, or before recording began) hold the rest
    ...(peak > heldBytes ? { without_a_user_line_at_peak_bytes: peak - heldBytes } : {}),
  };
}
