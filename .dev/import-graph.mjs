#!/usr/bin/env node
// The import graph of the TypeScript sources (src/ and webview/), and a check that it has no cycle of files,
// no cycle of folders and no import that runs up a layer (Note [Layers] in .dev/layers.mjs) — the TypeScript
// twin of `make -C native/allocator include-graph`.
//
//   node .dev/import-graph.mjs            every folder on its floor with what it imports, then the verdict;
//                                         exits 1 on a cycle or an upward import
//   npm run import-graph                  the same
//
// Note [Import graph]: an edge is a static import or re-export (`import`, `import type`, `export … from`) or an
// `import('…')` of a literal path, resolved like the bundler (./x → x.ts or x/index.ts); packages and node:
// built-ins are not edges. A folder is a file's own directory (src/core/analyses/steps/); its floor is 1 + the
// highest floor of the folders it imports (1: imports no other folder). test/unit/import-graph.test.mjs runs
// the check and proves it fails on a cycle of files, a cycle of folders and an upward import.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';
import { layerOf, mayImport } from './layers.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const ROOTS = ['src', 'webview'];

function listTs(root, dir) {
  const abs = path.join(root, dir);
  if (!fs.existsSync(abs)) return [];
  return fs
    .readdirSync(abs, { recursive: true })
    .map(String)
    .filter((n) => n.endsWith('.ts') && !n.endsWith('.d.ts') && !n.split(path.sep).includes('node_modules'))
    .map((n) => path.join(dir, n).split(path.sep).join('/'))
    .sort();
}

/** The module specifiers a TypeScript source imports (TypeScript's own pre-processor, no type-check). */
function specifiers(ts, text) {
  return ts.preProcessFile(text, true, true).importedFiles.map((f) => f.fileName);
}

function resolveSpecifier(root, fromRel, spec) {
  if (!spec.startsWith('./') && !spec.startsWith('../')) return undefined;
  const base = path.posix.normalize(path.posix.join(path.posix.dirname(fromRel), spec));
  for (const cand of [base, base.replace(/\.js$/, '.ts'), `${base}.ts`, `${base}/index.ts`]) {
    if (cand.endsWith('.ts') && fs.existsSync(path.join(root, cand)) && fs.statSync(path.join(root, cand)).isFile()) return cand;
  }
  return undefined;
}

/** { files, edges: Map<file, Set<file>>, unresolved: [from, spec][] } for the tree at `root`. */
export function readGraph(root = ROOT) {
  const ts = createRequire(path.join(ROOT, 'package.json'))('typescript');
  const files = ROOTS.flatMap((d) => listTs(root, d));
  const edges = new Map();
  const unresolved = [];
  for (const f of files) {
    const out = new Set();
    for (const spec of specifiers(ts, fs.readFileSync(path.join(root, f), 'utf8'))) {
      const to = resolveSpecifier(root, f, spec);
      if (to) out.add(to);
      else if (spec.startsWith('.')) unresolved.push([f, spec]);
    }
    edges.set(f, out);
  }
  return { files, edges, unresolved };
}

/** Strongly connected components with more than one node (Tarjan), each sorted; sorted by first node. */
export function cycles(nodes, edges) {
  let index = 0;
  const idx = new Map();
  const low = new Map();
  const stack = [];
  const on = new Set();
  const out = [];
  const visit = (v) => {
    idx.set(v, index);
    low.set(v, index++);
    stack.push(v);
    on.add(v);
    for (const w of edges.get(v) ?? []) {
      if (!idx.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v), low.get(w)));
      } else if (on.has(w)) low.set(v, Math.min(low.get(v), idx.get(w)));
    }
    if (low.get(v) === idx.get(v)) {
      const scc = [];
      let w;
      do {
        w = stack.pop();
        on.delete(w);
        scc.push(w);
      } while (w !== v);
      if (scc.length > 1) out.push(scc.sort());
    }
  };
  for (const v of nodes) if (!idx.has(v)) visit(v);
  return out.sort((a, b) => a[0].localeCompare(b[0]));
}

