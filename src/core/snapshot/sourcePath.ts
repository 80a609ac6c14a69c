// Where a recorded frame's file lives on this machine. Snapshots travel (a cluster, a colleague's laptop), so
// `/home/user/project/train.py` rarely exists here as written.
//
// Note [Source resolution]: try, in order: the path as recorded; the path's trailing components under each
// workspace folder, longest suffix first (`/home/u/proj/pkg/a.py` → `<ws>/proj/pkg/a.py`, `<ws>/pkg/a.py`,
// `<ws>/a.py`); then any workspace file with the same basename, preferring the longest common path suffix.
// The first two are cheap `exists` probes; the last needs a workspace search, which the glue runs.

export function splitPath(file: string): string[] {
  return file.split(/[\\/]+/).filter((p) => p !== '');
}

/** Candidate paths for `file` under `folder`, longest recorded suffix first (no existence check). */
export function suffixCandidates(file: string, folder: string): string[] {
  const parts = splitPath(file);
  const base = folder.replace(/[\\/]+$/, '');
  const out: string[] = [];
  for (let i = 0; i < parts.length; i++) out.push(`${base}/${parts.slice(i).join('/')}`);
  return out;
}

/** How many trailing path components two paths share (`a/b/c.py` vs `x/b/c.py` → 2). */
export function commonSuffixLength(a: string, b: string): number {
  const pa = splitPath(a);
  const pb = splitPath(b);
  let n = 0;
  while (n < pa.length && n < pb.length && pa[pa.length - 1 - n] === pb[pb.length - 1 - n]) n++;
  return n;
}

/** Of workspace files named like `file`, the one sharing the longest path suffix (ties: shortest path). */
export function bestBasenameMatch(file: string, found: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestScore = 0;
  for (const f of found) {
    const score = commonSuffixLength(file, f);
    if (score > bestScore || (score === bestScore && best !== undefined && score > 0 && f.length < best.length)) {
      best = f;
      bestScore = score;
    }
  }
  return bestScore > 0 ? best : undefined;
}

export function baseName(file: string): string {
  const parts = splitPath(file);
  return parts[parts.length - 1] ?? file;
}
