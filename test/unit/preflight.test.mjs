// The preflight names the apt packages .ci/run installs (Note [Preflight]): a package the checks tell a
// user to install but CI never installs would make CI fail on a fresh machine, as libclang-rt-14-dev did.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import test from 'node:test';
import { aptPackagesNamed, NEEDS, preflight } from '../../.dev/preflight.mjs';

function ciAptPackages() {
  const text = fs.readFileSync(new URL('../../.ci/run', import.meta.url), 'utf8');
  const names = new Set();
  for (const m of text.matchAll(/^APT_PACKAGES\+?=\(([^)]*)\)/gm)) for (const p of m[1].trim().split(/\s+/)) names.add(p);
  return names;
}

test('every apt package the preflight names is installed by .ci/run', () => {
  const ci = ciAptPackages();
  const named = aptPackagesNamed();
  assert.ok(named.includes('libclang-rt-14-dev') && named.includes('chromium') && named.includes('clang'), `named: ${named}`);
  assert.deepEqual(named.filter((p) => !ci.has(p)), []);
});

test('every layer npm test runs has a preflight entry, and a missing tool is named in one line', () => {
  for (const layer of ['install', 'build', 'unit', 'native', 'fuzz', 'python', 'webview', 'e2e']) assert.ok(NEEDS[layer]?.length, layer);
  // A check that fails yields "<layer>: missing <what>: <how>" with the provider, on one line.
  const saved = NEEDS.fuzz;
  NEEDS.fuzz = [['libFuzzer', () => false, 'apt-get install -y libclang-rt-14-dev']];
  try {
    assert.equal(preflight('fuzz'), 'fuzz: missing libFuzzer: apt-get install -y libclang-rt-14-dev');
    assert.equal(preflight('fuzz', { except: ['libFuzzer'] }), undefined);
  } finally {
    NEEDS.fuzz = saved;
  }
});
