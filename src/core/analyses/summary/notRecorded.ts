// Note [Not recorded]: a recording setting that leaves something out ("a setting turns that part off, and
// the panels say what is missing") is said wherever the file's figures are shown — the snapshot panel under the
// device line, the live panel, `gpumem summary` (text and --json) — so an empty lines table never reads as "no
// allocation had a line". The capture header says which settings were in force (`stacks` from the recorder,
// `module_paths`, `tags`, `events` and `record_steps` from the bootstrap); a file that does not say (a pickle, an older capture) gets no
// sentence. The switches reach the workload through both launchers (USER_ENV_SWITCHES in ../../base/settings/table.ts).
import type { CaptureHeaderInfo } from '../../base/model/types';

/** One sentence per part a setting left out of this file, in the order a reader meets them. */
export function notRecorded(
  h: Pick<CaptureHeaderInfo, 'stacks' | 'modulePaths' | 'tags' | 'events' | 'recordSteps' | 'pytorchAllocatorBackend'>,
): string[] {
  const out: string[] = [];
  if (h.events === false) {
    // Note [Figures only]: nothing per allocation at all, so the finer sentences below would only repeat it. A backend
    // of PyTorch's other than its native caching allocator (cudaMallocAsync) gives its stats only, whatever was asked.
    const backend = h.pytorchAllocatorBackend;
    const why =
      backend && backend !== 'native'
        ? `PyTorch's ${backend} backend offers its stats only, no trace of its allocations`
        : 'figures only: --figures-only or gpuMemoryLens.recordAllocations = false';
    return [
      `Allocations were not recorded one by one (${why}): allocated and reserved are PyTorch's own figures, read at ` +
        'each sample; no sizes by line, editor annotations, segments, categories or leak findings.',
    ];
  }
  if (h.recordSteps !== undefined && h.recordSteps > 0) {
    // Note [Recorded steps]: what follows is said of the steps that were recorded.
    const n = h.recordSteps;
    out.push(
      `Allocations were recorded one by one for the first ${n} step${n === 1 ? '' : 's'} only ` +
        `(--record-steps ${n} or gpuMemoryLens.recordSteps = ${n}): sizes by line, editor annotations, segments, ` +
        "categories and leak findings cover those steps; after them, allocated and reserved are PyTorch's own " +
        'figures, read at each sample.',
    );
  }
  if (h.stacks === false) {
    out.push(
      'Python lines were not recorded (stacks off: --no-stacks or gpuMemoryLens.captureStacks = false): no sizes by ' +
        `line, no editor annotations, no module paths; totals${h.tags === false ? ' and segments' : ', segments and categories'} are complete.`,
    );
  } else if (h.modulePaths === false) {
    out.push('Module paths were off (GPUMEM_MODULE_PATHS=0): activations are grouped by module class, not by module path.');
  }
  if (h.tags === false) {
    out.push(
      'Parameters, gradients and optimizer state were not tagged (GPUMEM_TAGS=0): the categories count their bytes ' +
        'as other memory.',
    );
  }
  return out;
}