const folderOf = (f) => path.posix.dirname(f) + '/';

/** The folder graph: an edge between two folders when a file of one imports a file of the other. */
export function folderGraph(graph) {
  const folders = [...new Set(graph.files.map(folderOf))].sort();
  const edges = new Map(folders.map((d) => [d, new Set()]));
  for (const [from, tos] of graph.edges) {
    for (const to of tos) if (folderOf(from) !== folderOf(to)) edges.get(folderOf(from)).add(folderOf(to));
  }
  return { folders, edges };
}

/** Imports that run up a layer (or sideways where the layers forbid it): [from, to, why]. */
export function upward(graph) {
  const out = [];
  for (const [from, tos] of graph.edges) {
    const a = layerOf(from);
    for (const to of tos) {
      const b = layerOf(to);
      if (!mayImport(a, b)) out.push([from, to, `${a.name} may not import ${b.name}`]);
    }
  }
  return out.sort((x, y) => (x[0] + x[1]).localeCompare(y[0] + y[1]));
}

/** Floor of each folder: 1 + the highest floor it imports (only meaningful without folder cycles). */
export function floors(fg) {
  const floor = new Map();
  const busy = new Set();
  const of = (d) => {
    if (floor.has(d)) return floor.get(d);
    if (busy.has(d)) return 1; // a cycle: reported elsewhere
    busy.add(d);
    let f = 1;
    for (const e of fg.edges.get(d) ?? []) f = Math.max(f, of(e) + 1);
    busy.delete(d);
    floor.set(d, f);
    return f;
  };
  for (const d of fg.folders) of(d);
  return floor;
}

/** Everything the check says about a tree: figures, cycles of files and folders, upward imports. */
export function check(root = ROOT) {
  const graph = readGraph(root);
  const fg = folderGraph(graph);
  const fileCycles = cycles(graph.files, graph.edges);
  const folderCycles = cycles(fg.folders, fg.edges);
  const up = upward(graph);
  const floor = floors(fg);
  const arrows = [...fg.edges.values()].reduce((n, s) => n + s.size, 0);
  return {
    graph,
    folderGraph: fg,
    fileCycles,
    folderCycles,
    upward: up,
    floor,
    figures: { files: graph.files.length, folders: fg.folders.length, floors: Math.max(0, ...floor.values()), arrows, upward: up.length, cycles: fileCycles.length + folderCycles.length },
    ok: fileCycles.length === 0 && folderCycles.length === 0 && up.length === 0 && graph.unresolved.length === 0,
  };
}

export function report(r) {
  const lines = [];
  const f = r.figures;
  lines.push(`${f.files} files in ${f.folders} folders on ${f.floors} floors, ${f.arrows} folder arrows; ${f.upward} upward imports; ${f.cycles} cycles`);
  const byFloor = [...r.floor.entries()].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
  for (const [d, fl] of byFloor) {
    const deps = [...r.folderGraph.edges.get(d)].sort();
    lines.push(`floor ${String(fl).padStart(2)}  ${d}${deps.length ? ' -> ' + deps.join(' ') : ''}`);
  }
  for (const c of r.fileCycles) lines.push(`CYCLE of files: ${c.join(' -> ')}`);
  for (const c of r.folderCycles) lines.push(`CYCLE of folders: ${c.join(' -> ')}`);
  for (const [a, b, why] of r.upward) lines.push(`UPWARD import: ${a} -> ${b} (${why})`);
  for (const [a, s] of r.graph.unresolved) lines.push(`UNRESOLVED import: ${a} imports '${s}'`);
  lines.push(r.ok ? 'no cycle, no upward import' : 'FAIL');
  return lines.join('\n');
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const r = check(process.argv[2] ? path.resolve(process.argv[2]) : ROOT);
  console.log(report(r));
  process.exit(r.ok ? 0 : 1);
}
