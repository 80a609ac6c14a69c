// A capture's header JSON (written by the allocator's writer, with the bootstrap's keys merged in at the top
// level: FORMAT.md "Header JSON") → CaptureHeaderInfo.
// Note [Header keys]: only the spellings a writer emits are read (`pid`, `rank`, `local_rank`, `world_size`,
// `host`, `argv`, `torch_version`, `allocator_mode`, `allocator_mode_reason`, `stacks`, `module_paths`, `tags`, `events`, `record_steps`, `pytorch_allocator_backend`); a value of the wrong type is dropped rather than shown wrong. Devices are
// not in the header (it is written before CUDA exists): they come from the capture's REC_DEVICE records.
// Pickles have no header: their JSON is "{}".
import type { CaptureHeaderInfo, DeviceIdentity } from './types';

type Json = Record<string, unknown>;

const int = (v: unknown): number | undefined => (typeof v === 'number' && Number.isInteger(v) ? v : undefined);
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
const bool = (v: unknown): boolean | undefined => (typeof v === 'boolean' ? v : undefined);

export function headerInfoFromJson(json: string, devices: DeviceIdentity[] = []): CaptureHeaderInfo {
  let raw: unknown = {};
  try {
    raw = JSON.parse(json || '{}');
  } catch {
    // A damaged header is reported by the reader as a problem (kind "header"); show what we can.
  }
  return headerInfoOf(raw, devices);
}

/** The same from the header already parsed (a capture's index hands it over parsed). */
export function headerInfoOf(parsed: unknown, devices: DeviceIdentity[] = []): CaptureHeaderInfo {
  const raw: Json = parsed && typeof parsed === 'object' && !Array.isArray(parsed) ? (parsed as Json) : {};
  return {
    pid: int(raw.pid),
    rank: int(raw.rank),
    localRank: int(raw.local_rank),
    worldSize: int(raw.world_size),
    host: str(raw.host),
    argv: Array.isArray(raw.argv) ? (raw.argv as unknown[]).filter((a): a is string => typeof a === 'string') : undefined,
    torchVersion: str(raw.torch_version),
    allocatorMode: raw.allocator_mode === 'lens' || raw.allocator_mode === 'pytorch' ? raw.allocator_mode : undefined,
    allocatorModeReason: str(raw.allocator_mode_reason) || undefined,
    stacks: bool(raw.stacks),
    modulePaths: bool(raw.module_paths),
    tags: bool(raw.tags),
    events: bool(raw.events),
    recordSteps: int(raw.record_steps),
    pytorchAllocatorBackend: str(raw.pytorch_allocator_backend) || undefined,
    devices,
  };
}
