// The native binaries for ARM64 (GH200, GB200, DGX Spark), cross-built on this machine with Debian's toolchain
// (crossbuild-essential-arm64) into dist/native-arm64/, for the linux-arm64 VSIX (Note [ARM64] in
// native/floor/README.md):
//   libgpumem_allocator.so   make -C native/allocator arm64 (its objects in native/allocator/build/arm64, shared
//                            with the ARM64 tests)
//   gpumem_addon.node        node-gyp --arch=arm64 with CC/CXX=aarch64-linux-gnu-*, over binding.gyp's own target,
//                            in build/arm64/addon (Node's headers are the same for every architecture)
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { nodeGypCommand, nodeGypEnv } from './node-gyp.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const ARM64_NATIVE = path.join(root, 'dist/native-arm64');
const CROSS = 'aarch64-linux-gnu-';
const JOBS = os.availableParallelism?.() ?? os.cpus().length;

function run(cmd, args, opts = {}) {
  const t0 = Date.now();
  const r = spawnSync(cmd, args, { cwd: root, stdio: ['ignore', 'inherit', 'inherit'], ...opts });
  if (r.status !== 0) throw new Error(`arm64: \`${cmd} ${args.join(' ')}\` failed (exit ${r.status ?? r.signal})`);
  console.log(`arm64: ${path.basename(cmd)} ${args.join(' ')} (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
}

/**
 * binding.gyp as seen from `dir`: the same target, its paths made relative to `dir` and `<(module_root_dir)` the
 * repository (node-gyp sets it to the folder it runs in). Only the paths move; flags, defines and sources stay.
 */
export function bindingFrom(dir) {
  const gyp = JSON.parse(fs.readFileSync(path.join(root, 'binding.gyp'), 'utf8'));
  const from = (p) => (p.startsWith('<') ? p : path.relative(dir, path.join(root, p)));
  for (const t of gyp.targets) {
    t.sources = t.sources.map(from);
    t.include_dirs = (t.include_dirs ?? []).map(from);
    for (const key of ['cflags', 'cflags_cc', 'libraries']) {
      if (t[key]) t[key] = t[key].map((f) => f.replaceAll('<(module_root_dir)', root));
    }
  }
  return gyp;
}

/** Builds both ARM64 binaries into dist/native-arm64 (incremental); returns their paths. */
export function buildArm64Natives() {
  if (spawnSync(`${CROSS}g++`, ['--version']).status !== 0) {
    throw new Error(`arm64: ${CROSS}g++ is missing (apt-get install -y crossbuild-essential-arm64)`);
  }
  fs.mkdirSync(ARM64_NATIVE, { recursive: true });
  run('make', ['-C', 'native/allocator', `-j${JOBS}`, 'arm64']);
  const dir = path.join(root, 'build/arm64/addon');
  fs.mkdirSync(dir, { recursive: true });
  const gypFile = path.join(dir, 'binding.gyp');
  const text = `${JSON.stringify(bindingFrom(dir), null, 2)}\n`;
  const changed = !fs.existsSync(gypFile) || fs.readFileSync(gypFile, 'utf8') !== text;
  if (changed) fs.writeFileSync(gypFile, text);
  const env = nodeGypEnv({ CC: `${CROSS}gcc`, CXX: `${CROSS}g++`, LINK: `${CROSS}g++`, AR: `${CROSS}ar` });
  const [gypExe, ...gypArgs] = nodeGypCommand();
  if (changed || !fs.existsSync(path.join(dir, 'build/Makefile'))) run(gypExe, [...gypArgs, 'configure', '--arch=arm64', '--loglevel=warn'], { cwd: dir, env });
  run(gypExe, [...gypArgs, 'build', '--loglevel=warn', `--jobs=${JOBS}`], { cwd: dir, env });
  const addon = path.join(ARM64_NATIVE, 'gpumem_addon.node');
  fs.copyFileSync(path.join(dir, 'build/Release/gpumem_addon.node'), addon);
  return [path.join(ARM64_NATIVE, 'libgpumem_allocator.so'), addon];
}

/** The ELF machine of a binary: 'x64', 'arm64', or the e_machine number. */
export function elfMachine(file) {
  const fd = fs.openSync(file, 'r');
  try {
    const head = Buffer.alloc(20);
    fs.readSync(fd, head, 0, 20, 0);
    if (head.readUInt32BE(0) !== 0x7f454c46) throw new Error(`${file} is not an ELF file`);
    const m = head.readUInt16LE(18);
    return m === 62 ? 'x64' : m === 183 ? 'arm64' : m;
  } finally {
    fs.closeSync(fd);
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  try {
    for (const f of buildArm64Natives()) console.log(`arm64: ${path.relative(root, f)} (${elfMachine(f)})`);
  } catch (err) {
    console.error(err.message);
    process.exit(1);
  }
}
