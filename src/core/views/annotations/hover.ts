// The hover shown on an annotated line: the numbers behind the annotation and the heaviest stacks
// through the line, whose frames are links that open file:line. Markdown text only (no vscode import);
// the glue wraps it in a MarkdownString trusted for exactly one command (OPEN_FRAME_COMMAND).
import type { BackwardOf, CategoryBytes, Frame, LineStat, Stack } from '../../base/model/types';
import { userFrame } from '../../base/model/frames';
import { backwardOfDetails, backwardOfSite, BACKWARD_FRAME_FILE, MODULE_FRAME_FILE } from '../../base/protocol/backwardOf';
import { CATEGORIES, CATEGORY_LABELS } from '../../base/protocol/categories';
import { formatBytes } from '../../base/units/bytes';
import { forwardBackwardSplit } from './annotate';

export const OPEN_FRAME_COMMAND = 'gpuMemoryLens.openFrame';

export interface HoverContext {
  /** the device's peak allocated bytes */
  peakBytes: number;
  /** "rank 0 · cuda:0" when the run has several processes/devices, else "" */
  where: string;
  stack(id: number): Stack | undefined;
  /** how many stacks to list (default 3) and frames per stack (default 8) */
  maxStacks?: number;
  maxFrames?: number;
  /** the line's self bytes at the peak by category (Note [Categories]), when the capture has them */
  categories?: Partial<CategoryBytes>;
}

/** A command URI that opens `file` at `line` (1-based) through OPEN_FRAME_COMMAND. */
export function openFrameUri(file: string, line: number): string {
  return `command:${OPEN_FRAME_COMMAND}?${encodeURIComponent(JSON.stringify([file, line]))}`;
}

/** Escapes text for Markdown so file and function names cannot inject links or formatting. */
export function escapeMarkdown(text: string): string {
  return text.replace(/[\\`*_{}[\]()#+\-.!<>|~]/g, '\\$&');
}

function baseName(file: string): string {
  const i = Math.max(file.lastIndexOf('/'), file.lastIndexOf('\\'));
  return i >= 0 ? file.slice(i + 1) : file;
}

function percent(part: number, whole: number): string {
  if (whole <= 0) return '—';
  const p = (100 * part) / whole;
  return p >= 10 ? `${p.toFixed(0)}%` : `${p.toFixed(1)}%`;
}

export function hoverMarkdown(stat: LineStat, ctx: HoverContext): string {
  const out: string[] = [];
  out.push(`**GPU memory at ${escapeMarkdown(baseName(stat.file))}:${stat.line}**${ctx.where ? ` — ${escapeMarkdown(ctx.where)}` : ''}`);
  out.push('');
  out.push('| | |');
  out.push('|---|---:|');
  out.push(`| Self at peak | ${formatBytes(stat.selfBytesAtPeak)} (${percent(stat.selfBytesAtPeak, ctx.peakBytes)} of ${formatBytes(ctx.peakBytes)}) |`);
  // Note [Forward and backward on one line] (./annotate.ts): the split, only where backward made some of it
  const { forward, backward } = forwardBackwardSplit(stat);
  if (backward > 0) {
    out.push(`| Forward at peak | ${formatBytes(forward)} |`);
    out.push(`| ${backwardRowLabel(stat, ctx)} | ${formatBytes(backward)} (${percent(backward, stat.selfBytesAtPeak)} of self at peak) |`);
  }
  const cats = CATEGORIES.filter((c) => (ctx.categories?.[c] ?? 0) > 0);
  if (cats.length) {
    out.push(`| By category at peak | ${cats.map((c) => `${CATEGORY_LABELS[c]} ${formatBytes(ctx.categories?.[c] ?? 0)}`).join(' · ')} |`);
  }
  out.push(`| Inclusive at peak | ${formatBytes(stat.inclusiveBytesAtPeak)} |`);
  out.push(`| Total allocated | ${formatBytes(stat.totalAllocatedBytes)} |`);
  out.push(`| Allocations | ${stat.allocCount} |`);
  out.push(`| Live now | ${formatBytes(stat.liveNowBytes)} |`);
  const stacks = stat.topStacks.slice(0, ctx.maxStacks ?? 3);
  if (stacks.length > 0) {
    out.push('');
    out.push('**Top stacks at peak**');
    for (const top of stacks) {
      const stack = ctx.stack(top.stackId);
      out.push('');
      const tag = stack?.backwardOf ? ` · ${backwardOfMarkdown(stack.backwardOf)}` : stack?.backward ? ' · backward' : '';
      out.push(`${formatBytes(top.bytesAtPeak)} · ${top.count} alloc${top.count === 1 ? '' : 's'}${tag}`);
      if (!stack || stack.frames.length === 0) {
        out.push('- (no Python frames)');
        continue;
      }
      const frames = stack.frames.slice(0, ctx.maxFrames ?? 8);
      for (const f of frames) out.push(frameItem(f));
      if (stack.frames.length > frames.length) out.push(`- … ${stack.frames.length - frames.length} more`);
    }
  }
  return out.join('\n');
}

/** One frame of a top stack: a link that opens it, or what a synthetic frame says (Note [Linked backward stacks]). */
function frameItem(f: Frame): string {
  if (f.file === MODULE_FRAME_FILE) return `- *module* ${escapeMarkdown(f.name)}`;
  if (f.file === BACKWARD_FRAME_FILE) return `- *autograd node* ${escapeMarkdown(f.name)}, run by the backward() called from:`;
  return `- [${escapeMarkdown(`${baseName(f.file)}:${f.line}`)}](${openFrameUri(f.file, f.line)}) ${escapeMarkdown(f.name)}`;
}

/** "backward of [model.py:7](open) · ConvolutionBackward0 · layer1.0.conv1 · recomputed" */
function backwardOfMarkdown(b: BackwardOf): string {
  const site = backwardOfSite(b);
  const where = site ? `[${escapeMarkdown(`${baseName(site.file)}:${site.line}`)}](${openFrameUri(site.file, site.line)})` : 'a forward op';
  return [`backward of ${where}`, ...backwardOfDetails(b).map(escapeMarkdown)].join(' · ');
}

/**
 * Note [Whose backward a line holds]: a line's backward bytes are those whose self line it is. On a forward line they
 * were made by the backward of its ops (linked stacks); on the line that called backward() they are what no forward
 * op is linked to (the stack of the backward() call). The line's top stacks tell which it is; a line that does both
 * (`model(x).sum().backward()`) says both.
 */
function backwardRowLabel(stat: LineStat, ctx: HoverContext): string {
  let linked = false;
  let onCaller = false;
  for (const top of stat.topStacks) {
    const st = ctx.stack(top.stackId);
    if (!st?.backward) continue;
    const self = userFrame(st.frames);
    if (self?.file !== stat.file || self.line !== stat.line) continue; // through this line, made on another
    if (st.backwardOf) linked = true;
    else onCaller = true;
  }
  if (onCaller && linked) return "Backward at peak (made by the backward of this line's ops and the backward() called here)";
  if (onCaller) return 'Backward at peak (made during the backward() called here)';
  return "Backward at peak (made by the backward of this line's ops)";
}
