#!/usr/bin/env node
// Writes the assistant's tool table (src/core/views/assistant/tools.ts, Note [Tool contract]) into package.json's
// `contributes.languageModelTools`, which VS Code reads before the extension runs: the names, descriptions and input
// schemas are declared once, in the table, and the MCP server (`gpumem mcp`) serves the same table at run time.
//
//   node .dev/gen-tools.mjs           rewrite package.json's languageModelTools
//   node .dev/gen-tools.mjs --check   exit 1 when it is stale (test/unit/assistant-tools.test.mjs runs it)
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const TABLE = 'src/core/views/assistant/tools.ts';
const MANIFEST = 'package.json';
// The live panel's icon: the tools answer the same questions the panels show.
const ICON = '$(graph-line)';

/** The tool table, bundled on the fly (tools.ts imports nothing). */
export async function loadTools(root = ROOT) {
  const { build } = await import('esbuild');
  const out = await build({ entryPoints: [path.join(root, TABLE)], bundle: true, format: 'esm', platform: 'node', write: false, logLevel: 'silent' });
  return (await import(`data:text/javascript;base64,${Buffer.from(out.outputFiles[0].text).toString('base64')}`)).TOOLS;
}

/** One `contributes.languageModelTools` entry. */
export function toolEntry(t) {
  return {
    name: t.name,
    displayName: t.title,
    toolReferenceName: t.name,
    canBeReferencedInPrompt: true,
    icon: ICON,
    userDescription: t.userDescription,
    modelDescription: t.modelDescription,
    tags: ['gpu', 'pytorch', 'memory', ...(t.changesRun ? ['changes-run'] : [])],
    inputSchema: t.inputSchema,
  };
}

/** package.json with its languageModelTools written from the table (everything else kept as it is). */
export function manifest(tools, text) {
  const pkg = JSON.parse(text);
  pkg.contributes.languageModelTools = tools.map(toolEntry);
  return JSON.stringify(pkg, null, 2) + '\n';
}

export async function outputs(root = ROOT) {
  const now = fs.readFileSync(path.join(root, MANIFEST), 'utf8');
  return { [MANIFEST]: [now, manifest(await loadTools(root), now)] };
}

if (process.argv[1] && pathToFileURL(path.resolve(process.argv[1])).href === import.meta.url) {
  const check = process.argv.includes('--check');
  const [[file, [now, want]]] = Object.entries(await outputs());
  if (now !== want) {
    if (check) {
      console.error(`stale (the tool table changed): ${file}; run \`npm run gen-tools\` and commit the result`);
      process.exit(1);
    }
    fs.writeFileSync(path.join(ROOT, file), want);
  }
  console.log(now === want ? 'up to date' : `wrote: ${file}`);
}
