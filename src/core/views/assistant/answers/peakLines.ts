// gpumem_peak_lines: the per-line statistics (DESIGN §3) of the lines holding the most at the peak, each with its
// heaviest call stack cut to the user's frames.
import type { Model } from '../../../base/model/types';
import { timeBaseOf } from '../../../analyses/steps/timebase';
import { pickDevice, percent, when } from './common';
import type { Recording } from './subject';

const CALLERS = 3;

/**
 * The heaviest stack through a line, as the line's function and its user-code callers (innermost first): the line
 * itself is the stack's innermost user frame, so it is not repeated, and a caller on the same line as the one before
 * (a comprehension inside its function) is told once.
 */
function stackOf(model: Model, stackId: number | undefined): { function?: string; called_from?: string[]; by_backward?: true } {
  const st = stackId ? model.stack(stackId) : undefined;
  if (!st) return {};
  const user = st.frames.filter((f) => f.user);
  const callers: string[] = [];
  let last = user[0] ? `${user[0].file}:${user[0].line}` : '';
  for (const f of user.slice(1)) {
    const at = `${f.file}:${f.line}`;
    if (at === last) continue;
    last = at;
    if (callers.length === CALLERS) {
      callers.push('…');
      break;
    }
    callers.push(`${at} in ${f.name}`);
  }
  return { ...(user[0] ? { function: user[0].name } : {}), ...(callers.length ? { called_from: callers } : {}), ...(st.backward ? { by_backward: true } : {}) };
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
      const { function: fn, called_from, by_backward } = stackOf(model, l.topStacks[0]?.stackId);
      return {
        file: l.file,
        line: l.line,
        ...(fn ? { function: fn } : {}),
        self_at_peak_bytes: l.selfBytesAtPeak,
        percent_of_peak: percent(l.selfBytesAtPeak, peak),
        ...(l.inclusiveBytesAtPeak !== l.selfBytesAtPeak ? { inclusive_at_peak_bytes: l.inclusiveBytesAtPeak } : {}),
        ...(l.backwardBytesAtPeak ? { by_backward_at_peak_bytes: l.backwardBytesAtPeak } : {}),
        allocated_in_total_bytes: l.totalAllocatedBytes,
        allocations: l.allocCount,
        ...(l.liveNowBytes ? { live_at_end_bytes: l.liveNowBytes } : {}),
        // the heaviest stack through the line: made by backward() on an autograd thread, or called from these lines
        ...(by_backward ? { heaviest_stack_in_backward: true } : {}),
        ...(called_from ? { called_from } : {}),
      };
    }),
    lines_with_memory_at_peak: held.length,
    ...(held.length > shown.length ? { other_lines_at_peak_bytes: heldBytes - shownBytes } : {}),
    // allocations with no user frame (made inside libraries, or before recording began) hold the rest
    ...(peak > heldBytes ? { without_a_user_line_at_peak_bytes: peak - heldBytes } : {}),
  };
}
