// The Node control client against the allocator's real control server: a Python workload (stand-in
// torch, real libgpumem_allocator.so on its simulated device) launched with src/core/base/launch's env.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildWorkloadEnv, installPaths } from '../../src/core/base/launch/index.ts';
import { createSessionFolder, liveProcesses } from '../../src/core/base/sessionFolder/index.ts';
import { ping, emptyCache, snapshot, mark, sendRequest } from '../../src/core/base/control/index.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const SO = path.join(ROOT, 'dist/native/libgpumem_allocator.so');

const WORKLOAD = `
import json, sys, torch
a = torch.empty(1 << 20, device="cuda")
b = torch.empty(40 << 20, device="cuda")
b.free()
print(json.dumps({"allocated": torch.cuda.memory_allocated(), "reserved": torch.cuda.memory_reserved()}), flush=True)
sys.stdin.readline()
`;

async function waitFor(fn, ms = 10000) {
  const t0 = Date.now();
  for (;;) {
    const v = fn();
    if (v) return v;
    if (Date.now() - t0 > ms) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 50));
  }
}

test('ping, empty_cache, snapshot and mark against the real server', async (t) => {
  if (!fs.existsSync(SO)) return t.skip('dist/native/libgpumem_allocator.so is not built (make -C native/allocator)');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpumem-ctl-real-'));
  const script = path.join(dir, 'train.py');
  fs.writeFileSync(script, WORKLOAD);
  const session = createSessionFolder(path.join(dir, 'sessions'), 'train.py');
  const env = buildWorkloadEnv({
    sessionDir: session.dir, allocatorSo: SO, pythonPathPrefix: installPaths(ROOT).pythonDir,
    settings: { backend: 'sim', sampleMs: 0, allocator: 'lens' }, // the real allocator on its simulated device
    baseEnv: { PATH: process.env.PATH, PYTHONPATH: path.join(ROOT, 'test/python/fake_torch') },
  });
  const child = spawn('python3', [script], { env, stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  try {
    const first = JSON.parse(await new Promise((resolve) => child.stdout.once('data', (d) => resolve(String(d)))));
    const [proc] = await waitFor(() => liveProcesses(session.dir));
    assert.equal(proc.pid, child.pid);

    const p = await ping(proc.socket, 1000);
    assert.equal(p.pid, child.pid);
    assert.deepEqual([p.devices[0].allocated, p.devices[0].reserved], [first.allocated, first.reserved]);

    const e = await emptyCache(proc.socket);
    assert.equal(e.reserved_before, first.reserved);
    assert.ok(e.reserved_after < e.reserved_before, `reserved ${e.reserved_before} → ${e.reserved_after}`);
    assert.equal((await ping(proc.socket)).devices[0].reserved, e.reserved_after);

    const s = await snapshot(proc.socket);
    assert.equal(path.dirname(s.pickle), session.dir);
    assert.ok(fs.statSync(s.pickle).size > 0);
    assert.equal(typeof s.offset, 'number');
    assert.equal((await mark(proc.socket, 'from node')).ok, true);
    const bad = await sendRequest(proc.socket, { cmd: 'no_such_command' });
    assert.equal(bad.ok, false);
  } finally {
    child.stdin.end('\n');
    const code = await new Promise((r) => child.on('exit', (c) => r(c)));
    assert.equal(code, 0, stderr);
  }
});
