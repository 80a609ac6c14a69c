// Which capture file paths belong to an open editor document.
//
// Note [Matching frames to documents]: frames carry the path the workload saw. Usually that is the
// document's own path, but a capture copied from a cluster, a container or another checkout has a
// different prefix. Match exactly first; otherwise take the frame path sharing the longest run of trailing
// path components with the document (at least the file name). A tie between two different frame paths is
// ambiguous and matches neither (better no annotation than one on the wrong file).

function parts(p: string): string[] {
  return p.split(/[\\/]+/).filter((s) => s.length > 0);
}

function commonSuffix(a: string[], b: string[]): number {
  let n = 0;
  while (n < a.length && n < b.length && a[a.length - 1 - n] === b[b.length - 1 - n]) n++;
  return n;
}

/** The frame path (one of `framePaths`) that `docPath` shows, or undefined. */
export function matchDocument(docPath: string, framePaths: Iterable<string>): string | undefined {
  const doc = parts(docPath);
  let best: string | undefined;
  let bestLen = 0;
  let tie = false;
  for (const fp of framePaths) {
    if (fp === docPath) return fp;
    const n = commonSuffix(doc, parts(fp));
    if (n > bestLen) {
      best = fp;
      bestLen = n;
      tie = false;
    } else if (n === bestLen && n > 0 && fp !== best) {
      tie = true;
    }
  }
  return bestLen >= 1 && !tie ? best : undefined;
}
