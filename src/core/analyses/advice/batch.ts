// Batch-size advice from two measurements: the largest batch that fits the device.
//
// Note [Batch prediction]: two runs of the same script at batch sizes b1 ≠ b2 give the line
//   peak(b) = fixed + b · per_sample
// through their peak allocated (and, separately, through their peak reserved). The largest batch that fits
// is the largest b whose predicted peak reserved stays within the usable capacity; peak reserved is the larger
// of its own line and the allocated line times the larger reserved/allocated ratio of the two runs:
//   usable = capacity − what the device holds outside the allocator (CUDA context, cuBLAS/cuDNN workspaces:
//            NVML's device used − reserved at the peak, when the capture has samples; else 0 when --capacity
//            was given, else an assumed 1 GiB) − a margin of MARGIN of the capacity (fragmentation grows with
//            larger tensors in ways a line through two points does not see).
// One run cannot tell fixed from per-sample memory: the capture does not record the batch of each step, so a
// run whose steps vary the batch is not used either; the batch of each run comes from --batches or from the
// run's own command line (`--batch N`, `--batch-size N`, `--bs N`). Activations of a transformer grow
// linearly with the batch at a fixed sequence length; attention without a fused kernel grows with the square
// of the sequence length, so the two runs must use the same sequence length (the advice says so).
import { formatBytes } from '../../base/units/bytes';
import type { Model } from '../../base/model/types';
import type { BatchFit, BatchRun } from '../../base/protocol/advice';

export const MARGIN = 0.03;
export const ASSUMED_OUTSIDE_BYTES = 1024 ** 3;

const BATCH_FLAG = /^--?(?:batch(?:[-_]?size)?|bs|b)(?:=(\d+))?$/i;

/** The batch size from a command line (`--batch 8`, `--batch-size=8`, `--bs 8`, `-b 8`), or undefined. */
export function batchFromArgv(argv: readonly string[] | undefined): number | undefined {
  if (!argv) return undefined;
  for (let i = 0; i < argv.length; i++) {
    const m = BATCH_FLAG.exec(argv[i]);
    if (!m) continue;
    const v = m[1] ?? argv[i + 1];
    if (v !== undefined && /^\d+$/.test(v) && Number(v) > 0) return Number(v);
  }
  return undefined;
}

export function batchRun(model: Model, device: number, file: string, batch: number, peakNotFromAllocator?: number): BatchRun {
  const cur = model.current(device);
  const total = model.fileInfo().devices.find((d) => d.index === device)?.totalBytes ?? cur.deviceTotalBytes;
  return {
    file,
    batch,
    peakAllocatedBytes: cur.peakAllocatedBytes,
    peakReservedBytes: cur.peakReservedBytes,
    ...(peakNotFromAllocator !== undefined ? { outsideBytes: peakNotFromAllocator } : {}),
    ...(total ? { deviceTotalBytes: total } : {}),
  };
}

export function fitBatch(a: BatchRun, b: BatchRun, capacityBytes?: number): BatchFit {
  if (a.batch === b.batch) throw new Error(`both runs have batch ${a.batch}: the line needs two different batch sizes`);
  const [lo, hi] = a.batch < b.batch ? [a, b] : [b, a];
  const db = hi.batch - lo.batch;
  const perA = (hi.peakAllocatedBytes - lo.peakAllocatedBytes) / db;
  const perR = (hi.peakReservedBytes - lo.peakReservedBytes) / db;
  const fixedA = lo.peakAllocatedBytes - lo.batch * perA;
  const fixedR = lo.peakReservedBytes - lo.batch * perR;
  const total = capacityBytes ?? hi.deviceTotalBytes ?? lo.deviceTotalBytes;
  if (total === undefined) throw new Error('neither capture records the device total; pass --capacity SIZE');
  const capacitySource = capacityBytes !== undefined ? '--capacity' : "the capture's device total";
  const sampled = [lo.outsideBytes, hi.outsideBytes].filter((x): x is number => x !== undefined);
  const [outside, outsideSource] = sampled.length
    ? [Math.max(...sampled), 'NVML device used − reserved at the peak']
    : capacityBytes !== undefined
      ? [0, '--capacity is taken as what the allocator may use']
      : [ASSUMED_OUTSIDE_BYTES, 'assumed (the capture has no NVML samples)'];
  const usable = total - outside - MARGIN * total;
  // reserved is never below allocated times the worse of the two runs' reserved/allocated ratios (a line
  // through two reserved peaks can run below the allocated one when the cache absorbed the smaller run)
  const ratio = Math.max(lo.peakReservedBytes / lo.peakAllocatedBytes, hi.peakReservedBytes / hi.peakAllocatedBytes, 1);
  const reservedAt = (n: number) => Math.max(fixedR + n * perR, ratio * (fixedA + n * perA));
  let maxBatch: number | null = null;
  if (perA > 0) {
    maxBatch = Math.max(0, Math.floor((usable / ratio - fixedA) / perA));
    if (perR > 0) maxBatch = Math.min(maxBatch, Math.max(0, Math.floor((usable - fixedR) / perR)));
  }
  return {
    runs: [lo, hi],
    perSampleAllocatedBytes: perA,
    fixedAllocatedBytes: fixedA,
    perSampleReservedBytes: perR,
    fixedReservedBytes: fixedR,
    capacityBytes: total,
    capacitySource,
    outsideBytes: outside,
    outsideSource,
    usableBytes: usable,
    maxBatch,
    predictedPeakAllocatedBytes: maxBatch === null ? null : Math.round(fixedA + maxBatch * perA),
    predictedPeakReservedBytes: maxBatch === null ? null : Math.round(reservedAt(maxBatch)),
    reservedRatio: ratio,
  };
}

export function describeFit(f: BatchFit): string[] {
  const [lo, hi] = f.runs;
  return [
    `batch ${lo.batch}: peak allocated ${formatBytes(lo.peakAllocatedBytes)}, reserved ${formatBytes(lo.peakReservedBytes)} (${lo.file})`,
    `batch ${hi.batch}: peak allocated ${formatBytes(hi.peakAllocatedBytes)}, reserved ${formatBytes(hi.peakReservedBytes)} (${hi.file})`,
    `per sample: ${formatBytes(f.perSampleAllocatedBytes)} allocated, ${formatBytes(f.perSampleReservedBytes)} reserved; fixed: ${formatBytes(f.fixedAllocatedBytes)} allocated`,
    `usable: ${formatBytes(f.usableBytes)} = ${formatBytes(f.capacityBytes)} (${f.capacitySource}) − ${formatBytes(f.outsideBytes)} outside the allocator (${f.outsideSource}) − ${(MARGIN * 100).toFixed(0)} % margin`,
  ];
}
