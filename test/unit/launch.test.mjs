// src/core/base/launch: session folders, the workload environment, command lines, interpreter lookup —
// and that the environment it builds really switches the Python bootstrap on (a real python3 run).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  buildWorkloadEnv, prependPath, buildCommand, expandLaunchTemplate, splitShellWords, shellQuote, toShellLine, findPython, installPaths,
} from '../../src/core/base/launch/index.ts';
import { createSessionFolder, sessionSlug } from '../../src/core/base/sessionFolder/index.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const tmp = (p) => fs.mkdtempSync(path.join(os.tmpdir(), p));

test('createSessionFolder makes a private, timestamped folder and never reuses one', () => {
  const root = path.join(tmp('gpumem-root-'), 'nested', 'root');
  const old = process.umask(0o022);
  try {
    const when = new Date(2026, 10, 21, 23, 5, 9);
    const a = createSessionFolder(root, 'src/my train!.py', { command: ['python3', 'my train!.py'], cwd: '/w' }, when);
    const b = createSessionFolder(root, 'src/my train!.py', undefined, when);
    assert.equal(path.basename(a.dir), '20261121-230509-my-train');
    assert.equal(path.basename(b.dir), '20261121-230509-my-train-2');
    assert.equal(fs.statSync(a.dir).mode & 0o777, 0o700);
    const info = JSON.parse(fs.readFileSync(path.join(a.dir, 'session.json'), 'utf8'));
    assert.deepEqual(info, { version: 1, name: 'my-train', created: when.toISOString(), command: ['python3', 'my train!.py'], cwd: '/w' });
    assert.equal(fs.existsSync(path.join(b.dir, 'session.json')), false);
  } finally {
    process.umask(old);
  }
});

test('sessionSlug keeps names file-system safe and bounded', () => {
  assert.equal(sessionSlug('-m'), 'm');
  assert.equal(sessionSlug('...'), 'session');
  assert.equal(sessionSlug('pkg.train'), 'pkg.train');
  assert.equal(sessionSlug('x'.repeat(80) + '.py').length, 40);
});

test('buildWorkloadEnv sets the contract variables and puts the bootstrap first on PYTHONPATH', () => {
  const env = buildWorkloadEnv({
    sessionDir: '/s/1', allocatorSo: '/x/lib.so', pythonPathPrefix: '/ext/native/python',
    settings: { segments: 'fixed', trimOnGrowth: false, stacks: false, events: false, sampleMs: 0, backend: 'sim', simCapacity: 1 << 30, allocator: 'pytorch' },
    userRoots: ['/w1', '/w2'],
    baseEnv: {
      PATH: '/bin', PYTHONPATH: `/mine${path.delimiter}/ext/native/python`, GPUMEM_SESSION_DIR: '/stale', GPUMEM_FOO: '1',
      GPUMEM_STRICT_COMPILE: '1', GPUMEM_GIL_FREE_WALK: '0', GPUMEM_MODULE_PATHS: '0', GPUMEM_TAGS: '0', GPUMEM_KEEPER: '0',
      GPUMEM_KEEPER_MS: '50',
    },
  });
  assert.deepEqual(env, {
    PATH: '/bin',
    // The user's own switches (native/python/README.md) pass through; stale session plumbing does not. The ones
    // that turn a recording part off too (Note [Not recorded]).
    GPUMEM_STRICT_COMPILE: '1', GPUMEM_GIL_FREE_WALK: '0', GPUMEM_MODULE_PATHS: '0', GPUMEM_TAGS: '0', GPUMEM_KEEPER: '0',
    GPUMEM_KEEPER_MS: '50',
    PYTHONPATH: `/ext/native/python${path.delimiter}/mine`,
    GPUMEM_SESSION_DIR: '/s/1', GPUMEM_ALLOCATOR_SO: '/x/lib.so', GPUMEM_SEGMENTS: 'fixed', GPUMEM_TRIM: '0', GPUMEM_STACKS: '0', GPUMEM_EVENTS: '0',
    GPUMEM_SAMPLE_MS: '0', GPUMEM_BACKEND: 'sim', GPUMEM_SIM_CAPACITY: String(1 << 30), GPUMEM_ALLOCATOR: 'pytorch',
    GPUMEM_BUDGET: String(2 ** 30), // Note [Capture budget]: 1 GiB when not set
    GPUMEM_BACKWARD_LINKS: '1', // Note [Backward on the forward line]: on when not set
    GPUMEM_USER_ROOTS: `/w1${path.delimiter}/w2`,
  });
});

