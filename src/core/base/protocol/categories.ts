// The snapshot panel's Categories tab (issue 17): what the memory is at the peak and at a chosen moment, the
// per-step table and the leak findings. Part of the snapshot contract (./snapshot.ts); types only.
import type { BeyondAllocated } from '../../analyses/categories';
import type { Category, CategoryBytes } from '../model/types';

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
