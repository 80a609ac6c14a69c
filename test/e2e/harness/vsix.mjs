// The packaged extension the E2E tests install: built once per `npm test` run, reused by every test file.
// Note [VSIX cache]: run-tests.mjs packages once and passes the file in GPUMEM_VSIX. A test file run on its
// own (`node --test test/e2e/x.test.mjs`) repackages only when dist/ or package.json is newer than the
// cached VSIX; it never builds — run `npm run build` first.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { packageVsix } from '../../../.dev/package.mjs';
import { OUTPUT, ROOT } from './paths.mjs';

function newestMtime(p) {
  const st = fs.statSync(p);
  if (!st.isDirectory()) return st.mtimeMs;
  let newest = st.mtimeMs;
  for (const e of fs.readdirSync(p)) newest = Math.max(newest, newestMtime(path.join(p, e)));
  return newest;
}

export function ensureVsix() {
  const given = process.env.GPUMEM_VSIX;
  if (given) {
    if (!fs.existsSync(given)) throw new Error(`GPUMEM_VSIX=${given} does not exist`);
    return given;
  }
  if (!fs.existsSync(path.join(ROOT, 'dist/extension.js'))) {
    throw new Error('E2E: dist/extension.js is missing — run `npm run build` (or `npm test`, which builds) first');
  }
  const cached = path.join(OUTPUT, 'gpu-memory-lens.vsix');
  const inputs = ['dist', 'package.json', 'native/python', 'media', '.vscodeignore']
    .map((p) => path.join(ROOT, p))
    .filter((p) => fs.existsSync(p));
  const sourcesAt = Math.max(...inputs.map(newestMtime));
  if (fs.existsSync(cached) && fs.statSync(cached).mtimeMs >= sourcesAt) return cached;
  return packageVsix(cached);
}

/**
 * A test-only extension folder (package.json + plain JS, no build: test/e2e/lm-caller) as a VSIX the harness installs
 * beside ours (startVsCode's `extensions`); repackaged only when the folder changed.
 */
export function testExtensionVsix(dir) {
  const out = path.join(OUTPUT, `${path.basename(dir)}.vsix`);
  if (fs.existsSync(out) && fs.statSync(out).mtimeMs >= newestMtime(dir)) return out;
  fs.mkdirSync(OUTPUT, { recursive: true });
  const r = spawnSync(
    process.execPath,
    [path.join(ROOT, 'node_modules/@vscode/vsce/vsce'), 'package', '--no-dependencies', '--allow-missing-repository', '--skip-license', '--out', out],
    { cwd: dir, encoding: 'utf8' },
  );
  if (r.status !== 0) throw new Error(`packaging ${dir} failed:\n${r.stdout}${r.stderr}`);
  return out;
}
