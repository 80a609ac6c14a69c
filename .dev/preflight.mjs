// Preflight of `npm test`'s layers: before a layer runs, check that what it needs is on this machine, so
// a missing tool fails that layer at once with one line naming the Debian package (or command) that
// provides it, instead of a linker error minutes later.
//
// Note [Preflight]: each check does the smallest real thing the layer will do (compile and link a
// one-line program with the same sanitizer flags, start the browser, find the code-server install), not
// a `dpkg -s` of a package name: a package can be installed yet broken, or a tool come from elsewhere.
// A failed check fails the layer (it is never a silent skip). A user who wants to run without a layer
// says so with GPUMEM_TEST_SKIP=<layer>; in CI (CI=true) that is refused too for the layers CI must run.
// The apt names here are the ones .ci/run installs; test/unit/preflight.test.mjs holds the two lists equal.
//
// Only Node built-ins: this runs before `npm ci` on a fresh clone.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** Runs one command quietly; true when it exits 0. */
function ok(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], timeout: 60_000, ...opts });
  return r.status === 0;
}

/** Compiles and links `source` (C++) with `compiler` and `flags` in a scratch folder; true when it links. */
function links(compiler, flags, source, runArgs = undefined) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpumem-preflight-'));
  try {
    const src = path.join(dir, 'probe.cc');
    const exe = path.join(dir, 'probe');
    fs.writeFileSync(src, source);
    if (!ok(compiler, ['-std=c++17', ...flags, '-o', exe, src])) return false;
    return runArgs ? ok(exe, runArgs) : true; // running it proves the sanitizer runtime starts here
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

const MAIN = 'int main() { return 0; }\n';
const FUZZ = 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }\n';

/**
 * What each layer needs: [what, check, how to get it]. `how` is one line: an apt package list or a command.
 * Checks run in order and stop at the first missing thing.
 */
export const NEEDS = {
  install: [['npm', () => ok('npm', ['--version']), 'Node.js 20 with npm (Debian 12: the nodejs package from the machine image)']],
  build: [
    ['make', () => ok('make', ['--version']), 'apt-get install -y make'],
    ['g++ (node-gyp, the allocator)', () => links('g++', [], MAIN), 'apt-get install -y g++'],
    ['python3 (node-gyp)', () => ok('python3', ['--version']), 'apt-get install -y python3'],
    [
      'Node.js headers (node-gyp builds against npm_config_nodedir, no download)',
      () => fs.existsSync(path.join(process.env.npm_config_nodedir || '/usr', 'include/node/node_api.h')),
      'the nodejs package with its headers in /usr/include/node (or set npm_config_nodedir to a Node.js source folder)',
    ],
  ],
  unit: [['python3 (reference scripts)', () => ok('python3', ['-c', 'import ctypes, struct, pickle']), 'apt-get install -y python3']],
  native: [
    ['make', () => ok('make', ['--version']), 'apt-get install -y make'],
    ['g++ with ASan/UBSan', () => links('g++', ['-fsanitize=address,undefined'], MAIN, []), 'apt-get install -y g++ (brings libasan8 and libubsan1)'],
    ['g++ with TSan', () => links('g++', ['-fsanitize=thread'], MAIN), 'apt-get install -y g++ (brings libtsan2)'],
    ['a C compiler (cc)', () => ok('cc', ['--version']), 'apt-get install -y g++ (brings gcc)'],
    ['python3 with ctypes', () => ok('python3', ['-c', 'import ctypes']), 'apt-get install -y python3'],
    // Note [ARM64] (native/floor/README.md): the allocator's and the reader's tests cross-built, run under qemu-user.
    ['the ARM64 cross compiler (aarch64-linux-gnu-g++)', () => links('aarch64-linux-gnu-g++', [], MAIN), 'apt-get install -y crossbuild-essential-arm64'],
    ['qemu-user for ARM64', () => ok('qemu-aarch64-static', ['--version']) || ok('qemu-aarch64', ['--version']), 'apt-get install -y qemu-user-static'],
  ],
  fuzz: [
    ['clang++', () => ok('clang++', ['--version']), 'apt-get install -y clang'],
    [
      "clang's libFuzzer and sanitizer runtimes (libclang_rt.fuzzer, libclang_rt.asan)",
      () => links('clang++', ['-fsanitize=fuzzer,address,undefined'], FUZZ, ['-runs=0']),
      'apt-get install -y libclang-rt-14-dev',
    ],
  ],
  python: [
    ['python3 with unittest and ctypes', () => ok('python3', ['-c', 'import unittest, ctypes']), 'apt-get install -y python3'],
    [
      "Python's headers (the observer's build check)",
      () => ok('python3', ['-c', "import os, sys, sysconfig; sys.exit(not os.path.isfile(os.path.join(sysconfig.get_paths()['include'], 'Python.h')))"]),
      'apt-get install -y python3-dev',
    ],
    ['venv with ensurepip (the pip package\'s test)', () => ok('python3', ['-c', 'import venv, ensurepip']), 'apt-get install -y python3-venv'],
    ['pytest (the pytest plugin\'s tests)', () => ok('python3', ['-c', 'import pytest']), 'apt-get install -y python3-pytest'],
    ['IPython (the IPython extension\'s tests)', () => ok('python3', ['-c', 'import IPython']), 'apt-get install -y python3-ipython'],
  ],
  package: [
    ['make', () => ok('make', ['--version']), 'apt-get install -y make'],
    ['the ARM64 cross compiler (the linux-arm64 VSIX)', () => links('aarch64-linux-gnu-g++', [], MAIN), 'apt-get install -y crossbuild-essential-arm64'],
  ],
  webview: [['Chromium', () => ok('chromium', ['--version']), 'apt-get install -y chromium']],
  e2e: [
    ['Chromium', () => ok('chromium', ['--version']), 'apt-get install -y chromium'],
    ['ripgrep (code-server search)', () => ok('rg', ['--version']), 'apt-get install -y ripgrep'],
    [
      'code-server 4.100.3 in .tools/',
      () => fs.existsSync(path.join(process.env.GPUMEM_TOOLS_DIR || path.join(ROOT, '.tools'), 'code-server/node_modules/.bin/code-server')),
      'npm run setup-e2e',
    ],
  ],
};

/** The apt package names the checks above name (for the test that holds them equal to .ci/run's list). */
export function aptPackagesNamed() {
  const names = new Set();
  for (const checks of Object.values(NEEDS)) {
    for (const [, , how] of checks) {
      const m = how.match(/^apt-get install -y ([a-z0-9+.\- ]+?)(?: \(|$)/);
      if (m) for (const p of m[1].trim().split(/\s+/)) names.add(p);
    }
  }
  return [...names].sort();
}

/**
 * Checks a layer's needs. Returns undefined when all are there, else one line: what is missing and what
 * provides it. `except` leaves out the checks whose label contains one of its strings (e.g. code-server,
 * when the caller installs it itself).
 */
export function preflight(layer, { except = [] } = {}) {
  for (const [what, check, how] of NEEDS[layer] ?? []) {
    if (except.some((e) => what.includes(e))) continue;
    if (!check()) return `${layer}: missing ${what}: ${how}`;
  }
  return undefined;
}

// `node .dev/preflight.mjs [layer…]`: prints each layer's verdict; exits 1 when any is missing.
if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const layers = process.argv.slice(2).length ? process.argv.slice(2) : Object.keys(NEEDS);
  let bad = 0;
  for (const layer of layers) {
    const msg = preflight(layer);
    if (msg) bad++;
    console.log(msg ?? `${layer}: ok`);
  }
  process.exit(bad ? 1 : 0);
}
