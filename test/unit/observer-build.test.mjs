// Note [Observer build ahead]: what VS Code's background build and `gpumem run` run, end to end against a real
// Python and the real bootstrap, with a stand-in torch whose torch.utils.cpp_extension plays the compiler (it
// writes the module file, like the test in test/python/test_observer_build.py). The build says when it starts
// (VS Code shows progress then), the second run finds it built, and a machine without a compiler says why.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';
import { buildObserver, observerBuildCommand, parseObserverBuildLine } from '../../src/core/base/launch/index.ts';
import { root, tmpDir } from './reader-support.mjs';

const PY_DIR = path.join(root, 'native/python');

function standInTorch() {
  const dir = tmpDir();
  const pkg = path.join(dir, 'pkgs', 'torch');
  fs.mkdirSync(path.join(pkg, 'utils'), { recursive: true });
  fs.writeFileSync(path.join(pkg, '__init__.py'), '__version__ = "9.9.9+standin"\n');
  fs.writeFileSync(path.join(pkg, 'utils', '__init__.py'), '');
  fs.writeFileSync(
    path.join(pkg, 'utils', 'cpp_extension.py'),
    `import os
def load(name, sources, with_cuda, build_directory, verbose, extra_cflags=None):
    text = "".join(open(s).read() for s in sources)  # as torch does: a missing source fails the build
    built = os.path.join(build_directory, name + ".so")
    if not os.path.exists(built):
        with open(built, "w") as f:
            f.write("so")
    class Module:
        source = text
    return Module
`,
  );
  return dir;
}

function env(dir, extra = {}) {
  return { ...process.env, XDG_CACHE_HOME: path.join(dir, 'cache'), PYTHONPATH: path.join(dir, 'pkgs'), GPUMEM_SESSION_DIR: '/must/not/reach/the/build', ...extra };
}

test('build-observer: the build says when it starts, the next one finds it built, and nothing of GPUMEM_ reaches it', async () => {
  const dir = standInTorch();
  const cmd = observerBuildCommand('python3', PY_DIR, env(dir));
  assert.equal(cmd.env.GPUMEM_SESSION_DIR, undefined);
  assert.equal(cmd.env.PYTHONPATH, [PY_DIR, path.join(dir, 'pkgs')].join(path.delimiter));
  const starts = [];
  const first = await buildObserver(cmd, (s) => starts.push(s));
  assert.equal(first.built, true, first.why ?? '');
  assert.equal(first.already, false);
  assert.equal(first.torch, '9.9.9+standin');
  assert.deepEqual(starts.map((s) => [s.building, s.torch, s.folder]), [[true, '9.9.9+standin', first.folder]]);
  assert.ok(fs.readdirSync(first.folder).some((f) => f.endsWith('.so')), 'the module was written in the cache folder');
  const later = [];
  const second = await buildObserver(cmd, (s) => later.push(s));
  assert.deepEqual([second.built, second.already, later.length], [true, true, 0], 'built before: no progress to show');
});

test('build-observer: without a C++ compiler, not built, with the reason and no start', async () => {
  const dir = standInTorch();
  const cmd = observerBuildCommand('python3', PY_DIR, env(dir, { CXX: 'no-such-compiler-xyz' }));
  cmd.env.PATH = fs.mkdtempSync(path.join(dir, 'bin-')); // a PATH with python3 alone: no compiler on it
  fs.symlinkSync(fs.realpathSync('/usr/bin/python3'), path.join(cmd.env.PATH, 'python3'));
  cmd.file = path.join(cmd.env.PATH, 'python3');
  const starts = [];
  const r = await buildObserver(cmd, (s) => starts.push(s));
  assert.equal(r.built, false);
  assert.equal(r.why, "no C++ compiler (no-such-compiler-xyz) to build the observer of PyTorch's allocator");
  assert.equal(starts.length, 0);
});

test('build-observer: an interpreter that cannot run gives a result, not a hang', async () => {
  const r = await buildObserver({ file: '/no/such/python3', args: ['-m', 'gpumem', 'build-observer', '--json'], env: {} });
  assert.equal(r.built, false);
  assert.match(r.why ?? '', /^cannot run \/no\/such\/python3: .*ENOENT/);
});

test('build-observer lines: the start, the result, and nothing else', () => {
  assert.deepEqual(parseObserverBuildLine('{"building": true, "torch": "2.11.0", "folder": "/c/o"}'), { building: true, torch: '2.11.0', folder: '/c/o' });
  assert.equal(parseObserverBuildLine('{"built": false, "already": false, "why": "x"}')?.why, 'x');
  assert.equal(parseObserverBuildLine('Warning: something a library printed'), undefined);
  assert.equal(parseObserverBuildLine('{"unrelated": 1}'), undefined);
  assert.equal(parseObserverBuildLine('{broken'), undefined);
});
