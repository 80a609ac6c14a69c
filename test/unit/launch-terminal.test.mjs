// The terminal wrapper (src/core/base/launch/terminal.ts, Note [Terminal]) run for real in /bin/sh: the
// workload's exit code survives, Ctrl-C reaches the workload (Python raises KeyboardInterrupt) but not
// the wrapper, which waits for Enter before closing with the workload's code.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { EXIT_NOTE, terminalEnv, terminalShellLine } from '../../src/core/base/launch/terminal.ts';

/** Runs the wrapper in its own process group (like a terminal's foreground job). */
function runWrapped(cmd) {
  const child = spawn('/bin/sh', ['-c', terminalShellLine(cmd)], { detached: true, stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  const done = new Promise((r) => child.on('exit', (code, signal) => r({ code, signal })));
  return { child, done, output: () => out };
}

async function until(cond, ms = 10_000) {
  const t0 = Date.now();
  while (!cond()) {
    if (Date.now() - t0 > ms) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 25));
  }
}

test('the workload’s exit code is shown and becomes the terminal’s, after Enter', async () => {
  const w = runWrapped({ file: 'python3', args: ['-c', 'import sys; print("hi from the workload"); sys.exit(3)'] });
  await until(() => w.output().includes(EXIT_NOTE));
  assert.match(w.output(), /hi from the workload/);
  assert.match(w.output(), new RegExp(`${EXIT_NOTE} 3\\. Press Enter`));
  assert.equal(w.child.exitCode, null, 'the terminal stays open until Enter');
  w.child.stdin.write('\n');
  assert.deepEqual(await w.done, { code: 3, signal: null });
});

test('Ctrl-C (SIGINT to the foreground group) interrupts the workload, not the wrapper', async () => {
  const w = runWrapped({ file: 'python3', args: ['-c', 'import time\nprint("ready", flush=True)\ntime.sleep(30)'] });
  await until(() => w.output().includes('ready'));
  process.kill(-w.child.pid, 'SIGINT');
  await until(() => w.output().includes(EXIT_NOTE));
  assert.match(w.output(), /KeyboardInterrupt/);
  assert.match(w.output(), new RegExp(`${EXIT_NOTE} 130\\.`));
  w.child.stdin.write('\n');
  assert.deepEqual(await w.done, { code: 130, signal: null });
});

test('arguments with spaces and quotes reach the workload unchanged', async () => {
  const args = ['-c', 'import sys; print(repr(sys.argv[1:]))', "it's a file.py", '--name=$HOME'];
  const w = runWrapped({ file: 'python3', args });
  await until(() => w.output().includes(EXIT_NOTE));
  assert.match(w.output(), /\["it's a file\.py", '--name=\$HOME'\]/);
  w.child.stdin.write('\n');
  assert.equal((await w.done).code, 0);
});

test('terminal env: only the differences, and stale variables removed', () => {
  const base = { PATH: '/usr/bin', HOME: '/h', GPUMEM_SESSION_DIR: '/old' };
  const full = { PATH: '/usr/bin', HOME: '/h', GPUMEM_SESSION_DIR: '/new', PYTHONPATH: '/ext/native/python' };
  assert.deepEqual(terminalEnv(full, base), { GPUMEM_SESSION_DIR: '/new', PYTHONPATH: '/ext/native/python' });
  assert.deepEqual(terminalEnv({ PATH: '/usr/bin' }, base), { HOME: null, GPUMEM_SESSION_DIR: null });
});
