// The E2E harness in one call: package (cached) → code-server with the VSIX → Chromium on the workbench.
//
//   import { startVsCode } from './harness/index.mjs';
//   const vsc = await startVsCode({ workspaceSettings: { 'gpuMemoryLens.launchCommand': '…' } });
//   await vsc.runCommand('GPU Memory: Show Live Panel');
//   await vsc.waitForNotification('…');
//   await vsc.screenshot('live-panel');
//   await vsc.close();          // always (use t.after / finally): stops the browser and the server group
//
// On failure, call vsc.diagnostics() for the server and extension-host logs (close() prints them when
// given { failed: true }).
import fs from 'node:fs';
import path from 'node:path';
import { startCodeServer } from './codeServer.mjs';
import { SAMPLE_WORKSPACE } from './paths.mjs';
import { ensureVsix } from './vsix.mjs';
import { openWorkbench } from './workbench.mjs';

export { SAMPLE_WORKSPACE } from './paths.mjs';
export { Workbench } from './workbench.mjs';

/**
 * @param {object} [o]
 * @param {string} [o.workspace]  folder to copy and open (default test/e2e/workspace)
 * @param {object} [o.userSettings]  user-level settings
 * @param {object} [o.workspaceSettings]  <workspace>/.vscode/settings.json entries (e.g. gpuMemoryLens.launchCommand)
 * @param {Record<string,string>} [o.files]  extra workspace files
 * @param {Record<string,string>} [o.env]  extra environment for code-server and the extension host
 * @param {string[]} [o.extensions]  more VSIX files to install (test-only extensions: testExtensionVsix in ./vsix.mjs)
 * @param {(msg: string) => void} [o.log]
 */
export async function startVsCode(o = {}) {
  const t0 = Date.now();
  const log = o.log ?? ((m) => process.env.GPUMEM_E2E_VERBOSE && console.log(`[e2e ${((Date.now() - t0) / 1000).toFixed(1)}s] ${m}`));
  const vsix = ensureVsix();
  const server = await startCodeServer({ ...o, vsix, workspace: o.workspace ?? SAMPLE_WORKSPACE });
  log(`code-server on ${server.url}`);
  let wb;
  try {
    const profileDir = path.join(server.runDir, 'chromium');
    wb = await openWorkbench(server.url, { profileDir, log });
  } catch (err) {
    const diag = server.diagnostics();
    await server.stop();
    throw new Error(`${err.message}\n${diag}`);
  }
  return Object.assign(wb, {
    server,
    workspaceDir: server.workspaceDir,
    diagnostics: () => server.diagnostics(),
    async close({ failed = false } = {}) {
      if (failed) console.log(server.diagnostics());
      try {
        await wb.context.close();
      } finally {
        await server.stop();
      }
    },
  });
}

/** Reads a file from the running workspace copy (e.g. what a command wrote). */
export function readWorkspaceFile(vsc, rel) {
  return fs.readFileSync(path.join(vsc.workspaceDir, rel), 'utf8');
}
