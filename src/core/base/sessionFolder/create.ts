// Session folders: one per launch, holding every process's capture, proc file and sockets.
// The layout is the contract in native/python/README.md ("Session folder contract").
import * as fs from 'node:fs';
import * as path from 'node:path';

export interface SessionFolder {
  /** Absolute path of the session folder (mode 0700). */
  dir: string;
  /** Sanitised name used in the folder name. */
  name: string;
  created: Date;
}

export interface SessionFolderInfo {
  command: string[];
  cwd: string;
}

const MAX_NAME = 40;

/** A file-system-safe slug of `name` (letters, digits, `.`, `_`, `-`), never empty. */
export function sessionSlug(name: string): string {
  const base = path.basename(name).replace(/\.py$/i, '');
  const slug = base.replace(/[^A-Za-z0-9._-]+/g, '-').replace(/^[-.]+|-+$/g, '').slice(0, MAX_NAME);
  return slug || 'session';
}

function stamp(d: Date): string {
  const p = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}${p(d.getMonth() + 1)}${p(d.getDate())}-${p(d.getHours())}${p(d.getMinutes())}${p(d.getSeconds())}`;
}

/**
 * Creates `<root>/<YYYYMMDD-HHMMSS>-<name>/` with mode 0700 (the folder holds control sockets that can
 * empty a workload's cache, so nobody else may reach them). Two launches in the same second get
 * `-2`, `-3`… suffixes instead of sharing a folder.
 */
export function createSessionFolder(root: string, name: string, info?: SessionFolderInfo, now: Date = new Date()): SessionFolder {
  if (!root) throw new Error('createSessionFolder: no session root given (set gpuMemoryLens.sessionRoot or pass --out DIR).');
  const absRoot = path.resolve(root);
  try {
    fs.mkdirSync(absRoot, { recursive: true });
  } catch (e) {
    throw new Error(`Cannot create the session root ${absRoot}: ${(e as Error).message}. Choose a writable folder.`);
  }
  const slug = sessionSlug(name);
  const base = `${stamp(now)}-${slug}`;
  for (let i = 1; i < 1000; i++) {
    const dir = path.join(absRoot, i === 1 ? base : `${base}-${i}`);
    try {
      fs.mkdirSync(dir, { mode: 0o700 });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'EEXIST') continue;
      throw new Error(`Cannot create the session folder ${dir}: ${(e as Error).message}.`);
    }
    fs.chmodSync(dir, 0o700); // mkdir's mode is filtered by the umask
    if (info) writeSessionFolderInfo(dir, slug, now, info);
    return { dir, name: slug, created: now };
  }
  throw new Error(`Too many session folders named ${base} in ${absRoot}; remove old ones.`);
}

function writeSessionFolderInfo(dir: string, name: string, created: Date, info: SessionFolderInfo): void {
  const doc = { version: 1, name, created: created.toISOString(), command: info.command, cwd: info.cwd };
  fs.writeFileSync(path.join(dir, 'session.json'), JSON.stringify(doc, null, 2) + '\n', { mode: 0o600 });
}

/** The capture file a workload process with this pid writes (contract; the proc file is authoritative). */
export function capturePath(sessionDir: string, pid: number): string {
  return path.join(sessionDir, `capture-${pid}.gpumem`);
}
