// The categories part of `gpumem summary`: what the memory at the peak is (Note [Categories]), and what the
// device holds beyond it, in text and in --json.
import { beyondAllocated, MODULES_ARE_CLASSES, MODULES_ARE_PATHS, type CategoryView } from '../categories';
import { CATEGORY_LABELS, shownCategories, type BeyondAllocated } from '../../base/protocol/categories';
import { formatBytes } from '../../base/units/bytes';
import type { CategoryBytes, Model } from '../../base/model/types';

export interface CategoriesJson {
  device: number;
  has_tags: boolean;
  has_phases: boolean;
  /** how activations are grouped: by module path (module marks, Note [Module paths]) or by module class */
  module_names: 'path' | 'class';
  peak: {
    time_us: number;
    allocated_bytes: number;
    reserved_bytes: number;
    bytes: CategoryBytes;
    untraced_bytes: number;
    /** of the activations, bytes kept past their backward by a container (Note [Categories] 4); only with a keeper */
    kept_activation_bytes?: number;
    activations_by_module: { module: string; bytes: number }[];
    beyond_allocated: BeyondAllocated;
  } | null;
}

// --json lists every module (a machine reads it; ResNet-50's 24.5 MiB modules tie at any cut, and a cut hid
// them from the GPU check); the text shows the top few.
export function categoriesJson(model: Model, device: number, view: CategoryView): CategoriesJson {
  const p = view.report.peak;
  const frag = p ? model.stateAt(device, p.timeUs, p.events).fragmentation : undefined;  // Note [Moment events]
  return {
    device,
    has_tags: view.report.hasTags,
    has_phases: view.report.hasPhases,
    module_names: view.report.moduleSource === 'path' ? 'path' : 'class',
    peak: p && {
      time_us: p.timeUs,
      allocated_bytes: p.allocatedBytes,
      reserved_bytes: p.reservedBytes,
      bytes: p.bytes,
      untraced_bytes: p.untracedBytes,
      ...(p.keptBytes !== undefined ? { kept_activation_bytes: p.keptBytes } : {}),
      activations_by_module: p.modules,
      beyond_allocated: beyondAllocated(p, frag),
    },
  };
}

export function categoriesText(all: readonly CategoriesJson[], topModules = 5): string[] {
  const out: string[] = [];
  for (const c of all) {
    const p = c.peak;
    if (!p || p.allocated_bytes <= 0) continue;
    out.push(`What the memory is at the peak on device ${c.device} (${formatBytes(p.allocated_bytes)} allocated):`);
    const row = (label: string, bytes: number, note = '') =>
      out.push(`  ${label.padEnd(28)} ${formatBytes(bytes).padStart(10)}${p.allocated_bytes ? `  ${pct(bytes, p.allocated_bytes).padStart(4)}` : ''}${note}`);
    for (const k of shownCategories([p.bytes])) {
      row(CATEGORY_LABELS[k], p.bytes[k]);
      if (k === 'activation' && p.kept_activation_bytes) {
        row('  kept by a container', p.kept_activation_bytes, '  saved by graphs a Python container keeps past their backward (see Leak)');
      }
    }
    if (p.untraced_bytes) row('before the trace began', p.untraced_bytes);
    if (!c.has_tags) out.push('  (no optimizer step was seen: parameters, gradients and optimizer state are counted as other)');
    if (!c.has_phases) out.push('  (no backward() was seen: activations and temporaries are counted as other)');
    const b = p.beyond_allocated;
    const causes = [
      b.cachedFreeBytes ? `${formatBytes(b.cachedFreeBytes)} in free segments` : '',
      b.splitRemainderBytes ? `${formatBytes(b.splitRemainderBytes)} split remainders` : '',
      b.pendingFreeBytes ? `${formatBytes(b.pendingFreeBytes)} awaiting streams` : '',
    ].filter(Boolean);
    out.push(`  ${'cache (reserved − allocated)'.padEnd(28)} ${formatBytes(b.cacheBytes).padStart(10)}${causes.length ? `        ${causes.join(', ')}` : ''}`);
    if (b.notFromAllocatorBytes !== undefined) {
      out.push(`  ${'not from the allocator'.padEnd(28)} ${formatBytes(b.notFromAllocatorBytes).padStart(10)}        CUDA context, libraries, other processes (device used − reserved)`);
    }
    if (p.activations_by_module.length) {
      out.push(`  Activations by module ${c.module_names} (top ${Math.min(topModules, p.activations_by_module.length)}):`);
      for (const m of p.activations_by_module.slice(0, topModules)) out.push(`    ${m.module.padEnd(40)} ${formatBytes(m.bytes).padStart(10)}`);
      out.push(`  ${c.module_names === 'path' ? MODULES_ARE_PATHS : MODULES_ARE_CLASSES}`);
    }
  }
  return out;
}

function pct(part: number, whole: number): string {
  return `${Math.round((100 * part) / whole)}%`;
}
