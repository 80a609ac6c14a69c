// gpumem_peak_lines: the per-line statistics (DESIGN §3) of the lines holding the most at the peak, each with its
// heaviest call stack cut to the user's frames.
import type { Frame, Model } from '../../../base/model/types';
import { BACKWARD_FRAME_FILE } from '../../../base/protocol/backwardOf';
import { timeBaseOf } from '../../../analyses/steps/timebase';
import { forwardBackwardSplit } from '../../annotations/annotate';
import { pickDevice, percent, when } from './common';
import type { Recording } from './subject';

const CALLERS = 3;

interface StackFacts {
  function?: string;
  called_from?: string[];
  by_backward?: true;
  /** the backward node and module a linked stack was made by (Note [Linked backward stacks]) */
  backward_of?: { node: string; module?: string; recomputed?: true };
  /** where backward() was called, for a linked stack */
  backward_called_from?: string;
}

/** The user-code callers after the first user frame (innermost first), a line told once, at most CALLERS. */
function callersOf(user: readonly Frame[]): string[] {
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
  return callers;
}

/**
 * The heaviest stack through a line, as the line's function and its user-code callers (innermost first): the line
 * itself is the stack's innermost user frame, so it is not repeated, and a caller on the same line as the one before
 * (a comprehension inside its function) is told once. A stack made by the backward of a forward op (Note [Backward on
 * the forward line]) is cut at its `<backward>` frame: the callers are the forward's, and the line that called
 * backward() is said on its own.
 */
function stackOf(model: Model, stackId: number | undefined): StackFacts {
  const st = stackId ? model.stack(stackId) : undefined;
  if (!st) return {};
  const cut = st.backwardOf ? st.frames.findIndex((f) => f.file === BACKWARD_FRAME_FILE) : -1;
  const forward = cut >= 0 ? st.frames.slice(0, cut) : st.frames;
  const user = forward.filter((f) => f.user);
  const callers = callersOf(user);
  const caller = cut >= 0 ? st.frames.slice(cut + 1).find((f) => f.user) : undefined;
  const b = st.backwardOf;
  return {
    ...(user[0] ? { function: user[0].name } : {}),
    ...(callers.length ? { called_from: callers } : {}),
    ...(st.backward ? { by_backward: true } : {}),
    ...(b ? { backward_of: { node: b.node, ...(b.module ? { module: b.module } : {}), ...(b.recomputed ? { recomputed: true as const } : {}) } } : {}),
    ...(caller ? { backward_called_from: `${caller.file}:${caller.line} in ${caller.name}` } : {}),
  };
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
      const { function: fn, called_from, by_backward, backward_of, backward_called_from } = stackOf(model, l.topStacks[0]?.stackId);
      const { forward, backward } = forwardBackwardSplit(l);
      return {
        file: l.file,
        line: l.line,
        ...(fn ? { function: fn } : {}),
        self_at_peak_bytes: l.selfBytesAtPeak,
        percent_of_peak: percent(l.selfBytesAtPeak, peak),
        ...(l.inclusiveBytesAtPeak !== l.selfBytesAtPeak ? { inclusive_at_peak_bytes: l.inclusiveBytesAtPeak } : {}),
        // Note [Forward and backward on one line]: of self, what the forward made and what backward made
        ...(backward ? { forward_at_peak_bytes: forward, by_backward_at_peak_bytes: backward } : {}),
        allocated_in_total_bytes: l.totalAllocatedBytes,
        allocations: l.allocCount,
        ...(l.liveNowBytes ? { live_at_end_bytes: l.liveNowBytes } : {}),
        // the heaviest stack through the line: made during backward (by the backward of this line's op, when linked),
        // and called from these lines
        ...(by_backward ? { heaviest_stack_in_backward: true } : {}),
        ...(backward_of ? { heaviest_stack_backward_of: backward_of } : {}),
        ...(called_from ? { called_from } : {}),
        ...(backward_called_from ? { backward_called_from } : {}),
      };
    }),
    lines_with_memory_at_peak: held.length,
    ...(held.length > shown.length ? { other_lines_at_peak_bytes: heldBytes - shownBytes } : {}),
    // allocations with no user frame (made inside libraries, or before recording began) hold the rest
    ...(peak > heldBytes ? { without_a_user_line_at_peak_bytes: peak - heldBytes } : {}),
  };
}
