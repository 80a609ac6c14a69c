// gpumem_empty_cache and gpumem_capture_snapshot: the control commands (src/core/base/control) sent to every process
// of the run followed now that can take them. The host has already asked the user to confirm (Note [Tool contract]).
import { ControlError, emptyCache, snapshot } from '../../../base/control';
import { ToolError } from './toolError';
import type { LiveProcess, LiveTarget } from './subject';

function controllable(target: LiveTarget): LiveProcess[] {
  const procs = target.processes.filter((p) => p.socket);
  if (!target.running || procs.length === 0) {
    throw new ToolError(
      `the run ${target.name} ${target.running ? 'has no process that takes commands yet (it has not initialised CUDA)' : 'has ended'}: there is no running workload to act on`,
    );
  }
  return procs;
}

function who(p: LiveProcess): { pid: number; rank?: number } {
  return { pid: p.pid, ...(p.rank !== undefined ? { rank: p.rank } : {}) };
}

function failure(e: unknown): string {
  if (e instanceof ControlError) return e.message;
  return e instanceof Error ? e.message : String(e);
}

export async function emptyCacheAnswer(target: LiveTarget): Promise<object> {
  const procs = controllable(target);
  const results = await Promise.allSettled(procs.map((p) => emptyCache(p.socket as string)));
  const rows = results.map((r, i) =>
    r.status === 'fulfilled'
      ? { ...who(procs[i]), reserved_before_bytes: r.value.reserved_before, reserved_after_bytes: r.value.reserved_after, released_bytes: Math.max(0, r.value.reserved_before - r.value.reserved_after) }
      : { ...who(procs[i]), failed: failure(r.reason) },
  );
  if (rows.every((r) => 'failed' in r)) throw new ToolError(`empty_cache failed: ${rows.map((r) => `pid ${r.pid}: ${(r as { failed: string }).failed}`).join('; ')}`);
  const released = rows.reduce((s, r) => s + ('released_bytes' in r ? r.released_bytes : 0), 0);
  return { run: target.name, released_bytes: released, processes: rows };
}

export async function snapshotAnswer(target: LiveTarget): Promise<object> {
  const procs = controllable(target);
  const results = await Promise.allSettled(procs.map((p) => snapshot(p.socket as string)));
  const rows = results.map((r, i) => (r.status === 'fulfilled' ? { ...who(procs[i]), pickle: r.value.pickle } : { ...who(procs[i]), failed: failure(r.reason) }));
  if (rows.every((r) => 'failed' in r)) throw new ToolError(`snapshot failed: ${rows.map((r) => `pid ${r.pid}: ${(r as { failed: string }).failed}`).join('; ')}`);
  return { run: target.name, snapshots: rows, next: 'pass a pickle as path to gpumem_summary or the other gpumem_ tools' };
}
