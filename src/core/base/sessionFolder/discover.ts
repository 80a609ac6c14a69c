// Finding the running workload processes of a session folder and their control sockets: each process that
// initialised CUDA writes proc-<pid>.json into it (contract: native/python/README.md). Strict, for the control
// commands (a proc file they cannot read whole is skipped); ./processes.ts lists captures for viewing.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { folderNames } from './processes';

export interface ProcInfo {
  pid: number;
  rank: number;
  localRank: number;
  worldSize: number;
  capture: string;
  /** null when the control server could not start in that process. */
  socket: string | null;
  argv: string[];
  /** The proc file itself. */
  file: string;
}

const PROC_FILE = /^proc-(\d+)\.json$/;

/** Parses one proc file; throws with the file name when it is not a valid proc record. */
export function readProcFile(file: string): ProcInfo {
  const raw = JSON.parse(fs.readFileSync(file, 'utf8')) as Record<string, unknown>;
  const int = (k: string, dflt?: number): number => {
    const v = raw[k] ?? dflt;
    if (typeof v !== 'number' || !Number.isInteger(v)) throw new Error(`${file}: "${k}" must be an integer.`);
    return v;
  };
  if (typeof raw.capture !== 'string') throw new Error(`${file}: "capture" must be a path.`);
  if (raw.socket !== null && typeof raw.socket !== 'string') throw new Error(`${file}: "socket" must be a path or null.`);
  return {
    pid: int('pid'),
    rank: int('rank', 0),
    localRank: int('local_rank', 0),
    worldSize: int('world_size', 1),
    capture: raw.capture,
    socket: (raw.socket as string | null) ?? null,
    argv: Array.isArray(raw.argv) ? raw.argv.map(String) : [],
    file,
  };
}

/** Every process of the session, ordered by rank then pid. Unreadable proc files are skipped (a writer may be mid-rename). */
export function listProcesses(sessionDir: string): ProcInfo[] {
  let names: string[];
  try {
    names = fs.readdirSync(sessionDir);
  } catch (e) {
    throw new Error(`Cannot read the session folder ${sessionDir}: ${(e as Error).message}`);
  }
  const out: ProcInfo[] = [];
  for (const name of names) {
    if (!PROC_FILE.test(name)) continue;
    try {
      out.push(readProcFile(path.join(sessionDir, name)));
    } catch {
      // A half-written or foreign file; the writer renames atomically, so the next poll sees it whole.
    }
  }
  return out.sort((a, b) => a.rank - b.rank || a.pid - b.pid);
}

/** Whether a process with this pid exists (EPERM: it exists but belongs to someone else). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Processes of the session that are still running and have a control socket. */
export function liveProcesses(sessionDir: string): ProcInfo[] {
  return listProcesses(sessionDir).filter((p) => p.socket !== null && isAlive(p.pid));
}

/** Session folders under `root`, newest first (folder names start with a sortable timestamp). */
export function listSessionFolders(root: string): string[] {
  return folderNames(root)
    .filter((n) => /^\d{8}-\d{6}-/.test(n))
    .map((n) => path.join(root, n))
    .filter((d) => {
      try {
        return fs.statSync(d).isDirectory();
      } catch {
        return false;
      }
    })
    .sort()
    .reverse();
}
