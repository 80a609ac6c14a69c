// `npm start`: build, package, set up code-server if needed, and serve VS Code in the browser on
// 127.0.0.1 with GPU Memory Lens installed and the sample workspace open. Runs until Ctrl-C.
//
//   PORT=8080 npm start          fixed port (default: a free one)
//   GPUMEM_START_REPLAY=1|0      force the replay hook on/off (default: on when this machine has no GPU;
//                                see Note [Replay hook] in start-settings.mjs)
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startSettings } from './start-settings.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const START_DIR = path.join(process.env.GPUMEM_TOOLS_DIR || path.join(ROOT, '.tools'), 'start');
process.env.npm_config_nodedir ||= '/usr';

function step(title, cmd, args, opts = {}) {
  const t0 = Date.now();
  console.log(`▶ ${title}`);
  const r = spawnSync(cmd, args, { cwd: ROOT, stdio: 'inherit', ...opts });
  if (r.status !== 0) {
    console.error(`✖ ${title} failed (exit ${r.status ?? r.signal})`);
    process.exit(1);
  }
  console.log(`  done in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
}

if (!fs.existsSync(path.join(ROOT, 'node_modules/.package-lock.json'))) step('npm ci', 'npm', ['ci', '--no-audit', '--no-fund']);
step('build', process.execPath, ['esbuild.config.mjs']);
const vsix = path.join(START_DIR, 'gpu-memory-lens.vsix');
step('package', process.execPath, ['.dev/package.mjs', '--out', vsix, '--target', 'linux-x64']);
step('code-server setup', 'bash', ['.dev/setup-code-server.sh']);

const { startCodeServer } = await import('../test/e2e/harness/codeServer.mjs');
const runDir = path.join(START_DIR, 'run');
fs.rmSync(runDir, { recursive: true, force: true }); // fresh profile and workspace copy each start
fs.mkdirSync(runDir, { recursive: true });
const port = process.env.PORT ? Number(process.env.PORT) : undefined;
if (process.env.PORT && !(port > 0 && port < 65536)) {
  console.error(`✖ PORT=${process.env.PORT} is not a port number`);
  process.exit(1);
}

const forced = process.env.GPUMEM_START_REPLAY;
let hook;
try {
  hook = startSettings(forced === undefined ? {} : { replay: forced === '1' });
} catch (err) {
  console.error(`✖ ${err.message}`);
  process.exit(1);
}
console.log(`  workspace settings: ${hook.reason}`);
const server = await startCodeServer({
  vsix,
  workspace: path.join(ROOT, 'test/e2e/workspace'),
  workspaceSettings: hook.settings,
  runDir,
  port,
});

console.log(`
GPU Memory Lens is running in VS Code (code-server 4.100.3):

    ${server.url}

Workspace copy: ${server.workspaceDir}
Server log:     ${server.serverLog}
Press Ctrl-C to stop.`);

let stopping = false;
async function shutdown() {
  if (stopping) return;
  stopping = true;
  console.log('\nstopping code-server…');
  await server.stop();
  process.exit(0);
}
process.on('SIGINT', shutdown);
process.on('SIGTERM', shutdown);
// Keep the event loop alive until a signal arrives.
setInterval(() => {}, 1 << 30);
