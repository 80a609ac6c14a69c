// A throw-away code-server (VS Code 1.100.3 in the browser, Node extension host on this machine):
// fresh HOME/TMPDIR/user-data/extensions folders, the packaged VSIX installed, a copy of a workspace,
// its own process group so stop() takes the extension host and file watcher down with it.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';

import path from 'node:path';
import { CODE_SERVER, TOOLS } from './paths.mjs';

// Quiet, deterministic workbench: nothing opens by itself, no network calls, no AI side bar.
export const BASE_USER_SETTINGS = {
  'workbench.startupEditor': 'none',
  'workbench.tips.enabled': false,
  'workbench.enableExperiments': false,
  'workbench.secondarySideBar.defaultVisibility': 'hidden',
  'security.workspace.trust.enabled': false,
  'telemetry.telemetryLevel': 'off',
  'update.mode': 'none',
  'extensions.autoCheckUpdates': false,
  'extensions.autoUpdate': false,
  'extensions.ignoreRecommendations': true,
  'editor.minimap.enabled': false,
  'chat.disableAIFeatures': true,
  'git.enabled': false,
  'python.experiments.enabled': false,
};

export async function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/**
 * Start code-server.
 * @param {object} o
 * @param {string} o.vsix           packaged extension to install
 * @param {string} o.workspace      folder copied into the run folder and opened
 * @param {object} [o.userSettings] merged over BASE_USER_SETTINGS (user level)
 * @param {object} [o.workspaceSettings] written to <workspace>/.vscode/settings.json (merged with any there)
 * @param {Record<string,string>} [o.files] extra files for the workspace copy (relative path → contents)
 * @param {number} [o.port]         default: a free port
 * @param {string} [o.runDir]       default: a new folder under .tools/tmp (removed by stop())
 * @param {Record<string,string>} [o.env] extra environment for the server and its extension host
 * @param {string[]} [o.extensions] more VSIX files to install beside o.vsix (test-only extensions)
 */
export async function startCodeServer(o) {
  if (!fs.existsSync(CODE_SERVER)) {
    throw new Error(`code-server is not installed at ${CODE_SERVER} — run \`bash .dev/setup-code-server.sh\``);
  }
  fs.mkdirSync(path.join(TOOLS, 'tmp'), { recursive: true });
  const keepRunDir = Boolean(o.runDir);
  const run = o.runDir ?? fs.mkdtempSync(path.join(TOOLS, 'tmp', 'run-'));
  const dirs = { home: path.join(run, 'home'), tmp: path.join(run, 'tmp'), ud: path.join(run, 'ud'), ext: path.join(run, 'ext'), ws: path.join(run, 'sample') };
  for (const d of Object.values(dirs)) fs.mkdirSync(d, { recursive: true });
  fs.mkdirSync(path.join(dirs.ud, 'User'), { recursive: true });
  fs.writeFileSync(path.join(dirs.ud, 'User/settings.json'), JSON.stringify({ ...BASE_USER_SETTINGS, ...o.userSettings }, null, 2));

  fs.cpSync(o.workspace, dirs.ws, { recursive: true });
  for (const [rel, text] of Object.entries(o.files ?? {})) {
    fs.mkdirSync(path.dirname(path.join(dirs.ws, rel)), { recursive: true });
    fs.writeFileSync(path.join(dirs.ws, rel), text);
  }
  if (o.workspaceSettings) {
    const f = path.join(dirs.ws, '.vscode/settings.json');
    const existing = fs.existsSync(f) ? JSON.parse(fs.readFileSync(f, 'utf8')) : {};
    fs.mkdirSync(path.dirname(f), { recursive: true });
    fs.writeFileSync(f, JSON.stringify({ ...existing, ...o.workspaceSettings }, null, 2));
  }

  // HOME/TMPDIR: code-server writes ~/.config/code-server, the extension host puts sockets in $TMPDIR.
  const env = { ...process.env, HOME: dirs.home, TMPDIR: dirs.tmp, ...o.env };
  delete env.VSCODE_IPC_HOOK_CLI; // a terminal inside another VS Code would redirect --install-extension there
  const common = ['--user-data-dir', dirs.ud, '--extensions-dir', dirs.ext];
  for (const vsix of [o.vsix, ...(o.extensions ?? [])]) {
    const inst = spawnSync(CODE_SERVER, [...common, '--install-extension', vsix], { env, encoding: 'utf8' });
    if (inst.status !== 0) throw new Error(`code-server --install-extension ${vsix} failed:\n${inst.stdout}${inst.stderr}`);
  }

  const port = o.port ?? (await freePort());
  const log = path.join(run, 'server.log');
  const logFd = fs.openSync(log, 'a');
  const child = spawn(
    CODE_SERVER,
    [
      ...common,
      '--auth', 'none',
      '--bind-addr', `127.0.0.1:${port}`,
      '--config', path.join(run, 'config.yaml'),
      '--disable-telemetry', '--disable-update-check', '--disable-workspace-trust',
      '--disable-getting-started-override', '--ignore-last-opened',
      dirs.ws,
    ],
    { env, detached: true, stdio: ['ignore', logFd, logFd] }, // detached = setsid: own process group
  );
  fs.closeSync(logFd);
  const pgid = child.pid;
  let exited = false;
  child.on('exit', () => (exited = true));

  const base = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (exited) throw new Error(`code-server exited during start-up:\n${fs.readFileSync(log, 'utf8').slice(-3000)}`);
    try {
      if ((await fetch(`${base}/healthz`)).ok) break;
    } catch {
      /* not listening yet */
    }
    if (Date.now() > deadline) {
      killGroup(pgid, 'SIGKILL');
      throw new Error(`code-server did not answer /healthz on ${base} within 30 s:\n${fs.readFileSync(log, 'utf8').slice(-3000)}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }

  return {
    url: `${base}/?folder=${encodeURI(dirs.ws)}`,
    port,
    runDir: run,
    workspaceDir: dirs.ws,
    userDataDir: dirs.ud,
    serverLog: log,
    /** Last lines of the server and extension-host logs: print these when a test fails. */
    diagnostics() {
      const out = [`--- ${log}`, fs.existsSync(log) ? fs.readFileSync(log, 'utf8').slice(-2000) : '(none)'];
      const logs = path.join(dirs.ud, 'logs');
      if (fs.existsSync(logs)) {
        for (const f of fs.readdirSync(logs, { recursive: true })) {
          // The extension host's own log holds activation errors and our extension's stack traces.
          if (/^(remote)?exthost\.log$/.test(path.basename(String(f)))) {
            out.push(`--- ${f}`, fs.readFileSync(path.join(logs, String(f)), 'utf8').slice(-2000));
          }
        }
      }
      return out.join('\n');
    },
    async stop() {
      if (!exited) {
        killGroup(pgid, 'SIGTERM');
        // The watcher and extension host leave 1–3 s after SIGTERM; don't leave strays behind.
        for (let i = 0; i < 50 && groupAlive(pgid); i++) await new Promise((r) => setTimeout(r, 100));
        if (groupAlive(pgid)) killGroup(pgid, 'SIGKILL');
      }
      if (!keepRunDir && !process.env.GPUMEM_E2E_KEEP) fs.rmSync(run, { recursive: true, force: true });
    },
  };
}

function killGroup(pgid, signal) {
  try {
    process.kill(-pgid, signal);
  } catch {
    /* already gone */
  }
}

function groupAlive(pgid) {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

