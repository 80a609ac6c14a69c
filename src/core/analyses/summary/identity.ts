// Which process and which GPUs a file belongs to: pid, host, rank/world size (the capture header) and the
// device names (REC_DEVICE). Two ranks of one run must never read as two anonymous summaries.
import { formatBytes } from '../../base/units/bytes';
import type { DeviceIdentity, Model } from '../../base/model/types';
import { notRecorded } from './notRecorded';

/** `identity` of `gpumem summary --json` (keys absent when the file does not say). */
export interface Identity {
  pid?: number;
  host?: string;
  rank?: number;
  local_rank?: number;
  world_size?: number;
  argv?: string[];
  /** which allocator made the numbers (absent: not said, e.g. pickles and older captures) */
  allocator?: { mode: 'lens' | 'pytorch'; reason?: string };
  /** Note [Not recorded]: what the recording settings left out of this file (absent: nothing, or not said) */
  not_recorded?: string[];
  devices: { index: number; name: string; total_bytes: number; pci_bus_id?: string }[];
}

export function identityOf(model: Model): Identity {
  const h = model.header();
  const out: Identity = { devices: h.devices.map(deviceJson) };
  if (h.pid !== undefined) out.pid = h.pid;
  if (h.host !== undefined) out.host = h.host;
  if (h.rank !== undefined) out.rank = h.rank;
  if (h.localRank !== undefined) out.local_rank = h.localRank;
  if (h.worldSize !== undefined) out.world_size = h.worldSize;
  if (h.argv?.length) out.argv = h.argv;
  if (h.allocatorMode) out.allocator = { mode: h.allocatorMode, ...(h.allocatorModeReason ? { reason: h.allocatorModeReason } : {}) };
  const missing = notRecorded(h);
  if (missing.length) out.not_recorded = missing;
  return out;
}

function deviceJson(d: DeviceIdentity): Identity['devices'][number] {
  const out: Identity['devices'][number] = { index: d.index, name: d.name, total_bytes: d.totalBytes };
  if (d.pciBusId) out.pci_bus_id = d.pciBusId;
  return out;
}

/**
 * "rank 1 of 2 (local rank 1) · pid 4242 on node-a", or undefined for a file that names nothing (a pickle).
 * A world size of 1 is a single process: its rank 0 says nothing and is left out.
 */
export function processLine(id: Identity): string | undefined {
  const parts: string[] = [];
  if (id.world_size !== undefined && id.world_size > 1) {
    const local = id.local_rank !== undefined && id.local_rank !== id.rank ? ` (local rank ${id.local_rank})` : '';
    parts.push(`rank ${id.rank ?? '?'} of ${id.world_size}${local}`);
  } else if (id.rank !== undefined && id.rank > 0) {
    parts.push(`rank ${id.rank}`);
  }
  if (id.pid !== undefined) parts.push(`pid ${id.pid}${id.host ? ` on ${id.host}` : ''}`);
  else if (id.host) parts.push(`host ${id.host}`);
  return parts.length ? parts.join(' · ') : undefined;
}

/**
 * "allocator: pytorch (observed)" or "allocator: lens"; with `why`, the reason after an em dash. Undefined when
 * the file does not say (pickles, captures from before the PyTorch-allocator mode).
 */
export function allocatorLine(id: Identity, why = false): string | undefined {
  if (!id.allocator) return undefined;
  const name = id.allocator.mode === 'pytorch' ? "pytorch (observed: PyTorch's own caching allocator)" : 'lens (the lens allocator)';
  return `allocator: ${name}${why && id.allocator.reason ? ` — ${id.allocator.reason}` : ''}`;
}

/** "cuda:0 NVIDIA H100 80GB HBM3 (79.2 GiB, PCI 0000:3B:00.0)", or "cuda:0" when the file has no name. */
export function deviceLine(id: Identity, device: number): string {
  const d = id.devices.find((x) => x.index === device);
  if (!d) return `cuda:${device}`;
  const extra = [d.total_bytes > 0 ? formatBytes(d.total_bytes) : '', d.pci_bus_id ? `PCI ${d.pci_bus_id}` : ''].filter(Boolean).join(', ');
  return `cuda:${device} ${d.name}${extra ? ` (${extra})` : ''}`;
}