test('buildWorkloadEnv defaults and rejects what the bootstrap would reject', () => {
  const env = buildWorkloadEnv({ sessionDir: '/s', allocatorSo: '/a.so', pythonPathPrefix: '/p', baseEnv: {} });
  assert.equal(env.GPUMEM_SEGMENTS, 'expandable');
  assert.equal(env.GPUMEM_STACKS, '1');
  assert.equal(env.GPUMEM_BACKWARD_LINKS, '1', 'backward on its forward line unless turned off');
  assert.equal(env.GPUMEM_EVENTS, '1', 'every allocation recorded unless figures only is asked for');
  assert.equal(env.GPUMEM_TRIM, '1');
  assert.equal(env.GPUMEM_SAMPLE_MS, '200');
  assert.equal(env.GPUMEM_BACKEND, 'cuda');
  assert.equal(env.GPUMEM_ALLOCATOR, 'auto'); // Note [Default allocator mode]
  assert.equal(env.PYTHONPATH, '/p');
  assert.throws(() => buildWorkloadEnv({ sessionDir: '/s', allocatorSo: '/a.so', pythonPathPrefix: '/p', settings: { allocator: 'rmm' } }),
    { message: "GPUMEM_ALLOCATOR must be 'auto', 'lens' or 'pytorch', got 'rmm'" });
  assert.throws(() => buildWorkloadEnv({ sessionDir: '/s', allocatorSo: '/a.so', pythonPathPrefix: '/p', settings: { segments: 'huge' } }),
    { message: "GPUMEM_SEGMENTS must be 'expandable' or 'fixed', got 'huge'" });
  assert.throws(() => buildWorkloadEnv({ sessionDir: '/s', allocatorSo: '/a.so', pythonPathPrefix: '/p', settings: { sampleMs: -1 } }),
    { message: 'GPUMEM_SAMPLE_MS must be a non-negative whole number (0 = off), got -1' });
  // Note [Capture budget]: 0 is unbounded; anything under 1 MiB cannot hold a window and is refused.
  const budget = (budgetBytes) => buildWorkloadEnv({ sessionDir: '/s', allocatorSo: '/a.so', pythonPathPrefix: '/p', baseEnv: {}, settings: { budgetBytes } });
  assert.equal(budget(256 * 2 ** 20).GPUMEM_BUDGET, String(256 * 2 ** 20));
  assert.equal(budget(0).GPUMEM_BUDGET, '0');
  assert.throws(() => budget(4096), { message: 'GPUMEM_BUDGET must be 0 (unbounded) or at least 1048576 bytes (1 MiB), got 4096' });
  assert.throws(() => buildWorkloadEnv({ sessionDir: 'rel', allocatorSo: '/a.so', pythonPathPrefix: '/p' }), /session folder path must be absolute/);
  assert.equal(prependPath('/p', `${path.delimiter}/a`), `/p${path.delimiter}${path.delimiter}/a`); // the user's empty entry stays
});

test('buildCommand runs scripts and modules unchanged', () => {
  assert.deepEqual(buildCommand('/py', { kind: 'script', path: 'a b.py' }, ['--lr', '0.1']), { file: '/py', args: ['a b.py', '--lr', '0.1'] });
  assert.deepEqual(buildCommand('/py', { kind: 'module', name: 'pkg.train' }, ['x']), { file: '/py', args: ['-m', 'pkg.train', 'x'] });
  assert.throws(() => buildCommand('', { kind: 'script', path: 'a.py' }), /gpuMemoryLens.pythonPath/);
  assert.throws(() => buildCommand('/py', { kind: 'module', name: '' }), /-m needs a module name/);
});

