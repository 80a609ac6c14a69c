// Call stacks fetched from the host on demand (hover, click) and cached for the panel's lifetime.
import type { StackView } from '../../src/core/base/protocol/snapshot';
import { backwardOfText, BACKWARD_FRAME_FILE, MODULE_FRAME_FILE } from '../../src/core/base/protocol/backwardOf';
import { newRequestId, send } from './api';

const cache = new Map<number, StackView>();
const pending = new Map<number, { stackId: number; resolve: (s: StackView) => void }>();
const inflight = new Map<number, Promise<StackView>>();

export function getStack(stackId: number): Promise<StackView> {
  const hit = cache.get(stackId);
  if (hit) return Promise.resolve(hit);
  const running = inflight.get(stackId);
  if (running) return running;
  const p = new Promise<StackView>((resolve) => {
    const requestId = newRequestId();
    pending.set(requestId, { stackId, resolve });
    send({ type: 'requestStack', requestId, stackId });
  });
  inflight.set(stackId, p);
  return p;
}

export function cachedStack(stackId: number): StackView | undefined {
  return cache.get(stackId);
}

export function onStack(view: StackView): void {
  cache.set(view.stackId, view);
  const p = pending.get(view.requestId);
  pending.delete(view.requestId);
  inflight.delete(view.stackId);
  p?.resolve(view);
}

/** The frame "go to source" opens: the innermost user frame, else the innermost frame. */
export function sourceFrame(stack: StackView): { file: string; line: number } | undefined {
  // Note [FX frames]: a compiled graph's frame opens the user's line it was traced from.
  for (const x of stack.frames) {
    if (x.fx?.origin?.user) return { file: x.fx.origin.file, line: x.fx.origin.line };
    if (x.user) return { file: x.file, line: x.line };
  }
  const f = stack.frames[0];
  return f ? { file: f.file, line: f.line } : undefined;
}

export function stackLines(stack: StackView | undefined, max = 12): string[] {
  if (!stack) return ['(loading stack…)'];
  if (stack.frames.length === 0) return ['(no Python frames recorded for this allocation)'];
  const lines = stack.frames.slice(0, max).flatMap((f) => {
    // Note [Linked backward stacks]: the recorder's synthetic frames between the forward and backward() parts
    if (f.file === MODULE_FRAME_FILE) return [`  module ${f.name}`];
    if (f.file === BACKWARD_FRAME_FILE) return [`  autograd node ${f.name}, run by the backward() called from:`];
    const line = `${f.user ? '▸ ' : '  '}${f.name} — ${shortPath(f.file)}:${f.line}`;
    if (!f.fx) return [line];
    // Note [FX frames]: the compiled graph's node, and the user's line it was traced from.
    const node = `    FX node ${f.fx.node}${f.fx.op ? ` (${f.fx.op}${f.fx.target ? ` ${f.fx.target}` : ''})` : ''}`;
    const o = f.fx.origin;
    return o ? [line, node, `  ${o.user ? '▸ ' : '  '}${o.name} — ${shortPath(o.file)}:${o.line} (traced from)`] : [line, node];
  });
  if (stack.frames.length > max) lines.push(`  … ${stack.frames.length - max} more frames`);
  if (stack.backwardOf) lines.unshift(backwardOfText(stack.backwardOf, shortPath));
  else if (stack.backward) lines.unshift('(allocated during backward(); stack of the backward() call)');
  return lines;
}

function shortPath(file: string): string {
  const parts = file.split(/[\\/]/);
  return parts.length > 3 ? `…/${parts.slice(-3).join('/')}` : file;
}
