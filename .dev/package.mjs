// `npm run package`: dist/ (already built) → a linux-x64 and a linux-arm64 VSIX, then checks what went in.
//   node .dev/package.mjs [--out FILE] [--arm64-out FILE] [--target linux-x64|linux-arm64]
//     default: gpu-memory-lens-<version>-linux-x64.vsix and …-linux-arm64.vsix at the root; with --out and no
//     --arm64-out, the ARM64 one beside FILE, named FILE-linux-arm64.vsix; --target packages that one only.
// The ARM64 binaries are cross-built first (.dev/arm64.mjs, into dist/native-arm64). Each VSIX is packaged from a
// staging copy of what ships, with its own architecture's binaries in dist/native (the extension loads them by that
// path). Exits non-zero, naming the file, when something the extension loads at runtime is missing from a VSIX, a
// binary is of the other architecture, or a binary needs a newer glibc or libstdc++ than the floor (Note [Binary
// floor] in native/floor/README.md).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ARM64_NATIVE, buildArm64Natives, elfMachine } from './arm64.mjs';
import { listVsix } from './vsix.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
const TARGETS = { 'linux-x64': { arch: 'x64', native: path.join(root, 'dist/native') }, 'linux-arm64': { arch: 'arm64', native: ARM64_NATIVE } };
// What a VSIX holds besides dist/ (.vscodeignore picks from these; the staging copy needs nothing else).
const SHIPPED = ['package.json', 'README.md', 'CHANGELOG.md', 'LICENSE', '.vscodeignore', 'media', 'native/python'];

/**
 * How vsce chooses the files, for `vsce package` here and `vsce ls` in test/unit/vsix-contents.test.mjs, so the
 * listing the test checks is the package's: .vscodeignore's whitelist, no node_modules (everything is bundled
 * into dist/).
 */
export const VSCE_SELECTION = ['--no-dependencies'];

/** `vsce ls` at the root: the files the linux-x64 package would hold, as vsce names them (relative to the root). */
export function vsceList() {
  const r = spawnSync(process.execPath, [path.join(root, 'node_modules/@vscode/vsce/vsce'), 'ls', ...VSCE_SELECTION], { cwd: root, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`vsce ls failed (exit ${r.status}): ${r.stderr}`);
  return r.stdout.split('\n').filter(Boolean);
}

/** The shipped binaries of a target: every .node and .so in its native folder. */
function nativesOf(target) {
  const dir = TARGETS[target].native;
  if (!fs.existsSync(dir)) return [];
  return fs.readdirSync(dir).filter((f) => /\.(node|so)$/.test(f)).map((f) => path.join(dir, f));
}

/** Fails, naming the symbol, when a binary asks for more than the floor (native/floor/check_floor.py). */
function checkFloor(files) {
  const r = spawnSync('python3', [path.join(root, 'native/floor/check_floor.py'), ...files], { encoding: 'utf8' });
  process.stdout.write(r.stdout);
  if (r.status !== 0) throw new Error(`package: a binary is above the floor of glibc 2.28 / libstdc++ 3.4.25 (see above)${r.stderr ? `: ${r.stderr.trim()}` : ''}`);
}

/** A folder holding what ships, with `target`'s binaries as dist/native and no other architecture's. */
function stage(target) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `gpumem-vsix-${target}-`));
  for (const p of SHIPPED) {
    if (fs.existsSync(path.join(root, p))) fs.cpSync(path.join(root, p), path.join(dir, p), { recursive: true });
  }
  fs.cpSync(path.join(root, 'dist'), path.join(dir, 'dist'), {
    recursive: true,
    filter: (src) => !/^native($|-)/.test(path.relative(path.join(root, 'dist'), src)),
  });
  fs.mkdirSync(path.join(dir, 'dist/native'), { recursive: true });
  for (const f of nativesOf(target)) {
    if (elfMachine(f) !== TARGETS[target].arch) throw new Error(`package: ${path.relative(root, f)} is built for ${elfMachine(f)}, not ${TARGETS[target].arch}`);
    fs.copyFileSync(f, path.join(dir, 'dist/native', path.basename(f)));
  }
  return dir;
}

