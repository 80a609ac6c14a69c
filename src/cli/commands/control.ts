// `gpumem ping | empty-cache | snapshot`: talk to running workloads through their control sockets.
import * as path from 'node:path';
import { emptyCache, ping, snapshot, ControlError } from '../../core/base/control';
import { listProcesses, listSessionFolders, liveProcesses, type ProcInfo } from '../../core/base/sessionFolder';
import { formatBytes } from '../../core/base/units/bytes';
import { int, parseArgs, str, UsageError } from './args';

const SPEC = {
  session: { value: true },
  pid: { value: true },
  out: { value: true },
  json: {},
  help: {},
  h: {},
} as const;

export type ControlCommand = 'ping' | 'empty-cache' | 'snapshot';

export interface ControlDeps {
  stdout?: (s: string) => void;
  stderr?: (s: string) => void;
}

/** The processes a control command addresses: --session's live ones, --pid's, or the newest live session's. */
export function selectProcesses(command: string, session: string | undefined, pid: number | undefined, root: string): ProcInfo[] {
  if (session) {
    const all = listProcesses(session);
    if (all.length === 0) {
      throw new UsageError(`no workload process has used CUDA in ${session} yet (no proc-*.json): wait for it to start, or check the folder`, command);
    }
    const live = liveProcesses(session).filter((p) => pid === undefined || p.pid === pid);
    if (live.length === 0) {
      throw new UsageError(pid === undefined ? `every workload process of ${session} has exited` : `no running process with pid ${pid} in ${session}`, command);
    }
    return live;
  }
  for (const dir of listSessionFolders(root)) {
    const live = liveProcesses(dir).filter((p) => pid === undefined || p.pid === pid);
    if (live.length) return live;
  }
  throw new UsageError(
    pid === undefined
      ? `no running workload under ${root}: start one with \`gpumem run\`, or pass --session DIR`
      : `no running workload with pid ${pid} under ${root}: pass --session DIR (or --out ROOT) to look elsewhere`,
    command,
  );
}

export async function runControl(command: ControlCommand, argv: string[], deps: ControlDeps = {}): Promise<number> {
  const p = parseArgs(command, argv, SPEC);
  if (p.options.has('help') || p.options.has('h')) return -1;
  if (p.positionals.length) throw new UsageError(`unexpected argument "${p.positionals[0]}"`, command);
  const out = deps.stdout ?? ((s: string) => process.stdout.write(s));
  const err = deps.stderr ?? ((s: string) => process.stderr.write(s));
  const root = path.resolve(str(p, 'out') ?? '.gpumem');
  const procs = selectProcesses(command, str(p, 'session'), int(p, 'pid', command), root);
  const json = p.options.has('json');
  let status = 0;
  for (const proc of procs) {
    const who = `pid ${proc.pid} rank ${proc.rank}`;
    try {
      if (command === 'ping') {
        const r = await ping(proc.socket!);
        if (json) out(JSON.stringify(r) + '\n');
        else {
          const devs = r.devices.map((d) => `cuda:${d.index} allocated ${formatBytes(d.allocated)}, reserved ${formatBytes(d.reserved)}`);
          out(`${who}: ${devs.length ? devs.join('; ') : 'no device in use'}\n`);
        }
      } else if (command === 'empty-cache') {
        const r = await emptyCache(proc.socket!);
        if (json) out(JSON.stringify({ pid: proc.pid, rank: proc.rank, ...r }) + '\n');
        else {
          out(`${who}: reserved ${formatBytes(r.reserved_before)} → ${formatBytes(r.reserved_after)} (released ${formatBytes(r.reserved_before - r.reserved_after)})\n`);
        }
      } else {
        const r = await snapshot(proc.socket!);
        out(json ? JSON.stringify({ pid: proc.pid, rank: proc.rank, ...r }) + '\n' : `${r.pickle}\n`);
      }
    } catch (e) {
      if (!(e instanceof ControlError)) throw e;
      err(`gpumem ${command}: ${who}: ${e.message}\n`);
      status = 1;
    }
  }
  return status;
}
