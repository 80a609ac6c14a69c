// What `gpumem advise` answers (src/core/analyses/advice computes it): the items with their evidence,
// predicted effect, confidence and assumptions. Part of the snapshot contract (./snapshot.ts: AdviceView), so it
// holds types only; the CLI prints the same objects as JSON.
import type { Policy, PolicySource } from '../model/whatIf';

export type Confidence = 'high' | 'medium' | 'low';

export interface AdviceItem {
  kind: AdviceKind;
  title: string;
  /** what to change, concretely */
  action: string;
  evidence: string[];
  /** the predicted peaks after the change, and the same figures before it (each pair when predicted) */
  predicted: Predicted | null;
  confidence: Confidence;
  assumptions: string[];
  /** what to change, machine-readably (the GPU check applies it) */
  apply?: { policy?: Policy; env?: string; checkpointModule?: string; batch?: number; setToNone?: boolean; file?: string; line?: number };
}

export type AdviceKind =
  | 'allocator-policy'
  | 'avoid-oom'
  | 'empty-cache-at-marker'
  | 'checkpoint'
  | 'batch-size'
  | 'measure-batch'
  | 'set-to-none'
  | 'leak';

export interface Predicted {
  peakReservedBytes?: number;
  currentPeakReservedBytes?: number;
  peakAllocatedBytes?: number;
  currentPeakAllocatedBytes?: number;
}

export interface Advice {
  device: number;
  ownPolicy: Policy;
  ownPolicySource: PolicySource;
  recordedPeakReservedBytes: number;
  capacityBytes: number | null;
  recordedPeakAllocatedBytes: number;
  items: AdviceItem[];
  notOffered: string[];
  /** the batch line when two runs were given (Note [Batch prediction]) */
  batchFit?: BatchFit;
}

export interface BatchRun {
  file: string;
  batch: number;
  peakAllocatedBytes: number;
  peakReservedBytes: number;
  /** NVML device used − reserved at the peak, when sampled */
  outsideBytes?: number;
  deviceTotalBytes?: number;
}

/** The batch line through two runs (Note [Batch prediction] in src/core/analyses/advice/batch.ts). */
export interface BatchFit {
  runs: [BatchRun, BatchRun];
  perSampleAllocatedBytes: number;
  fixedAllocatedBytes: number;
  perSampleReservedBytes: number;
  fixedReservedBytes: number;
  capacityBytes: number;
  capacitySource: string;
  outsideBytes: number;
  outsideSource: string;
  usableBytes: number;
  /** the largest batch that fits; null when per-sample memory does not grow */
  maxBatch: number | null;
  predictedPeakAllocatedBytes: number | null;
  predictedPeakReservedBytes: number | null;
  /** the larger peak reserved / peak allocated of the two runs: reserved is predicted at least allocated × it */
  reservedRatio: number;
}
