// The build: `node esbuild.config.mjs [--production] [--watch] [--js-only]` (what `npm run build` runs).
//
//   dist/extension.js          extension host (Node 20, CommonJS), `vscode` external
//   dist/cli.js                the `gpumem` CLI (src/cli/main.ts), when that file exists
//   dist/webview/live.js       browser IIFE bundles (webview/<name>/main.ts), when they exist
//   dist/webview/snapshot.js
//   dist/webview/toolkit.min.js, dist/webview/uPlot.min.css   copied from node_modules
//   dist/native/libgpumem_allocator.so   make -C native/allocator   (when its Makefile exists)
//   dist/native/gpumem_addon.node        node-gyp via binding.gyp  (when binding.gyp exists)
//
// Note [Missing entry points]: the parts are written in parallel, so an absent entry point is skipped with
// a printed line instead of failing the build; a present one that does not compile fails it.
// Note [Native addon path]: the extension loads the addon by path at runtime
// (path.join(extensionRoot, 'dist/native/gpumem_addon.node')), so no `.node` file is ever bundled; the
// `*.node` external below only keeps a stray static require from being inlined.
import * as esbuild from 'esbuild';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { nodeGypCommand, nodeGypEnv } from './.dev/node-gyp.mjs';

const root = path.dirname(fileURLToPath(import.meta.url));
const args = new Set(process.argv.slice(2));
const production = args.has('--production');
const watch = args.has('--watch');
const jsOnly = args.has('--js-only') || watch;
const rel = (p) => path.join(root, p);
const exists = (p) => fs.existsSync(rel(p));

const common = {
  bundle: true,
  sourcemap: production ? false : 'linked',
  minify: production,
  logLevel: 'warning',
  absWorkingDir: root,
};

const targets = [];
if (exists('src/extension.ts')) {
  targets.push({
    ...common,
    entryPoints: ['src/extension.ts'],
    outfile: 'dist/extension.js',
    platform: 'node',
    format: 'cjs',
    target: 'node20',
    external: ['vscode', '*.node'],
  });
} else {
  console.log('build: src/extension.ts missing, skipped');
}
if (exists('src/cli/main.ts')) {
  targets.push({
    ...common,
    entryPoints: ['src/cli/main.ts'],
    outfile: 'dist/cli.js',
    platform: 'node',
    format: 'cjs',
    target: 'node20',
    external: ['vscode', '*.node'],
    banner: { js: '#!/usr/bin/env node' },
  });
} else {
  console.log('build: src/cli/main.ts missing, dist/cli.js skipped');
}
for (const name of ['live', 'snapshot']) {
  const entry = `webview/${name}/main.ts`;
  if (!exists(entry)) {
    console.log(`build: ${entry} missing, dist/webview/${name}.js skipped`);
    continue;
  }
  targets.push({
    ...common,
    entryPoints: [entry],
    outfile: `dist/webview/${name}.js`,
    platform: 'browser',
    format: 'iife',
    target: 'chrome120',
    // Webview CSS is imported from TS; esbuild writes it next to the bundle (dist/webview/<name>.css).
    loader: { '.css': 'css', '.svg': 'text' },
  });
}

function copyAssets() {
  const out = rel('dist/webview');
  fs.mkdirSync(out, { recursive: true });
  for (const [from, to] of [
    ['node_modules/@vscode/webview-ui-toolkit/dist/toolkit.min.js', 'toolkit.min.js'],
    ['node_modules/uplot/dist/uPlot.min.css', 'uPlot.min.css'],
  ]) {
    fs.copyFileSync(rel(from), path.join(out, to));
  }
}

function run(cmd, argv, opts = {}) {
  const t0 = Date.now();
  const r = spawnSync(cmd, argv, { cwd: root, stdio: 'inherit', ...opts });
  if (r.status !== 0) {
    throw new Error(`build: \`${cmd} ${argv.join(' ')}\` failed (exit ${r.status ?? r.signal})`);
  }
  console.log(`build: ${cmd} ${argv.join(' ')} (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
}

function buildNative() {
  fs.mkdirSync(rel('dist/native'), { recursive: true });
  if (exists('native/allocator/Makefile')) {
    // The Makefile puts libgpumem_allocator.so into dist/native/ itself.
    run('make', ['-C', 'native/allocator', `-j${Math.max(1, navigatorCores())}`]);
  } else {
    console.log('build: native/allocator/Makefile missing, allocator skipped');
  }
  if (exists('binding.gyp')) {
    // Headers from /usr/include/node (nodedir), so node-gyp downloads nothing.
    const env = nodeGypEnv();
    // Incremental: configure only when build/ is missing or older than binding.gyp, then `build` (make
    // recompiles only changed sources) — a full `rebuild` costs about a minute on 2 cores.
    const makefile = rel('build/Makefile');
    const stale = !fs.existsSync(makefile) || fs.statSync(makefile).mtimeMs < fs.statSync(rel('binding.gyp')).mtimeMs;
    const [gypExe, ...gypArgs] = nodeGypCommand();
    const gyp = (...a) => run(gypExe, [...gypArgs, ...a], { env });
    if (stale) gyp('configure', '--loglevel=warn');
    gyp('build', '--loglevel=warn', `--jobs=${navigatorCores()}`);
    const built = rel('build/Release/gpumem_addon.node');
    if (!fs.existsSync(built)) throw new Error('build: node-gyp succeeded but build/Release/gpumem_addon.node is missing (target name in binding.gyp?)');
    fs.copyFileSync(built, rel('dist/native/gpumem_addon.node'));
  } else {
    console.log('build: binding.gyp missing, addon skipped');
  }
}

function navigatorCores() {
  return Math.max(1, (globalThis.navigator?.hardwareConcurrency ?? 2));
}

const t0 = Date.now();
if (watch) {
  copyAssets();
  const contexts = await Promise.all(targets.map((t) => esbuild.context(t)));
  await Promise.all(contexts.map((c) => c.watch()));
  console.log('build: watching src/ and webview/ (Ctrl-C to stop)');
} else {
  try {
    fs.mkdirSync(rel('dist'), { recursive: true });
    // A production build writes no source maps; stale ones from a dev build would ship and mislead.
    if (production) {
      for (const f of fs.readdirSync(rel('dist'), { recursive: true })) if (String(f).endsWith('.map')) fs.rmSync(rel(path.join('dist', String(f))));
    }
    await Promise.all(targets.map((t) => esbuild.build(t)));
    copyAssets();
    console.log(`build: ${targets.map((t) => t.outfile).join(', ') || 'no bundles'} (${Date.now() - t0} ms)`);
    if (!jsOnly) buildNative();
  } catch (err) {
    // esbuild already printed the located errors; say which step broke.
    console.error(err instanceof Error ? err.message : err);
    process.exit(1);
  }
}
