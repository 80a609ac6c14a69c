// `gpumem summary FILE --json`'s document: the summary of a model plus who, when and how complete.
// ./index.ts (summarizeFile) adds what-if, categories and steps and renders it with ./report.ts.
import type { DeviceSummary, Model, SnapshotSummary } from '../../base/model/types';
import type { ReplayCheck } from '../../base/model/whatIf';
import type { BackwardPeakJson } from './backward';
import { identityOf, type Identity } from './identity';
import { integrityOf, type Integrity } from './integrity';
import { oomRows, type OomRow } from './ooms';
import { jsonSeconds, timeBaseOf, type StepSource, type TimeBase } from '../steps/timebase';

/**
 * A device of `gpumem summary --json`: the figures, its name, and the peak's time in seconds/steps; summarizeFile adds
 * the backward peak (Note [Backward peak in the summary] in ./backward.ts).
 */
export interface SummaryDevice extends DeviceSummary, Partial<BackwardPeakJson> {
  name?: string;
  total_bytes?: number;
  pci_bus_id?: string;
  /** seconds since the time origin (Note [Time origin]); null when the device has neither a trace nor figures */
  peak_t_s: number | null;
  /** the step at the peak (Note [Steps]), null when no marker gives one */
  peak_step: number | null;
  /** the time and step of end_sample_us (PyTorch's figures at the end), where the device has a trace to time it by */
  end_sample_t_s?: number | null;
  end_sample_step?: number | null;
  /** the replay of the policy that ran against the recorded peak (Note [Replay check]; ./replayCheck.ts adds it) */
  replay_check?: ReplayCheck;
}

/** Allocations made under one memory label (`_set_memory_metadata`), from the trace entries' user_metadata. */
export interface UserMetadataSummary {
  device: number;
  label: string;
  allocations: number;
  allocated_bytes: number;
  bytes_at_peak: number;
}

/** `gpumem summary FILE --json`: the document with identity, time, integrity and OOMs added. */
export interface SummaryDocument extends SnapshotSummary {
  devices: SummaryDevice[];
  identity: Identity;
  time: { origin_time_us: number | null; unit: 's since the first allocator event'; step_source: StepSource | null };
  integrity: Integrity;
  ooms: OomRow[];
  /** memory labels, when the trace has any (a pickle's user_metadata, a capture's REC_USER_METADATA) */
  user_metadata?: UserMetadataSummary[];
}

export function summaryDocument(model: Model, time: TimeBase = timeBaseOf(model)): SummaryDocument {
  const base = model.summary();
  const identity = identityOf(model);
  const info = model.fileInfo();
  const devices = base.devices.map((d): SummaryDevice => {
    const id = identity.devices.find((x) => x.index === d.device);
    const out: SummaryDevice = { ...d, peak_t_s: null, peak_step: null };
    if (id) {
      out.name = id.name;
      out.total_bytes = id.total_bytes;
      if (id.pci_bus_id) out.pci_bus_id = id.pci_bus_id;
    }
    // a device of figures only is timed by its samples (Note [Time origin]): the peak is the sample that first said it
    if (d.events > 0 || d.end_sample_us !== undefined) {
      out.peak_t_s = jsonSeconds(time.seconds(d.peak_at_time_us));
      out.peak_step = time.stepAt(d.peak_at_time_us) ?? null;
    }
    if (d.end_sample_us !== undefined) {
      out.end_sample_t_s = jsonSeconds(time.seconds(d.end_sample_us));
      out.end_sample_step = time.stepAt(d.end_sample_us) ?? null;
    }
    return out;
  });
  const labels = model.userMetadata().map((r): UserMetadataSummary => ({
    device: r.device,
    label: r.label,
    allocations: r.allocations,
    allocated_bytes: r.allocatedBytes,
    bytes_at_peak: r.bytesAtPeak,
  }));
  return {
    ...base,
    devices,
    identity,
    time: { origin_time_us: info.originUs, unit: 's since the first allocator event', step_source: time.stepSource ?? null },
    integrity: integrityOf(model, time),
    ooms: oomRows(model, time),
    ...(labels.length ? { user_metadata: labels } : {}),
  };
}
