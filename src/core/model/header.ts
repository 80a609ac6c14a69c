// A capture's header JSON (written by the bootstrap and the allocator's writer) → CaptureHeaderInfo.
// Note [Lenient header]: every key is optional and the workload's own fields may sit at the top level or
// under "header"; numbers that are not numbers are dropped rather than shown wrong. Pickles have no
// header: their JSON is "{}".
import type { CaptureHeaderInfo } from './types';

type Json = Record<string, unknown>;

const num = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

export function headerInfoFromJson(json: string): CaptureHeaderInfo {
  let raw: Json = {};
  try {
    const parsed: unknown = JSON.parse(json || '{}');
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) raw = parsed as Json;
  } catch {
    // A damaged header is reported by the reader as a problem; show what we can.
  }
  const inner = raw.header && typeof raw.header === 'object' ? { ...(raw.header as Json), ...raw } : raw;
  const devices = Array.isArray(inner.devices) ? (inner.devices as unknown[]) : [];
  return {
    pid: num(inner.pid),
    rank: num(inner.rank),
    worldSize: num(inner.world_size ?? inner.worldSize),
    host: str(inner.host),
    argv: Array.isArray(inner.argv) ? (inner.argv as unknown[]).filter((a): a is string => typeof a === 'string') : undefined,
    torchVersion: str(inner.torch_version ?? inner.torchVersion),
    devices: devices
      .filter((d): d is Json => !!d && typeof d === 'object')
      .map((d, i) => ({
        index: num(d.index) ?? i,
        name: str(d.name) ?? `cuda:${num(d.index) ?? i}`,
        totalBytes: num(d.total_memory ?? d.total_bytes ?? d.totalBytes ?? d.total) ?? 0,
      })),
  };
}
