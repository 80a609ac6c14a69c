// The `gpumem` CLI as users run it: the esbuild bundle of src/cli/main.ts in a throwaway install
// (dist/cli.js + dist/native/libgpumem_allocator.so (the stub allocator) + native/python), run as a
// subprocess: argument handling, error messages, exit codes, signals, and the control commands
// against a scripted control server.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';
import { formatBytes } from '../../src/core/base/units/bytes.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const tmp = (p) => fs.mkdtempSync(path.join(os.tmpdir(), p));
let install; // the throwaway extension root
let cli;

before(async () => {
  install = tmp('gpumem-cli-');
  cli = path.join(install, 'dist', 'cli.js');
  await esbuild.build({
    entryPoints: [path.join(ROOT, 'src/cli/main.ts')], bundle: true, platform: 'node', format: 'cjs', target: 'node20',
    outfile: cli, banner: { js: '#!/usr/bin/env node' }, logLevel: 'silent',
  });
  fs.mkdirSync(path.join(install, 'dist', 'native'));
  fs.mkdirSync(path.join(install, 'native'));
  fs.symlinkSync(path.join(ROOT, 'native', 'python'), path.join(install, 'native', 'python'));
  const cc = spawnSync('sh', ['-c', 'command -v cc || command -v gcc'], { encoding: 'utf8' }).stdout.trim();
  execFileSync(cc, ['-shared', '-fPIC', '-o', path.join(install, 'dist/native/libgpumem_allocator.so'),
    path.join(ROOT, 'test/python/stub_allocator.c'), '-lpthread']);
});

function gpumem(args, opts = {}) {
  const env = { ...process.env, PYTHONPATH: path.join(ROOT, 'test/python/fake_torch'), ...(opts.env ?? {}) };
  for (const k of Object.keys(env)) if (k.startsWith('GPUMEM_')) delete env[k];
  return spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', cwd: opts.cwd ?? install, env, input: opts.input ?? '' });
}

function script(body, name = 'train.py') {
  const dir = tmp('gpumem-work-');
  const file = path.join(dir, name);
  fs.writeFileSync(file, body);
  return file;
}

test('top-level help and unknown commands', () => {
  const h = gpumem(['--help']);
  assert.equal(h.status, 0);
  for (const c of ['run', 'ping', 'empty-cache', 'snapshot', 'summary', 'export', 'replay', 'advise', 'mcp']) assert.match(h.stdout, new RegExp(`^  ${c} `, 'm'));
  const none = gpumem([]);
  assert.equal(none.status, 2);
  assert.match(none.stdout, /Usage: gpumem <command>/);
  const bad = gpumem(['rnu']);
  assert.equal(bad.status, 2);
  assert.equal(bad.stderr, 'gpumem: unknown command "rnu". Commands: run, ping, empty-cache, snapshot, summary, export, replay, advise, mcp (gpumem --help).\n');
});

test('every command has --help', () => {
  for (const c of ['run', 'ping', 'empty-cache', 'snapshot', 'summary', 'export', 'replay', 'advise', 'mcp']) {
    const r = gpumem([c, '--help']);
    assert.equal(r.status, 0, c);
    assert.match(r.stdout, new RegExp(`^Usage: gpumem ${c} `), c);
  }
  assert.match(gpumem(['help', 'snapshot']).stdout, /^Usage: gpumem snapshot/);
});

