// The hover shown on an annotated line: the numbers behind the annotation and the heaviest stacks
// through the line, whose frames are links that open file:line. Markdown text only (no vscode import);
// the glue wraps it in a MarkdownString trusted for exactly one command (OPEN_FRAME_COMMAND).
import type { CategoryBytes, LineStat, Stack } from '../../base/model/types';
import { CATEGORIES, CATEGORY_LABELS } from '../../base/protocol/categories';
import { formatBytes } from '../../base/units/bytes';

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
  const cats = CATEGORIES.filter((c) => (ctx.categories?.[c] ?? 0) > 0);
  if (cats.length) {
    out.push(`| By category at peak | ${cats.map((c) => `${CATEGORY_LABELS[c]} ${formatBytes(ctx.categories?.[c] ?? 0)}`).join(' · ')} |`);
  }
  out.push(`| Inclusive at peak | ${formatBytes(stat.inclusiveBytesAtPeak)} |`);
  out.push(`| Total allocated | ${formatBytes(stat.totalAllocatedBytes)} |`);
  out.push(`| Allocations | ${stat.allocCount} |`);
  out.push(`| Live now | ${formatBytes(stat.liveNowBytes)} |`);
  out.push(`| From backward | ${formatBytes(stat.backwardBytesAtPeak)} (${percent(stat.backwardBytesAtPeak, stat.selfBytesAtPeak)} of self at peak) |`);
  const stacks = stat.topStacks.slice(0, ctx.maxStacks ?? 3);
  if (stacks.length > 0) {
    out.push('');
    out.push('**Top stacks at peak**');
    for (const top of stacks) {
      const stack = ctx.stack(top.stackId);
      out.push('');
      const tag = stack?.backward ? ' · backward' : '';
      out.push(`${formatBytes(top.bytesAtPeak)} · ${top.count} alloc${top.count === 1 ? '' : 's'}${tag}`);
      if (!stack || stack.frames.length === 0) {
        out.push('- (no Python frames)');
        continue;
      }
      const frames = stack.frames.slice(0, ctx.maxFrames ?? 8);
      for (const f of frames) {
        out.push(`- [${escapeMarkdown(`${baseName(f.file)}:${f.line}`)}](${openFrameUri(f.file, f.line)}) ${escapeMarkdown(f.name)}`);
      }
      if (stack.frames.length > frames.length) out.push(`- … ${stack.frames.length - frames.length} more`);
    }
  }
  return out.join('\n');
}
