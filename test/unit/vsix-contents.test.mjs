// What the VSIX ships, as `vsce ls` lists it with the packaging's own selection (VSCE_SELECTION in
// .dev/package.mjs): only what the installed extension runs or shows. Nothing of test/, .dev/, src/, webview/,
// the native sources, node_modules or the project's configuration; and everything the manifest and the README
// point at (the walkthrough's media and samples, the README's pictures, the icon) is there.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { vsceList } from '../../.dev/package.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));

/** What may ship, and why. A file matching none of these is a leak. */
const SHIPS = [
  [/^(package\.json|README\.md|CHANGELOG\.md|LICENSE)$/, 'the manifest and the pages the Marketplace and the Extensions view show'],
  [/^media\/icon\.png$|^media\/[\w-]+\.(css|png)$/, 'the icon, the panels\' CSS and the README\'s pictures'],
  [/^media\/walkthrough\/[\w-]+\.(md|png|svg|py)$/, 'the walkthrough\'s media and sample files'],
  [/^dist\/(extension|cli)\.js(\.map)?$/, 'the bundles (maps only in a development build: the production build deletes them)'],
  [/^dist\/webview\/[\w.-]+\.(js|css|map)$/, 'the panels\' browser bundles and assets'],
  [/^dist\/native\/[\w.-]+\.(node|so)$/, 'the capture reader and the allocator'],
  [/^native\/python\/(README\.md|([\w-]+\/)*[\w-]+\.py)$/, 'the Python side the workload runs'],
  [/^native\/python\/gpumem\/[\w-]+\.cpp$/, 'the observer extension\'s C++, which the workload builds against its torch'],
];

const listed = vsceList();

test('vsce ls lists only what ships: no sources, tests, tooling, dependencies or configuration', () => {
  assert.ok(listed.length > 10, `vsce ls listed ${listed.length} files: ${listed.join(', ')}`);
  const leaks = listed.filter((f) => !SHIPS.some(([re]) => re.test(f)));
  assert.deepEqual(leaks, [], `files that must not ship (check .vscodeignore): ${leaks.join(', ')}`);
  // The same, named by what a leak would be, so the message says which rule broke.
  for (const prefix of ['src/', 'webview/', 'test/', '.dev/', '.ci/', 'node_modules/', 'native/allocator/', 'native/addon/', 'native/format/', '.tools/']) {
    assert.deepEqual(listed.filter((f) => f.startsWith(prefix)), [], `nothing under ${prefix} ships`);
  }
  assert.deepEqual(listed.filter((f) => /__pycache__|\.pyc$|\.gpumem$|\.vsix$/.test(f)), [], 'no bytecode, captures or packages');
});

test('everything the manifest and the README point at, and the Python side the workload runs, ships', () => {
  const wanted = new Set(['package.json', 'README.md', 'CHANGELOG.md', 'LICENSE', manifest.icon]);
  for (const w of manifest.contributes.walkthroughs) {
    for (const s of w.steps) {
      for (const m of [s.media.image, s.media.markdown, s.media.svg].filter(Boolean)) {
        for (const f of typeof m === 'string' ? [m] : Object.values(m)) wanted.add(f);
      }
    }
  }
  // the samples the walkthrough's Open Sample copies into the folder (src/glue/walkthrough/sample.ts)
  for (const f of fs.readdirSync(path.join(ROOT, 'media/walkthrough'))) if (f.endsWith('.py')) wanted.add(`media/walkthrough/${f}`);
  // the README's pictures, which the Extensions view renders from the installed extension
  for (const [, src] of fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8').matchAll(/!\[[^\]]*\]\(([^)\s]+)\)/g)) {
    if (!/^[a-z]+:/.test(src)) wanted.add(src);
  }
  // what the build made (the unit layer may run before a build: then only the sources' files are checked)
  for (const f of ['dist/extension.js', 'dist/cli.js', 'dist/webview/live.js', 'dist/webview/snapshot.js']) if (fs.existsSync(path.join(ROOT, f))) wanted.add(f);
  // the Python side and the observer extension's C++ it builds (native/python/gpumem/_observer_build.py)
  for (const f of fs.readdirSync(path.join(ROOT, 'native/python/gpumem'))) {
    if (/\.(py|cpp)$/.test(f)) wanted.add(`native/python/gpumem/${f}`);
  }
  for (const f of [...wanted]) assert.ok(fs.existsSync(path.join(ROOT, f)), `${f} is named but does not exist`);
  const missing = [...wanted].filter((f) => !listed.includes(f));
  assert.deepEqual(missing, [], `named by the manifest or the README but not in the package: ${missing.join(', ')}`);
});
