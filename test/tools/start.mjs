// `npm start`: build, package, set up code-server if needed, and serve VS Code in the browser on
// 127.0.0.1 with GPU Memory Lens installed and the sample workspace open. Runs until Ctrl-C.
//
//   PORT=8080 npm start          fixed port (default: a free one)
//   GPUMEM_START_REPLAY=1|0      force the replay hook on/off (default: on when this machine has no GPU)
//
// Note [Replay hook]: on a machine with no GPU, "Run Python File with Memory Tracking" has nothing to
// track. If test/e2e/replay/start-settings.json exists (written by the replay workload's owner), its
// entries are merged into the sample workspace's .vscode/settings.json — e.g.
//   { "gpuMemoryLens.launchCommand": "${python} ${replayDir}/replay.py ${file}" }
// — with ${replayDir} and ${repoRoot} replaced by absolute paths here (tracked files must not hold them).
// Other ${…} variables are left for the extension to expand.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const START_DIR = path.join(process.env.GPUMEM_TOOLS_DIR || path.join(ROOT, '.tools'), 'start');
const REPLAY_DIR = path.join(ROOT, 'test/e2e/replay');
const REPLAY_SETTINGS = path.join(REPLAY_DIR, 'start-settings.json');
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

function hasGpu() {
  if (fs.existsSync('/dev/nvidia0')) return true;
  return spawnSync('nvidia-smi', ['-L'], { stdio: 'ignore' }).status === 0;
}

function replaySettings() {
  const forced = process.env.GPUMEM_START_REPLAY;
  const want = forced === undefined ? !hasGpu() : forced === '1';
  if (!want) return undefined;
  if (!fs.existsSync(REPLAY_SETTINGS)) {
    console.log(`  no GPU here and no ${path.relative(ROOT, REPLAY_SETTINGS)} yet: "Run Python File" will need a GPU`);
    return undefined;
  }
  const text = fs.readFileSync(REPLAY_SETTINGS, 'utf8').replaceAll('${replayDir}', REPLAY_DIR).replaceAll('${repoRoot}', ROOT);
  try {
    const settings = JSON.parse(text);
    console.log(`  replay hook: ${Object.keys(settings).join(', ')} from ${path.relative(ROOT, REPLAY_SETTINGS)}`);
    return settings;
  } catch (err) {
    console.error(`✖ ${path.relative(ROOT, REPLAY_SETTINGS)} is not valid JSON: ${err.message}`);
    process.exit(1);
  }
}

if (!fs.existsSync(path.join(ROOT, 'node_modules/.package-lock.json'))) step('npm ci', 'npm', ['ci', '--no-audit', '--no-fund']);
step('build', process.execPath, ['esbuild.config.mjs']);
const vsix = path.join(START_DIR, 'gpu-memory-lens.vsix');
step('package', process.execPath, ['test/tools/package.mjs', '--out', vsix]);
step('code-server setup', 'bash', ['test/tools/setup-code-server.sh']);

const { startCodeServer } = await import('../e2e/harness/codeServer.mjs');
const runDir = path.join(START_DIR, 'run');
fs.rmSync(runDir, { recursive: true, force: true }); // fresh profile and workspace copy each start
fs.mkdirSync(runDir, { recursive: true });
const port = process.env.PORT ? Number(process.env.PORT) : undefined;
if (process.env.PORT && !(port > 0 && port < 65536)) {
  console.error(`✖ PORT=${process.env.PORT} is not a port number`);
  process.exit(1);
}

const server = await startCodeServer({
  vsix,
  workspace: path.join(ROOT, 'test/e2e/workspace'),
  workspaceSettings: replaySettings(),
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
