// The layers of the TypeScript sources, declared once: eslint.config.mjs turns them into per-folder
// no-restricted-imports rules, and .dev/import-graph.mjs (run by test/unit/import-graph.test.mjs) checks the
// import graph against them.
//
// Note [Layers]: src/core is built like native/allocator (format → core → recorder → C API): each layer is a
// folder, and a file imports only its own layer and the layers below it (`may`):
//   base       the model of a capture (types, the native reader's face), the webview protocol, units, the
//              settings table, the session folder, launching and the control socket: no analysis, no view;
//   analyses   what the data means: steps, time base, leaks, categories, breakdown, verdicts, summary,
//              advice, replay, the rank table;
//   views      what each panel and the editor ask for (live run, opened capture, rank set, annotations,
//              the panels' HTML), and what an AI assistant asks for (the assistant's tools);
//   glue, cli  the VS Code extension and the `gpumem` command: side by side, neither imports the other;
//   root       src/extension.ts, the composition root.
// webview/ (the browser bundles) imports only the protocol and the units of base. Folders inside a layer may
// import each other, but never in a cycle (the graph check fails on a cycle of files or of folders).
export const LAYERS = [
  { name: 'base', path: 'src/core/base/', may: [] },
  { name: 'analyses', path: 'src/core/analyses/', may: ['base'] },
  { name: 'views', path: 'src/core/views/', may: ['base', 'analyses'] },
  { name: 'cli', path: 'src/cli/', may: ['base', 'analyses', 'views'] },
  { name: 'glue', path: 'src/glue/', may: ['base', 'analyses', 'views'] },
  { name: 'root', path: 'src/extension.ts', may: ['base', 'analyses', 'views', 'glue'] },
  { name: 'webview', path: 'webview/', may: ['protocol', 'units'] },
  // Parts of base that webview/ may import (they are base's, not layers of their own).
  { name: 'protocol', path: 'src/core/base/protocol/', part: 'base', may: [] },
  { name: 'units', path: 'src/core/base/units/', part: 'base', may: [] },
];

/** The layer a repository-relative path belongs to (the longest matching path), or undefined. */
export function layerOf(rel) {
  let best;
  for (const l of LAYERS) {
    const hit = l.path.endsWith('/') ? rel.startsWith(l.path) : rel === l.path;
    if (hit && (!best || l.path.length > best.path.length)) best = l;
  }
  return best;
}

/** May a file of layer `from` import a file of layer `to`? Its own layer, the layers it names, their parts. */
export function mayImport(from, to) {
  if (!from || !to) return true;
  const home = (l) => l.part ?? l.name;
  if (home(from) === home(to)) return true;
  return from.may.includes(to.name) || (to.part !== undefined && from.may.includes(to.part));
}
