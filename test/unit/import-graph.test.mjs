// The import graph of src/ and webview/ (Note [Import graph] in .dev/import-graph.mjs): no cycle of files, no
// cycle of folders, no import that runs up a layer (Note [Layers] in .dev/layers.mjs). The same check on small
// made-up trees proves it fails when one is added, and lint refuses an upward import as it is typed.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ESLint } from 'eslint';
import { check, report } from '../../.dev/import-graph.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

const made = [];
after(() => made.forEach((d) => fs.rmSync(d, { recursive: true, force: true })));

/** A throwaway tree of TypeScript files: { 'src/core/base/a/x.ts': "import … from '../b/y';", … }. */
function tree(files) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpumem-graph-'));
  made.push(dir);
  for (const [p, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, p)), { recursive: true });
    fs.writeFileSync(path.join(dir, p), text + '\n');
  }
  return dir;
}

test('src/ and webview/ have no cycle of files or folders and no import that runs up a layer', () => {
  const r = check(root);
  assert.ok(r.ok, report(r));
  assert.equal(r.figures.cycles, 0);
  assert.equal(r.figures.upward, 0);
  assert.ok(r.figures.files > 100 && r.figures.folders > 20, `the check read the tree: ${JSON.stringify(r.figures)}`);
  // every layer folder is there and has files (a renamed layer would make its rules match nothing)
  for (const layer of ['src/core/base/', 'src/core/analyses/', 'src/core/views/', 'src/cli/', 'src/glue/', 'webview/']) {
    assert.ok(r.graph.files.some((f) => f.startsWith(layer)), `no file under ${layer}`);
  }
});

test('a cycle of two files is found, and it is a cycle of their folders too', () => {
  const r = check(
    tree({
      'src/core/base/a/x.ts': "import { y } from '../b/y';\nexport const x = 1;",
      'src/core/base/b/y.ts': "import type { x } from '../a/x';\nexport const y = 2;",
    }),
  );
  assert.equal(r.ok, false);
  assert.deepEqual(r.fileCycles, [['src/core/base/a/x.ts', 'src/core/base/b/y.ts']]);
  assert.deepEqual(r.folderCycles, [['src/core/base/a/', 'src/core/base/b/']]);
  assert.match(report(r), /CYCLE of files: src\/core\/base\/a\/x\.ts -> src\/core\/base\/b\/y\.ts/);
});

test('folders that import each other through different files are a cycle even when no file cycle exists', () => {
  // a/p -> b/q, b/r -> c/s, c/t -> a/u: a ring of three folders, while no file is imported back
  const files = {};
  for (const [from, to] of [['a/p', 'b/q'], ['b/r', 'c/s'], ['c/t', 'a/u']]) {
    files[`src/core/analyses/${from}.ts`] = `export * from '../${to}';`;
    files[`src/core/analyses/${to}.ts`] = `export const ${to.replace('/', '_')} = 1;`;
  }
  const r = check(tree(files));
  assert.deepEqual(r.fileCycles, []);
  assert.deepEqual(r.folderCycles, [['src/core/analyses/a/', 'src/core/analyses/b/', 'src/core/analyses/c/']]);
  assert.equal(r.ok, false);
});

test('an import that runs up a layer fails, and so does a webview import of anything but protocol and units', () => {
  const r = check(
    tree({
      'src/core/base/model/m.ts': "import { v } from '../../views/live/v';\nexport const m = v;",
      'src/core/views/live/v.ts': 'export const v = 1;',
      'src/core/base/protocol/p.ts': "export { m } from '../model/m';",
      'src/core/base/units/u.ts': 'export const u = 1;',
      'src/glue/g.ts': "const c = await import('../cli/c');\nexport { c };",
      'src/cli/c.ts': 'export const c = 1;',
      'webview/live/w.ts': "import { m } from '../../src/core/base/model/m';\nimport { p } from '../../src/core/base/protocol/p';\nimport { u } from '../../src/core/base/units/u';",
    }),
  );
  assert.deepEqual(
    r.upward.map(([a, b]) => `${a} -> ${b}`),
    ['src/core/base/model/m.ts -> src/core/views/live/v.ts', 'src/glue/g.ts -> src/cli/c.ts', 'webview/live/w.ts -> src/core/base/model/m.ts'],
  );
  assert.equal(r.ok, false);
  assert.match(report(r), /UPWARD import: src\/core\/base\/model\/m\.ts -> src\/core\/views\/live\/v\.ts \(base may not import views\)/);
});

test('an import that names no file fails (a moved file whose importers were not updated)', () => {
  const r = check(tree({ 'src/core/base/model/m.ts': "import { gone } from './gone';" }));
  assert.deepEqual(r.graph.unresolved, [['src/core/base/model/m.ts', './gone']]);
  assert.equal(r.ok, false);
});

test('lint refuses an upward import where it is written (eslint.config.mjs builds its rules from the same layers)', async () => {
  const eslint = new ESLint({ cwd: root });
  const lint = async (file, code) => (await eslint.lintText(code, { filePath: path.join(root, file) }))[0].messages.filter((m) => m.ruleId === 'no-restricted-imports');
  assert.match((await lint('src/core/base/model/x.ts', "export { advise } from '../../analyses/advice';"))[0]?.message ?? '', /base may not import analyses/);
  assert.match((await lint('src/core/analyses/x/x.ts', "export { LiveRun } from '../../views/live';"))[0]?.message ?? '', /analyses may not import views/);
  assert.match((await lint('src/glue/x.ts', "export { run } from '../cli/commands/run';"))[0]?.message ?? '', /glue may not import cli/);
  assert.match((await lint('webview/live/x.ts', "export type { Model } from '../../src/core/base/model/types';"))[0]?.message ?? '', /webview\/ imports only the protocol and the units/);
  assert.match((await lint('src/core/views/x/x.ts', "import * as vscode from 'vscode';\nexport { vscode };"))[0]?.message ?? '', /must not depend on the VS Code API/);
  assert.deepEqual(await lint('webview/live/x.ts', "export { formatBytes } from '../../src/core/base/units/bytes';\nexport type { LiveTrack } from '../../src/core/base/protocol/live';"), []);
  assert.deepEqual(await lint('src/core/views/x/x.ts', "export { stepReport } from '../../analyses/steps';\nexport { openModel } from '../../base/model/open';"), []);
});