test('run: usage errors exit 2 and say what to do', () => {
  const cases = [
    [['run'], 'gpumem run: nothing to run: give a script (gpumem run train.py) or -m module'],
    [['run', '--segments', 'huge', 'x.py'], "gpumem run: --segments must be 'expandable' or 'fixed', got 'huge'"],
    [['run', '--sample-ms', 'often', 'x.py'], "gpumem run: --sample-ms must be a non-negative whole number (0 = off), got 'often'"],
    [['run', '--budget', '1GB', 'x.py'], "gpumem run: --budget must be 0 (unbounded) or at least 1048576 bytes (1 MiB), got '1GB' (GB is decimal; write GiB)"],
    [['run', '--out'], 'gpumem run: --out needs a value'],
    [['run', '--frobnicate', 'x.py'], 'gpumem run: unknown option --frobnicate'],
    [['run', '-m'], 'gpumem run: -m needs a module name, e.g. gpumem run -m mypkg.train'],
    [['run', 'missing.py'], 'gpumem run: no such script: missing.py'],
    // --allocator is the mode; the library's path has its own flag.
    [['run', '--allocator', '/x/libgpumem_allocator.so', 'x.py'], "gpumem run: --allocator must be 'auto', 'lens' or 'pytorch', got '/x/libgpumem_allocator.so'"],
    [['run', '--allocator-so', '/no/lib.so', script('print(1)\n')], 'gpumem run: --allocator-so: no such file: /no/lib.so (build it with make -C native/allocator)'],
  ];
  for (const [args, message] of cases) {
    const r = gpumem(args);
    assert.equal(r.status, 2, args.join(' '));
    assert.equal(r.stderr.split('\n')[0], message);
    assert.match(r.stderr.split('\n')[1], /^Usage: gpumem run/);
  }
  const py = gpumem(['run', '--python', '/no/python3', script('print(1)\n')]);
  assert.equal(py.status, 1);
  assert.match(py.stderr, /"\/no\/python3" does not exist or is not executable\. Fix gpuMemoryLens\.pythonPath \(or --python\)/);
});

test('run: the workload gets its argv, stdin and stdout; the CLI returns its exit code and names the capture', () => {
  const file = script('import sys, torch\nx = torch.empty(4096, device="cuda")\nprint(sys.argv[1:], sys.stdin.read().strip())\nsys.exit(5)\n');
  const out = tmp('gpumem-out-');
  // The script's own --help and --out must reach it, not the CLI.
  // The lens allocator (the stub) records; `auto` would observe the stand-in torch's own allocator instead.
  const r = gpumem(['run', '--out', out, '--allocator', 'lens', '--sample-ms', '0', '--segments', 'fixed', file, '--help', '--out', 'x'], { input: 'from stdin\n' });
  assert.equal(r.status, 5, r.stderr);
  assert.equal(r.stdout, "['--help', '--out', 'x'] from stdin\n");
  const [session] = fs.readdirSync(out);
  assert.match(session, /^\d{8}-\d{6}-train$/);
  const dir = path.join(out, session);
  const captures = fs.readdirSync(dir).filter((f) => f.endsWith('.gpumem'));
  assert.equal(captures.length, 1);
  assert.match(r.stderr, new RegExp(`^gpumem: session folder ${dir}\n`));
  assert.ok(r.stderr.endsWith(`gpumem: capture ${path.join(dir, captures[0])}\n`), r.stderr);
  const config = JSON.parse(fs.readFileSync(path.join(dir, captures[0]), 'utf8').split('\n')[0].slice('configure '.length));
  assert.equal(config.segments, 'fixed');
  assert.equal(config.sample_interval_ms, 0);
  assert.deepEqual(config.header.argv, [file, '--help', '--out', 'x']);
  const info = JSON.parse(fs.readFileSync(path.join(dir, 'session.json'), 'utf8'));
  assert.deepEqual(info.command.slice(1), [file, '--help', '--out', 'x']);
});

test('run: -m module and a plain command after --', () => {
  const mod = script('import sys\nprint(__name__, sys.argv[1:])\n', 'mymod.py');
  const out = tmp('gpumem-out-');
  const r = gpumem(['run', '--out', out, '-m', 'mymod', 'a'], { env: { PYTHONPATH: path.dirname(mod) } });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout, "__main__ ['a']\n");
  assert.match(r.stderr, /no capture was written: the workload never used CUDA/);
  const sh = gpumem(['run', '--out', out, '--', 'sh', '-c', 'exit 4']);
  assert.equal(sh.status, 4);
  const missing = gpumem(['run', '--out', out, '--', 'no-such-launcher-xyz']);
  assert.equal(missing.status, 127);
  assert.match(missing.stderr, /cannot start "no-such-launcher-xyz": not found/);
});

