// `npm run package`: dist/ (already built) → a linux-x64 VSIX, then checks what went in.
//   node .dev/package.mjs [--out FILE]     default: gpu-memory-lens-<version>-linux-x64.vsix at the root
// Exits non-zero, naming the file, when something the extension loads at runtime is missing from the VSIX.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { listVsix } from './vsix.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
const outArg = process.argv.indexOf('--out');
const out = path.resolve(outArg > 0 ? process.argv[outArg + 1] : path.join(root, `${pkg.name}-${pkg.version}-linux-x64.vsix`));

/**
 * How vsce chooses the files, for `vsce package` here and `vsce ls` in test/unit/vsix-contents.test.mjs, so the
 * listing the test checks is the package's: .vscodeignore's whitelist, no node_modules (everything is bundled
 * into dist/).
 */
export const VSCE_SELECTION = ['--no-dependencies'];

/** `vsce ls`: the files the package would hold, as vsce names them (relative to the root). */
export function vsceList() {
  const r = spawnSync(process.execPath, [path.join(root, 'node_modules/@vscode/vsce/vsce'), 'ls', ...VSCE_SELECTION], { cwd: root, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`vsce ls failed (exit ${r.status}): ${r.stderr}`);
  return r.stdout.split('\n').filter(Boolean);
}

export function packageVsix(outFile) {
  if (!fs.existsSync(path.join(root, 'dist/extension.js'))) {
    throw new Error('package: dist/extension.js is missing — run `npm run build` first');
  }
  fs.mkdirSync(path.dirname(outFile), { recursive: true });
  const t0 = Date.now();
  const r = spawnSync(
    process.execPath,
    [
      path.join(root, 'node_modules/@vscode/vsce/vsce'),
      'package',
      ...VSCE_SELECTION,
      '--target', 'linux-x64', // dist/native holds linux-x64 binaries
      '--allow-missing-repository',
      // README images are repository-relative; the VSIX has no repository URL to rewrite them against.
      '--no-rewrite-relative-links',
      '--out', outFile,
    ],
    { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] },
  );
  if (r.status !== 0) {
    process.stderr.write(r.stdout + r.stderr);
    throw new Error(`package: vsce failed (exit ${r.status})`);
  }
  const entries = listVsix(outFile);
  // (vsce names LICENSE and CHANGELOG.md so in the package)
  const expected = ['extension/package.json', 'extension/dist/extension.js', 'extension/LICENSE.txt', 'extension/changelog.md'];
  for (const f of fs.readdirSync(path.join(root, 'dist/native'), { withFileTypes: true })) {
    if (f.isFile() && /\.(node|so)$/.test(f.name)) expected.push(`extension/dist/native/${f.name}`);
  }
  for (const f of ['dist/cli.js', 'dist/webview/live.js', 'dist/webview/snapshot.js', 'dist/webview/toolkit.min.js']) {
    if (fs.existsSync(path.join(root, f))) expected.push(`extension/${f}`);
  }
  if (fs.existsSync(path.join(root, 'native/python'))) {
    for (const f of fs.readdirSync(path.join(root, 'native/python'), { recursive: true })) {
      if (String(f).endsWith('.py') && !String(f).includes('__pycache__')) expected.push(`extension/native/python/${f}`);
    }
  }
  const missing = expected.filter((e) => !entries.includes(e));
  if (missing.length) throw new Error(`package: ${path.basename(outFile)} lacks ${missing.join(', ')} (check .vscodeignore)`);
  const leaked = entries.filter((e) => /(^|\/)(node_modules|src|test|\.dev|__pycache__)\/|\.pyc$/.test(e.replace(/^extension\//, '')));
  if (leaked.length) throw new Error(`package: ${path.basename(outFile)} contains files it must not ship: ${leaked.slice(0, 5).join(', ')}`);
  const kib = fs.statSync(outFile).size / 1024;
  console.log(`package: ${path.relative(root, outFile)} (${entries.length} files, ${kib.toFixed(0)} KiB, ${Date.now() - t0} ms)`);
  return outFile;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  try {
    packageVsix(out);
  } catch (err) {
    console.error(err.message);
    process.exit(1);
  }
}
