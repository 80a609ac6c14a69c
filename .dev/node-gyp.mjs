// node-gyp for the native builds (esbuild.config.mjs for this machine, .dev/arm64.mjs for ARM64): npm's own copy,
// so nothing is fetched and the version is the one npm itself would use; the registry's otherwise.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

/** The command that runs node-gyp: [executable, ...leading arguments]. */
export function nodeGypCommand() {
  const candidates = [];
  if (process.env.npm_execpath) candidates.push(path.join(path.dirname(process.env.npm_execpath), '../node_modules/node-gyp/bin/node-gyp.js'));
  const prefix = spawnSync('npm', ['prefix', '-g'], { encoding: 'utf8' }).stdout?.trim();
  if (prefix) candidates.push(path.join(prefix, 'lib/node_modules/npm/node_modules/node-gyp/bin/node-gyp.js'));
  const bundled = candidates.find((c) => fs.existsSync(c));
  return bundled ? [process.execPath, bundled] : ['npm', 'exec', '--yes', '--', 'node-gyp']; // registry fallback
}

/** node-gyp's environment: headers from /usr/include/node (nodedir), so it downloads nothing. */
export function nodeGypEnv(extra = {}) {
  return { ...process.env, npm_config_nodedir: process.env.npm_config_nodedir || '/usr', npm_config_yes: 'true', ...extra };
}