export function packageVsix(outFile, target = 'linux-x64') {
  if (!fs.existsSync(path.join(root, 'dist/extension.js'))) {
    throw new Error('package: dist/extension.js is missing — run `npm run build` first');
  }
  const natives = nativesOf(target);
  if (natives.length) checkFloor(natives);
  fs.mkdirSync(path.dirname(outFile), { recursive: true });
  const t0 = Date.now();
  const dir = stage(target);
  try {
    const r = spawnSync(
      process.execPath,
      [
        path.join(root, 'node_modules/@vscode/vsce/vsce'),
        'package',
        ...VSCE_SELECTION,
        '--target', target, // dist/native holds this target's binaries
        '--allow-missing-repository',
        // README images are repository-relative; the VSIX has no repository URL to rewrite them against.
        '--no-rewrite-relative-links',
        '--out', outFile,
      ],
      { cwd: dir, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] },
    );
    if (r.status !== 0) {
      process.stderr.write(r.stdout + r.stderr);
      throw new Error(`package: vsce failed (exit ${r.status})`);
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  const entries = listVsix(outFile);
  // (vsce names LICENSE and CHANGELOG.md so in the package)
  const expected = ['extension/package.json', 'extension/dist/extension.js', 'extension/LICENSE.txt', 'extension/changelog.md'];
  for (const f of natives) expected.push(`extension/dist/native/${path.basename(f)}`);
  for (const f of ['dist/cli.js', 'dist/webview/live.js', 'dist/webview/snapshot.js', 'dist/webview/toolkit.min.js']) {
    if (fs.existsSync(path.join(root, f))) expected.push(`extension/${f}`);
  }
  if (fs.existsSync(path.join(root, 'native/python'))) {
    expected.push('extension/native/python/sitecustomize.py');
    for (const f of fs.readdirSync(path.join(root, 'native/python/gpumem'), { recursive: true })) {
      if (/\.(py|cpp)$/.test(String(f)) && !String(f).includes('__pycache__')) expected.push(`extension/native/python/gpumem/${f}`);
    }
  }
  const missing = expected.filter((e) => !entries.includes(e));
  if (missing.length) throw new Error(`package: ${path.basename(outFile)} lacks ${missing.join(', ')} (check .vscodeignore)`);
  const leaked = entries.filter((e) =>
    /(^|\/)(node_modules|src|test|\.dev|__pycache__|build_backend)\/|\.pyc$|^dist\/native-/.test(e.replace(/^extension\//, '')));
  if (leaked.length) throw new Error(`package: ${path.basename(outFile)} contains files it must not ship: ${leaked.slice(0, 5).join(', ')}`);
  const kib = fs.statSync(outFile).size / 1024;
  console.log(`package: ${path.relative(root, outFile)} (${target}, ${entries.length} files, ${kib.toFixed(0)} KiB, ${Date.now() - t0} ms)`);
  return outFile;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const arg = (name) => {
    const i = process.argv.indexOf(name);
    return i > 0 ? process.argv[i + 1] : undefined;
  };
  const x64Out = path.resolve(arg('--out') ?? path.join(root, `${pkg.name}-${pkg.version}-linux-x64.vsix`));
  const arm64Out = path.resolve(
    arg('--arm64-out') ?? (arg('--out') ? x64Out.replace(/(\.vsix)?$/, '-linux-arm64.vsix') : path.join(root, `${pkg.name}-${pkg.version}-linux-arm64.vsix`)),
  );
  const only = arg('--target');
  try {
    if (only && !TARGETS[only]) throw new Error(`package: --target must be ${Object.keys(TARGETS).join(' or ')}, got ${only}`);
    if (!only || only === 'linux-x64') packageVsix(x64Out, 'linux-x64');
    if (!only || only === 'linux-arm64') {
      buildArm64Natives();
      packageVsix(arm64Out, 'linux-arm64');
    }
  } catch (err) {
    console.error(err.message);
    process.exit(1);
  }
}
