// What memory is, in the words host and page share: the categories in their order with their labels,
// and the snapshot panel's Categories tab: the peak and a chosen moment, the per-step table and the leak findings.
// Part of the snapshot contract (./snapshot.ts); the live panel's categories use the same words (./live.ts).
import type { Category, CategoryBytes } from '../model/types';

export type { Category, CategoryBytes } from '../model/types';

// Note [Tensor bytes] (native/addon/src/categories.cpp): every category holds its tensors' bytes, the same in both
// allocator modes; what blocks hold beyond their tensors (512 B rounding, PyTorch's unsplit remainders) is the last
// row, so that the rows sum to allocated. Weights are parameters and buffers, with or without an optimizer.
export const CATEGORIES: readonly Category[] = [
  'parameter',
  'buffer',
  'gradient',
  'optimizer_state',
  'activation',
  'kv_cache',
  'temporary',
  'other',
  'block_overhead',
];

/** Categories a run often has none of (a training run has no KV cache, a ResNet no buffers but BatchNorm's): tables
 * and legends show them only where they hold bytes. */
export const OPTIONAL_CATEGORIES: ReadonlySet<Category> = new Set<Category>(['buffer', 'kv_cache', 'block_overhead']);

/** The categories to show for rows of bytes: every other one, and an optional one where some row holds bytes of it. */
export function shownCategories(rows: readonly (Partial<Record<Category, number>> | undefined)[]): Category[] {
  return CATEGORIES.filter((c) => !OPTIONAL_CATEGORIES.has(c) || rows.some((r) => (r?.[c] ?? 0) > 0));
}

export const CATEGORY_LABELS: Record<Category, string> = {
  parameter: 'parameters',
  buffer: 'buffers',
  gradient: 'gradients',
  optimizer_state: 'optimizer state',
  activation: 'activations',
  kv_cache: 'KV cache',
  temporary: 'temporaries',
  other: 'other',
  block_overhead: 'block overhead',
};

/** Short column headings (tables) */
export const CATEGORY_HEADERS: Record<Category, string> = {
  parameter: 'params',
  buffer: 'buffers',
  gradient: 'grads',
  optimizer_state: 'optimizer',
  activation: 'activations',
  kv_cache: 'KV cache',
  temporary: 'temporary',
  other: 'other',
  block_overhead: 'overhead',
};

/** Everything the device holds beyond allocated, split by cause: the allocator's cache and what is not its. */
export interface BeyondAllocated {
  /** reserved − allocated */
  cacheBytes: number;
  /** of the cache: free segments (empty_cache() releases them), split remainders, frees awaiting streams */
  cachedFreeBytes?: number;
  splitRemainderBytes?: number;
  pendingFreeBytes?: number;
  /** device used − reserved (CUDA context, cuBLAS/cuDNN workspaces, NCCL, other processes) */
  notFromAllocatorBytes?: number;
  deviceUsedBytes?: number;
}

export interface CategoryMomentView {
  /** "peak", "step 3 end", "12.345 s (step 4)" */
  label: string;
  timeUs: number;
  allocatedBytes: number;
  reservedBytes: number;
  bytes: CategoryBytes;
  /** allocated before the trace began (a pickle's start state): no category */
  untracedBytes: number;
  /** activations by module path (or class, see moduleSource), largest first */
  modules: { module: string; bytes: number }[];
  /** cache by cause and what lies outside the allocator (device used − reserved) */
  beyond: BeyondAllocated;
}

export interface StepRowView {
  step: number;
  endUs: number;
  peakAllocatedBytes: number;
  allocatedAtEndBytes: number;
  reservedAtEndBytes: number;
  categories?: CategoryBytes;
}

export interface LeakView {
  file: string;
  displayFile: string;
  line: number;
  growthPerStepBytes: number;
  fromStep: number;
  toStep: number;
  bytesAtLastEnd: number;
  category?: Category;
  /** the finding in one sentence, as the summary words it (with its keeper, when there is one) */
  sentence: string;
  /** the line that keeps the memory alive (Note [Leak keeper]); the sentence's words about it start at `keeperText` */
  keeper?: {
    file: string;
    displayFile: string;
    line: number;
    container: string;
    tensors: number;
    bytes: number;
    /** 'largest': not tied by address, the views say "probably" */
    match: 'address' | 'largest';
    /** the keeper's part of the sentence ("kept alive by history (…), stored at train.py:42: …") */
    text: string;
  };
}

export interface CategoriesView {
  requestId: number;
  device: number;
  hasTags: boolean;
  hasPhases: boolean;
  moduleSource: 'path' | 'class';
  /** how the modules are grouped and what torch.compile does to them, in words */
  moduleNote: string;
  peak: CategoryMomentView | null;
  /** the asked moment (null when none was asked) */
  moment: CategoryMomentView | null;
  /** how steps were found, in words ('' when none were) */
  stepSource: string;
  steps: StepRowView[];
  leaks: LeakView[];
}
