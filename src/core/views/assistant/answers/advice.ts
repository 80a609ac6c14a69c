// gpumem_advice: `gpumem advise --json` (Note [Advice honesty] in src/core/analyses/advice/index.ts), each item cut
// to its action, prediction, confidence, first evidence and assumptions.
import path from 'node:path';
import { advise } from '../../../analyses/advice';
import type { Predicted } from '../../../base/protocol/advice';
import { POLICY_LABELS, POLICY_SOURCE_WORDS } from '../../../base/model/whatIf';
import { capacityOf } from './capacity';
import { pickDevice } from './common';
import type { Recording } from './subject';

const ITEMS_SHOWN = 8;
const EVIDENCE_SHOWN = 3;

function predicted(p: Predicted | null): object | undefined {
  if (!p) return undefined;
  return {
    ...(p.peakAllocatedBytes !== undefined ? { peak_allocated_bytes: p.peakAllocatedBytes, now_peak_allocated_bytes: p.currentPeakAllocatedBytes } : {}),
    ...(p.peakReservedBytes !== undefined ? { peak_reserved_bytes: p.peakReservedBytes, now_peak_reserved_bytes: p.currentPeakReservedBytes } : {}),
  };
}

export function adviceAnswer(rec: Recording, asked: { device?: number; capacity?: string; batches?: number[] }, other?: Recording): object {
  const { model, file } = rec;
  const device = pickDevice(model, file, asked.device);
  const b = asked.batches;
  const a = advise(model, device, {
    capacityBytes: capacityOf(asked.capacity),
    file: path.basename(file),
    ...(b ? { batch: b[0] } : {}),
    ...(other ? { other: { model: other.model, file: path.basename(other.file), ...(b ? { batch: b[1] } : {}) } } : {}),
  });
  const fit = a.batchFit;
  return {
    file,
    ...(rec.note ? { about: rec.note } : {}),
    ...(other ? { other_file: other.file } : {}),
    device,
    ran_under: `${POLICY_LABELS[a.ownPolicy]} (per ${POLICY_SOURCE_WORDS[a.ownPolicySource]})`,
    recorded_peak_allocated_bytes: a.recordedPeakAllocatedBytes,
    recorded_peak_reserved_bytes: a.recordedPeakReservedBytes,
    ...(a.capacityBytes !== null ? { capacity_bytes: a.capacityBytes } : {}),
    items: a.items.slice(0, ITEMS_SHOWN).map((i) => {
      const p = predicted(i.predicted);
      return {
        kind: i.kind,
        title: i.title,
        do: i.action,
        confidence: i.confidence,
        ...(p ? { predicted: p } : {}),
        evidence: i.evidence.slice(0, EVIDENCE_SHOWN),
        assumes: i.assumptions,
        ...(i.apply ? { apply: i.apply } : {}),
      };
    }),
    ...(a.items.length > ITEMS_SHOWN ? { more_items: a.items.length - ITEMS_SHOWN, more_items_kinds: [...new Set(a.items.slice(ITEMS_SHOWN).map((i) => i.kind))] } : {}),
    ...(a.items.length === 0 ? { nothing_to_advise: 'nothing this data shows is worth changing' } : {}),
    not_offered: a.notOffered,
    ...(fit
      ? {
          batch_fit: {
            runs: fit.runs.map((r) => ({ file: r.file, batch: r.batch, peak_allocated_bytes: r.peakAllocatedBytes, peak_reserved_bytes: r.peakReservedBytes })),
            per_sample_allocated_bytes: fit.perSampleAllocatedBytes,
            fixed_allocated_bytes: fit.fixedAllocatedBytes,
            capacity_bytes: fit.capacityBytes,
            usable_bytes: fit.usableBytes,
            largest_batch_that_fits: fit.maxBatch,
            ...(fit.predictedPeakReservedBytes !== null ? { predicted_peak_reserved_bytes: fit.predictedPeakReservedBytes } : {}),
          },
        }
      : {}),
  };
}
