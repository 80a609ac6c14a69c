// What every answer shares: the device asked about, times in seconds and steps, categories as `*_bytes` fields.
import type { CategoryBytes, CategoryMoment, Model } from '../../../base/model/types';
import { CATEGORIES } from '../../../base/protocol/categories';
import { defaultDevice } from '../../../analyses/replay';
import { jsonSeconds, type TimeBase } from '../../../analyses/steps/timebase';
import { ToolError } from './toolError';

/** The device asked for, or the default one (the first with allocations); a ToolError when the file has no such device. */
export function pickDevice(model: Model, file: string, asked?: number): number {
  const devices = model.devices();
  const device = asked ?? defaultDevice(model);
  if (device === undefined) throw new ToolError(`${file} records no device memory (no allocation, state or OOM): there is nothing to answer from`);
  if (!devices.includes(device)) throw new ToolError(`${file} has no device ${device}; its devices: ${devices.join(', ')}`);
  return device;
}

/** Where in the run a moment is: seconds since the first allocation and the step in progress (Note [Time origin]). */
export function when(time: TimeBase, tUs: number): { at_s: number; step?: number } {
  const step = time.stepAt(tUs);
  return { at_s: jsonSeconds(time.seconds(tUs)), ...(step !== undefined ? { step } : {}) };
}

/** `{parameter_bytes: …, gradient_bytes: …}` in the categories' order, zero categories left out. */
export function categoryFields(bytes: Partial<CategoryBytes> | undefined): Record<string, number> {
  const out: Record<string, number> = {};
  for (const c of CATEGORIES) if (bytes?.[c]) out[`${c}_bytes`] = bytes[c] as number;
  return out;
}

/** The lines holding the most at a moment, with what each holds by category. */
export function momentLines(m: CategoryMoment, top: number): { file: string; line: number; bytes: number; by_category: Record<string, number> }[] {
  return (m.lines ?? [])
    .map((l) => ({ file: l.file, line: l.line, bytes: CATEGORIES.reduce((s, c) => s + (l.bytes[c] ?? 0), 0), by_category: categoryFields(l.bytes) }))
    .filter((l) => l.bytes > 0)
    .sort((a, b) => b.bytes - a.bytes || a.file.localeCompare(b.file) || a.line - b.line)
    .slice(0, top);
}

/** A share of a whole as a percentage with one decimal (0 when the whole is 0). */
export function percent(part: number, whole: number): number {
  return whole > 0 ? Math.round((1000 * part) / whole) / 10 : 0;
}

const COMMAND_CHARS = 300;

/** The command line, cut: a torchrun line with dozens of flags would cost more than the rest of the answer. */
export function commandLine(argv: readonly string[]): string {
  const s = argv.join(' ');
  return s.length > COMMAND_CHARS ? `${s.slice(0, COMMAND_CHARS)}…` : s;
}
