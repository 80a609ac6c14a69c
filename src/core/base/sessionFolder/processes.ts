// Discovering the workload processes of a session folder.
//
// The session folder contract (native/python/README.md) : one capture per process, capture-<pid>.gpumem,
// and a proc-<pid>.json {pid, rank, capture, socket} written by the bootstrap when it installs the
// allocator. The control socket may live outside the folder (short sun_path), so proc-*.json is the only
// place its path is known.
//
// Note [Captures without proc files]: a session folder copied from elsewhere (or a process that died
// before writing its proc file) may hold capture-*.gpumem alone; those are listed without a socket, so
// they can be viewed but not controlled.
import * as fs from 'node:fs';
import * as path from 'node:path';

export interface ProcessEntry {
  pid: number;
  rank?: number;
  /** absolute path of the capture file */
  capture: string;
  /** absolute path of the control socket, when known */
  socket?: string;
}

const PROC_RE = /^proc-(\d+)\.json$/;
const CAPTURE_RE = /^capture-(\d+)\.gpumem$/;

function parseProcFile(dir: string, file: string, pidFromName: number): ProcessEntry | undefined {
  let raw: unknown;
  try {
    raw = JSON.parse(fs.readFileSync(path.join(dir, file), 'utf8'));
  } catch {
    return undefined; // being written right now (or damaged): the next scan sees it whole
  }
  if (typeof raw !== 'object' || raw === null) return undefined;
  const o = raw as Record<string, unknown>;
  const pid = typeof o.pid === 'number' ? o.pid : pidFromName;
  const capture = typeof o.capture === 'string' ? path.resolve(dir, o.capture) : path.join(dir, `capture-${pid}.gpumem`);
  const entry: ProcessEntry = { pid, capture };
  if (typeof o.rank === 'number' && Number.isInteger(o.rank)) entry.rank = o.rank;
  if (typeof o.socket === 'string' && o.socket.length > 0) entry.socket = path.resolve(dir, o.socket);
  return entry;
}

/** The names in a folder; none when it cannot be read (missing, or removed while a run ends). */
export function folderNames(dir: string): string[] {
  try {
    return fs.readdirSync(dir);
  } catch {
    return [];
  }
}

/** Processes of a session folder, sorted by rank then pid. A missing folder has none. */
export function scanSessionFolder(dir: string): ProcessEntry[] {
  const names = folderNames(dir);
  const byPid = new Map<number, ProcessEntry>();
  for (const n of names) {
    const m = PROC_RE.exec(n);
    if (!m) continue;
    const e = parseProcFile(dir, n, Number(m[1]));
    if (e) byPid.set(e.pid, e);
  }
  for (const n of names) {
    const m = CAPTURE_RE.exec(n);
    if (!m) continue;
    const pid = Number(m[1]);
    if (!byPid.has(pid)) byPid.set(pid, { pid, capture: path.join(dir, n) });
  }
  return [...byPid.values()].sort((a, b) => (a.rank ?? 1e9) - (b.rank ?? 1e9) || a.pid - b.pid);
}