test('launch templates expand ${file} and ${python} inside words, after shell-like splitting', () => {
  const cmd = expandLaunchTemplate('torchrun --nproc_per_node=2 "${file}" --tag \'a b\' x\\ y', { file: '/w/my train.py', python: '/py' });
  assert.deepEqual(cmd, { file: 'torchrun', args: ['--nproc_per_node=2', '/w/my train.py', '--tag', 'a b', 'x y'] });
  assert.deepEqual(expandLaunchTemplate('${python} -X dev ${file}', { file: '/f.py', python: '/v/bin/python' }), { file: '/v/bin/python', args: ['-X', 'dev', '/f.py'] });
  assert.throws(() => expandLaunchTemplate('${workspaceFolder}/run.sh', { file: 'f', python: 'p' }), /only \$\{file\} and \$\{python\} are known/);
  assert.throws(() => expandLaunchTemplate('   ', { file: 'f', python: 'p' }), /launchCommand is empty/);
  assert.throws(() => splitShellWords('echo "unterminated'), /Unterminated " quote/);
});

test('shellQuote round-trips through a real shell and through splitShellWords', () => {
  const words = ['plain', 'with space', "it's", 'a"b', '$HOME', '`x`', '', 'back\\slash', 'ünï'];
  const line = toShellLine({ file: 'printf', args: ['%s\\n', ...words] });
  assert.deepEqual(splitShellWords(words.map(shellQuote).join(' ')), words);
  const out = execFileSync('sh', ['-c', line], { encoding: 'utf8' });
  assert.deepEqual(out.split('\n').slice(0, -1), words);
});

test('findPython uses the setting, else python3 on PATH, and says what to fix', () => {
  const bin = tmp('gpumem-bin-');
  const py = path.join(bin, 'python3');
  fs.writeFileSync(py, '#!/bin/sh\n', { mode: 0o755 });
  assert.equal(findPython('', bin), py);
  assert.equal(findPython(undefined, bin), py);
  assert.equal(findPython('python3', bin), py);
  assert.throws(() => findPython('/no/such/python', bin), /"\/no\/such\/python" does not exist or is not executable\. Fix gpuMemoryLens\.pythonPath/);
  assert.throws(() => findPython('', tmp('gpumem-empty-')), /No python3 found on PATH/);
});

test('installPaths points at the shipped pieces relative to the extension root', () => {
  assert.deepEqual(installPaths('/ext'), { root: '/ext', allocatorSo: '/ext/dist/native/libgpumem_allocator.so', pythonDir: '/ext/native/python' });
  assert.equal(fs.existsSync(path.join(installPaths(ROOT).pythonDir, 'sitecustomize.py')), true);
});

test('the environment switches the real Python bootstrap on (stub allocator, stand-in torch)', (t) => {
  const cc = spawnSync('sh', ['-c', 'command -v cc || command -v gcc'], { encoding: 'utf8' }).stdout.trim();
  if (!cc) return t.skip('no C compiler for the stub allocator');
  const dir = tmp('gpumem-launch-');
  const so = path.join(dir, 'libstub.so');
  execFileSync(cc, ['-shared', '-fPIC', '-o', so, path.join(ROOT, 'test/python/stub_allocator.c'), '-lpthread']);
  const session = createSessionFolder(path.join(dir, 'sessions'), 'probe.py');
  const script = path.join(dir, 'probe.py');
  fs.writeFileSync(script, 'import sys, torch\nx = torch.empty(2048, device="cuda")\nprint(torch.cuda.memory_allocated())\nsys.exit(3)\n');
  const env = buildWorkloadEnv({
    sessionDir: session.dir, allocatorSo: so, pythonPathPrefix: installPaths(ROOT).pythonDir,
    settings: { sampleMs: 0, allocator: 'lens' }, baseEnv: { PATH: process.env.PATH, PYTHONPATH: path.join(ROOT, 'test/python/fake_torch') },
  });
  const cmd = buildCommand('python3', { kind: 'script', path: script });
  const r = spawnSync(cmd.file, cmd.args, { env, encoding: 'utf8' });
  assert.equal(r.status, 3, r.stderr);
  assert.equal(r.stdout.trim(), '2048');
  const procs = fs.readdirSync(session.dir).filter((f) => f.startsWith('proc-'));
  assert.equal(procs.length, 1);
  const proc = JSON.parse(fs.readFileSync(path.join(session.dir, procs[0]), 'utf8'));
  assert.equal(proc.capture, path.join(session.dir, `capture-${proc.pid}.gpumem`));
  const log = fs.readFileSync(proc.capture, 'utf8').split('\n');
  assert.match(log[0], /^configure /);
  assert.ok(log.includes('malloc 2048 backward=0'));
  assert.ok(log.includes('shutdown 3'));
});
