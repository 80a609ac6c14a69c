// Categories of one device (Note [Categories] in native/addon/src/categories.cpp): at the peak, at every step
// end, per line, and what lies beyond allocated. Shared by `gpumem summary`, the hover and the snapshot panel.
import type { Category, CategoryBytes, CategoryMoment, CategoryReport, Fragmentation, Model } from '../../base/model/types';
import { CATEGORIES, type BeyondAllocated } from '../../base/protocol/categories';
import type { Steps } from '../steps';

/** What the UI says about how precise the categories are (Note [Categories]: module classes, not paths). */
export const MODULES_ARE_CLASSES =
  'Activations are grouped by module class (the innermost forward() that made them), not by module path; ' +
  'under torch.compile a compiled region counts as its outermost module.';

/** The same, for captures with module marks (Note [Module paths]). */
export const MODULES_ARE_PATHS =
  'Activations are grouped by module path (the innermost module whose forward made them, the root by its class); ' +
  'a torch.compile\'d module runs no hooks inside: its activations count under the compiled module.';

/** The sentence for a report's module grouping. */
export function moduleNote(report: Pick<CategoryReport, 'moduleSource'>): string {
  return report.moduleSource === 'path' ? MODULES_ARE_PATHS : MODULES_ARE_CLASSES;
}

export interface CategoryView {
  report: CategoryReport;
  /** the moments of `report.moments` are these step ends, in order */
  stepEndsUs: number[];
}

export function categoryView(model: Model, device: number, steps: Steps): CategoryView {
  const stepEndsUs = steps.steps.map((s) => s.endUs);
  return { report: model.categories(device, stepEndsUs, true), stepEndsUs };
}

/** The category holding most of `bytes` (ties: the earlier in CATEGORIES), or undefined for none. Block overhead is
 * what a line's blocks hold beyond its tensors (a 4 B loss in a 512 B block): it names the line only when the line
 * holds no tensor bytes at all. */
export function dominantCategory(bytes: Partial<CategoryBytes> | undefined): Category | undefined {
  let best: Category | undefined;
  for (const c of CATEGORIES)
    if (c !== 'block_overhead' && (bytes?.[c] ?? 0) > (best ? (bytes?.[best] ?? 0) : 0)) best = c;
  return best ?? ((bytes?.block_overhead ?? 0) > 0 ? 'block_overhead' : undefined);
}

export function beyondAllocated(m: CategoryMoment, f?: Fragmentation): BeyondAllocated {
  const out: BeyondAllocated = { cacheBytes: Math.max(0, m.reservedBytes - m.allocatedBytes) };
  if (f) {
    out.cachedFreeBytes = f.cachedFreeBytes;
    out.splitRemainderBytes = f.splitRemainderBytes;
    out.pendingFreeBytes = f.pendingFreeBytes;
  }
  if (m.notFromAllocatorBytes !== undefined) out.notFromAllocatorBytes = m.notFromAllocatorBytes;
  if (m.deviceUsedBytes !== undefined) out.deviceUsedBytes = m.deviceUsedBytes;
  return out;
}

/** Activation bytes of one line that a container keeps past their backward (Note [Categories] 4), 0 when none. */
export function lineKeptBytes(m: CategoryMoment | null | undefined, file: string, line: number): number {
  return m?.lines?.find((l) => l.file === file && l.line === line)?.keptBytes ?? 0;
}

/** Bytes per category of one line at a moment (a line absent from the moment holds nothing then). */
export function lineCategories(m: CategoryMoment | null | undefined, file: string, line: number): Partial<CategoryBytes> | undefined {
  return m?.lines?.find((l) => l.file === file && l.line === line)?.bytes;
}