test('run: SIGTERM to the CLI reaches the workload, and the exit code says so', async () => {
  const file = script('import sys, time\nprint("ready", flush=True)\ntime.sleep(30)\n');
  const env = { ...process.env };
  for (const k of Object.keys(env)) if (k.startsWith('GPUMEM_')) delete env[k];
  const child = spawn(process.execPath, [cli, 'run', '--out', tmp('gpumem-out-'), file], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  await new Promise((resolve) => child.stdout.once('data', resolve));
  const t0 = Date.now();
  child.kill('SIGTERM');
  const code = await new Promise((resolve) => child.on('exit', (c) => resolve(c)));
  assert.equal(code, 128 + os.constants.signals.SIGTERM);
  assert.ok(Date.now() - t0 < 10000, 'the workload was stopped, not waited for');
});

test('run: SIGINT (not from a terminal) reaches the workload as KeyboardInterrupt; the capture is closed', async () => {
  const file = script('import time, torch\ntorch.cuda.init()\nprint("ready", flush=True)\ntime.sleep(30)\n');
  const out = tmp('gpumem-out-');
  const env = { ...process.env, PYTHONPATH: path.join(ROOT, 'test/python/fake_torch') };
  for (const k of Object.keys(env)) if (k.startsWith('GPUMEM_')) delete env[k];
  const child = spawn(process.execPath, [cli, 'run', '--out', out, '--sample-ms', '0', file], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  await new Promise((resolve) => child.stdout.once('data', resolve));
  child.kill('SIGINT');
  const code = await new Promise((resolve) => child.on('exit', (c) => resolve(c)));
  assert.equal(code, 128 + os.constants.signals.SIGINT, stderr);
  assert.match(stderr, /KeyboardInterrupt/);
  const [session] = fs.readdirSync(out);
  const capture = fs.readdirSync(path.join(out, session)).find((f) => f.endsWith('.gpumem'));
  const log = fs.readFileSync(path.join(out, session, capture), 'utf8').split('\n');
  assert.ok(log.includes('shutdown 130'), log.join('\n'));
});

test('run: a missing allocator build is reported with the fix', () => {
  const bare = tmp('gpumem-bare-');
  fs.mkdirSync(path.join(bare, 'dist'));
  fs.copyFileSync(cli, path.join(bare, 'dist', 'cli.js'));
  const r = spawnSync(process.execPath, [path.join(bare, 'dist', 'cli.js'), 'run', script('print(1)\n')], { encoding: 'utf8' });
  assert.equal(r.status, 1);
  assert.equal(r.stderr, `gpumem run: The lens allocator is not built: ${path.join(bare, 'dist/native/libgpumem_allocator.so')} is missing. Run \`npm run build\` (or \`make -C native/allocator\`).\n`);
});

/** A session folder whose one live process (this test process's pid) is served by a scripted server. */
async function fakeSession(reply) {
  const dir = tmp('gpumem-session-');
  const sock = path.join(dir, `ctl-${process.pid}.sock`);
  const srv = net.createServer((c) => {
    c.setEncoding('utf8');
    c.on('data', (d) => {
      const req = JSON.parse(d.split('\n')[0]);
      c.write(JSON.stringify({ id: req.id, ...reply(req) }) + '\n');
    });
  });
  await new Promise((r) => srv.listen(sock, r));
  fs.writeFileSync(path.join(dir, `proc-${process.pid}.json`),
    JSON.stringify({ version: 1, pid: process.pid, rank: 1, local_rank: 1, world_size: 2, capture: path.join(dir, 'c.gpumem'), socket: sock }));
  return { dir, close: () => new Promise((r) => srv.close(r)) };
}

/** Runs the CLI asynchronously (the scripted server lives in this process's event loop). */
function gpumemAsync(args) {
  return new Promise((resolve) => {
    const env = { ...process.env };
    for (const k of Object.keys(env)) if (k.startsWith('GPUMEM_')) delete env[k];
    const child = spawn(process.execPath, [cli, ...args], { env });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('exit', (status) => resolve({ status, stdout, stderr }));
  });
}

test('empty-cache, snapshot and ping print what the workload answered', async () => {
  const before = 3 * 1024 ** 3 + 512 * 1024 ** 2;
  const after = 1024 ** 3;
  const s = await fakeSession((req) => ({
    ping: { ok: true, pid: process.pid, rank: 1, devices: [{ index: 0, allocated: 5 * 1024 ** 2, reserved: 20 * 1024 ** 2 }] },
    empty_cache: { ok: true, reserved_before: before, reserved_after: after },
    snapshot: { ok: true, pickle: '/s/snapshot-1-1.pickle', offset: 99 },
  })[req.cmd]);
  try {
    const e = await gpumemAsync(['empty-cache', '--session', s.dir]);
    assert.equal(e.status, 0, e.stderr);
    assert.equal(e.stdout, `pid ${process.pid} rank 1: reserved ${formatBytes(before)} → ${formatBytes(after)} (released ${formatBytes(before - after)})\n`);
    const snap = await gpumemAsync(['snapshot', '--session', s.dir]);
    assert.equal(snap.stdout, '/s/snapshot-1-1.pickle\n');
    const p = await gpumemAsync(['ping', '--session', s.dir, '--pid', String(process.pid), '--json']);
    assert.equal(JSON.parse(p.stdout).devices[0].reserved, 20 * 1024 ** 2);
    const other = await gpumemAsync(['ping', '--session', s.dir, '--pid', '1']);
    assert.equal(other.status, 2);
    assert.match(other.stderr, new RegExp(`no running process with pid 1 in ${s.dir}`));
  } finally {
    await s.close();
  }
});

test('control commands without a running workload say how to get one', () => {
  const empty = tmp('gpumem-session-');
  const r = gpumem(['ping', '--session', empty]);
  assert.equal(r.status, 2);
  assert.match(r.stderr, /no workload process has used CUDA in .* yet \(no proc-\*\.json\)/);
  const root = tmp('gpumem-root-');
  const e = gpumem(['empty-cache', '--out', root]);
  assert.equal(e.status, 2);
  assert.match(e.stderr, /no running workload under .*: start one with `gpumem run`, or pass --session DIR/);
  const x = gpumem(['snapshot', 'extra']);
  assert.equal(x.status, 2);
  assert.match(x.stderr, /unexpected argument "extra"/);
});

test('replay: usage errors exit 2 and say what is accepted; a missing file exits 1', () => {
  const noFile = gpumem(['replay']);
  assert.equal(noFile.status, 2);
  assert.match(noFile.stderr, /^gpumem replay: needs exactly one FILE/);
  assert.match(noFile.stderr, /\nUsage: gpumem replay FILE/);
  const policy = gpumem(['replay', 'x.gpumem', '--policy', 'native']);
  assert.equal(policy.status, 2);
  assert.match(policy.stderr, /--policy must be one of pytorch, pytorch-expandable, lens, lens-no-trim, all \(got "native"\)/);
  const decimal = gpumem(['replay', 'x.gpumem', '--capacity', '80GB']);
  assert.equal(decimal.status, 2);
  assert.match(decimal.stderr, /--capacity: "80GB" is not a size \(GB is decimal; write GiB\)/);
  const device = gpumem(['replay', 'x.gpumem', '--device', 'first']);
  assert.equal(device.status, 2);
  assert.match(device.stderr, /--device must be a whole number/);
  const missing = gpumem(['replay', 'no-such.gpumem', '--capacity', '80GiB']);
  assert.equal(missing.status, 1);
  assert.match(missing.stderr, /no-such\.gpumem does not exist/);
});

test('summary/export report clearly when the reader is not built in', (t) => {
  if (fs.existsSync(path.join(ROOT, 'src/cli/commands/summary.ts'))) return t.skip('the reader commands are built in; their own tests cover them');
  const r = gpumem(['summary', 'x.gpumem']);
  assert.equal(r.status, 1);
  assert.match(r.stderr, /gpumem summary: not built into this gpumem yet/);
});
