// `npm run typecheck`: tsc --noEmit over each TypeScript project that has sources yet
// (tsc fails with TS18003 on a project with no inputs, and webview/ fills in while other parts are written).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const projects = [
  { config: 'tsconfig.json', dir: 'src' },
  { config: 'tsconfig.webview.json', dir: 'webview' },
];

function hasTs(dir) {
  if (!fs.existsSync(dir)) return false;
  return fs.readdirSync(dir, { recursive: true }).some((f) => String(f).endsWith('.ts'));
}

let failed = 0;
for (const { config, dir } of projects) {
  if (!hasTs(path.join(root, dir))) {
    console.log(`typecheck: ${dir}/ has no .ts files yet, ${config} skipped`);
    continue;
  }
  const t0 = Date.now();
  const r = spawnSync(process.execPath, [path.join(root, 'node_modules/typescript/bin/tsc'), '-p', config, '--pretty'], { cwd: root, stdio: 'inherit' });
  const ok = r.status === 0;
  if (!ok) failed++;
  console.log(`typecheck: ${config} ${ok ? 'ok' : 'FAILED'} (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
}
process.exit(failed ? 1 : 0);
