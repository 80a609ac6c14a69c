// src/core/base/control: the client against real Unix sockets (a scripted server here; the allocator's own
// server is exercised by control-allocator.test.mjs), and process discovery from proc files.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { sendRequest, ping, emptyCache, snapshot, mark, ControlError } from '../../src/core/base/control/index.ts';
import { listProcesses, liveProcesses, isAlive, listSessionFolders } from '../../src/core/base/sessionFolder/index.ts';

const tmp = (p) => fs.mkdtempSync(path.join(os.tmpdir(), p));

/** A Unix-socket server answering each request line with `answer(request)` (a string is sent raw). */
async function server(answer) {
  const sock = path.join(tmp('gpumem-ctl-'), 's.sock');
  const seen = [];
  const srv = net.createServer((c) => {
    let buf = '';
    c.setEncoding('utf8');
    c.on('data', (d) => {
      buf += d;
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const req = JSON.parse(buf.slice(0, nl));
        buf = buf.slice(nl + 1);
        seen.push(req);
        const a = answer(req, c);
        if (a !== undefined) c.write(typeof a === 'string' ? a : JSON.stringify(a) + '\n');
      }
    });
  });
  await new Promise((r) => srv.listen(sock, r));
  return { sock, seen, close: () => new Promise((r) => srv.close(r)) };
}

test('requests carry cmd and an id; typed helpers return the reply fields', async () => {
  const s = await server((req) => ({
    ping: { ok: true, id: req.id, pid: 42, rank: 1, devices: [{ index: 0, allocated: 1024, reserved: 2097152 }] },
    empty_cache: { ok: true, id: req.id, reserved_before: 3 << 30, reserved_after: 1 << 30 },
    snapshot: { ok: true, id: req.id, pickle: req.path ?? '/s/snapshot-42-1.pickle', offset: 4096 },
    mark: { ok: true, id: req.id },
  })[req.cmd]);
  try {
    const p = await ping(s.sock);
    assert.deepEqual([p.pid, p.rank, p.devices[0].reserved], [42, 1, 2097152]);
    const e = await emptyCache(s.sock);
    assert.deepEqual([e.reserved_before, e.reserved_after], [3 << 30, 1 << 30]);
    assert.equal((await snapshot(s.sock)).pickle, '/s/snapshot-42-1.pickle');
    assert.equal((await snapshot(s.sock, '/tmp/x.pickle')).pickle, '/tmp/x.pickle');
    assert.equal((await mark(s.sock, 'epoch 2')).ok, true);
    assert.deepEqual(s.seen.map((r) => r.cmd), ['ping', 'empty_cache', 'snapshot', 'snapshot', 'mark']);
    assert.equal(s.seen[4].name, 'epoch 2');
    assert.equal(s.seen[3].path, '/tmp/x.pickle');
    assert.equal(new Set(s.seen.map((r) => r.id)).size, 5, 'ids are unique');
  } finally {
    await s.close();
  }
});

test('a reply split across writes is reassembled', async () => {
  const s = await server((req, c) => {
    const text = JSON.stringify({ ok: true, pid: 7, rank: 0, devices: [] }) + '\n';
    c.write(text.slice(0, 5));
    setTimeout(() => c.write(text.slice(5)), 30);
  });
  try {
    assert.equal((await ping(s.sock)).pid, 7);
  } finally {
    await s.close();
  }
});

test('errors name the cause: refused command, garbage, silence, missing fields, gone', async () => {
  const s = await server((req) => {
    if (req.cmd === 'empty_cache') return { ok: false, error: 'unknown command' };
    if (req.cmd === 'snapshot') return 'this is not json\n';
    if (req.cmd === 'mark') return undefined; // never answers
    return { ok: true, devices: [] }; // ping without pid
  });
  try {
    await assert.rejects(emptyCache(s.sock), (e) => e instanceof ControlError && /refused "empty_cache": unknown command/.test(e.message));
    await assert.rejects(snapshot(s.sock), (e) => e.code === 'protocol' && /not JSON: this is not json/.test(e.message));
    const t0 = Date.now();
    await assert.rejects(sendRequest(s.sock, { cmd: 'mark', name: 'x' }, 150), (e) => e.code === 'timeout' && /within 150 ms/.test(e.message));
    assert.ok(Date.now() - t0 < 1000);
    await assert.rejects(ping(s.sock), /lacks the number "pid"/);
    const r = await sendRequest(s.sock, { cmd: 'empty_cache' });
    assert.deepEqual(r, { ok: false, error: 'unknown command' }); // raw requests resolve with ok:false
  } finally {
    await s.close();
  }
  await assert.rejects(ping(s.sock), (e) => ['gone', 'refused'].includes(e.code) && /has exited/.test(e.message));
  await assert.rejects(ping(path.join(tmp('gpumem-none-'), 'x.sock')), (e) => e.code === 'gone' && /No control socket at/.test(e.message));
});

test('listProcesses reads proc files, skips broken ones, orders by rank', () => {
  const dir = tmp('gpumem-session-');
  const write = (pid, doc) => fs.writeFileSync(path.join(dir, `proc-${pid}.json`), typeof doc === 'string' ? doc : JSON.stringify(doc));
  write(300, { pid: 300, rank: 1, local_rank: 1, world_size: 2, capture: '/s/capture-300.gpumem', socket: '/s/ctl-300.sock', argv: ['t.py'] });
  write(200, { pid: 200, rank: 0, local_rank: 0, world_size: 2, capture: '/s/capture-200.gpumem', socket: null });
  write(100, '{"pid": 100, "capt'); // half written
  write(50, { pid: 'x', capture: '/c' }); // foreign
  fs.writeFileSync(path.join(dir, 'proc-notes.json'), '{}');
  const procs = listProcesses(dir);
  assert.deepEqual(procs.map((p) => [p.pid, p.rank, p.worldSize, p.socket]), [[200, 0, 2, null], [300, 1, 2, '/s/ctl-300.sock']]);
  assert.deepEqual(procs[1].argv, ['t.py']);
  assert.equal(procs[1].file, path.join(dir, 'proc-300.json'));
  assert.throws(() => listProcesses(path.join(dir, 'missing')), /Cannot read the session folder/);
});

test('liveProcesses keeps running processes with a socket', () => {
  const dir = tmp('gpumem-session-');
  const doc = (pid, socket) => JSON.stringify({ pid, capture: `/c-${pid}`, socket });
  fs.writeFileSync(path.join(dir, `proc-${process.pid}.json`), doc(process.pid, '/s/a.sock'));
  fs.writeFileSync(path.join(dir, 'proc-1.json'), doc(1, null)); // init: alive, but no socket
  const dead = 2 ** 22 + 12345; // above the default pid_max
  fs.writeFileSync(path.join(dir, `proc-${dead}.json`), doc(dead, '/s/b.sock'));
  assert.equal(isAlive(process.pid), true);
  assert.equal(isAlive(dead), false);
  assert.deepEqual(liveProcesses(dir).map((p) => p.pid), [process.pid]);
});

test('listSessionFolders returns session folders newest first', () => {
  const root = tmp('gpumem-root-');
  for (const n of ['20261121-230000-a', '20261122-010000-b', 'notes', '20261121-235959-c']) fs.mkdirSync(path.join(root, n));
  fs.writeFileSync(path.join(root, '20261123-000000-file'), '');
  assert.deepEqual(listSessionFolders(root).map((d) => path.basename(d)), ['20261122-010000-b', '20261121-235959-c', '20261121-230000-a']);
  assert.deepEqual(listSessionFolders(path.join(root, 'missing')), []);
});
