// LiveRun following a live workload for real: the replay workload (test/e2e/replay) streams a
// stand-in capture into a session folder, LiveRun tails it through the real reader, and the control
// client (src/core/base/control) talks to the replay's socket. Expected numbers come from
// test/e2e/replay/expected_lines.py, which decodes the capture on its own.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { LiveRun } from '../../src/core/views/live/index.ts';
import { emptyCache, mark, ping, snapshot } from '../../src/core/base/control/index.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
process.env.GPUMEM_ADDON ||= path.join(ROOT, 'dist/native/gpumem_addon.node');
const { openModel } = await import('../../src/core/base/model/open.ts');
const REPLAY = path.join(ROOT, 'test/e2e/replay');

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'gml-'));
const capture = path.join(tmp, 'standin.gpumem');
execFileSync('python3', [path.join(REPLAY, 'make_standin.py'), capture, '--steps', '8', '--step-ms', '400']);
const expected = JSON.parse(execFileSync('python3', [path.join(REPLAY, 'expected_lines.py'), capture], { encoding: 'utf8' })).devices[0];
const sessionDir = path.join(tmp, 's');
fs.mkdirSync(sessionDir, { mode: 0o700 });

const child = spawn('python3', [path.join(REPLAY, 'replay.py'), capture, '--speed', '2', '--hold', '30'], {
  env: { ...process.env, GPUMEM_SESSION_DIR: sessionDir },
  stdio: ['ignore', 'pipe', 'inherit'],
});
let out = '';
child.stdout.on('data', (d) => (out += d));
const exited = new Promise((r) => child.on('exit', (code) => r(code)));
after(async () => {
  if (child.exitCode === null) child.kill('SIGKILL');
  fs.rmSync(tmp, { recursive: true, force: true });
});

async function until(what, cond, ms = 15000) {
  const t0 = Date.now();
  while (!cond()) {
    if (Date.now() - t0 > ms) throw new Error(`timed out waiting for ${what}; replay said: ${out}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const run = new LiveRun(sessionDir, openModel);

test('the live run finds the process, tails its capture while it streams, and ends at the capture’s final state', async () => {
  const seen = new Set();
  await until('the end of the stream', () => {
    run.refresh();
    const t = run.totals();
    if (t.processes) seen.add(t.allocatedBytes);
    return out.includes('done streaming');
  });
  run.refresh();
  const [proc] = run.processes;
  assert.equal(proc.entry.pid, child.pid);
  assert.equal(proc.entry.rank, 0);
  assert.ok(proc.entry.socket, 'the proc file gives the control socket');
  assert.ok(seen.size > 2, `the figures moved while streaming (${seen.size} distinct values)`);
  assert.deepEqual(run.totals(), { allocatedBytes: expected.end_allocated, reservedBytes: expected.end_reserved, processes: 1 });
  const track = run.view(200).tracks[0];
  assert.equal(track.figures.peakAllocatedBytes, expected.peak_allocated);
  assert.equal(track.figures.unattributedBytes, track.figures.deviceUsedBytes - track.figures.reservedBytes);
  assert.equal(track.running, true);
  assert.equal(track.series.t.length, 200);
  assert.equal(Math.max(...track.series.allocated), expected.peak_allocated, 'the bucket maxima keep the peak');
});

test('control: ping, empty_cache (the capture shows reserved dropping), mark and snapshot', async () => {
  const socket = run.processes[0].entry.socket;
  const p = await ping(socket);
  assert.deepEqual(p.devices, [{ index: 0, allocated: expected.end_allocated, reserved: expected.end_reserved }]);

  const r = await emptyCache(socket);
  assert.equal(r.reserved_before, expected.end_reserved);
  assert.equal(r.reserved_after, expected.end_reserved_busy);
  await until('the empty-cache records', () => {
    run.refresh();
    return run.totals().reservedBytes === expected.end_reserved_busy;
  });
  const markers = () => run.view(10).tracks[0].markers;
  const ec = markers().find((m) => m.kind === 'empty_cache');
  assert.ok(ec, `an empty_cache marker: ${JSON.stringify(markers())}`);
  assert.equal(run.totals().allocatedBytes, expected.end_allocated);

  await mark(socket, 'after-empty-cache');
  const snap = await snapshot(socket);
  assert.ok(snap.pickle.startsWith(sessionDir) && fs.existsSync(snap.pickle));
  await until('the user and snapshot markers', () => {
    run.refresh();
    return markers().some((m) => m.kind === 'user' && m.label === 'after-empty-cache') && markers().some((m) => m.kind === 'snapshot');
  });
  // The pickle is a PyTorch snapshot of the replayed state: every segment left holds an allocated block.
  const py = `import pickle,sys,json; s=pickle.load(open(sys.argv[1],'rb')); print(json.dumps([sum(x['total_size'] for x in s['segments']), sum(x['allocated_size'] for x in s['segments'])]))`;
  const [total, allocated] = JSON.parse(execFileSync('python3', ['-c', py, snap.pickle], { encoding: 'utf8' }));
  assert.equal(total, expected.end_reserved_busy);
  assert.equal(allocated, expected.end_allocated);
});

test('Ctrl-C ends the workload cleanly: exit 130, REC_END read, no more commands', async () => {
  child.kill('SIGINT');
  assert.equal(await exited, 130);
  run.refresh();
  assert.equal(run.processes[0].model.ended(), true);
  assert.deepEqual(run.controllable(), []);
  run.running = false;
  assert.equal(run.view(10).running, false);
  run.close();
});

test('a capture written by the real allocator (sim backend, expandable segments) replays with the same figures; empty_cache unmaps its free pages', async (t) => {
  const so = path.join(ROOT, 'dist/native/libgpumem_allocator.so');
  if (!fs.existsSync(so)) {
    t.skip('dist/native/libgpumem_allocator.so is not built (make -C native/allocator)');
    return;
  }
  const real = path.join(tmp, 'real.gpumem');
  execFileSync('python3', [path.join(REPLAY, 'record_sim.py'), so, real]);
  const want = JSON.parse(execFileSync('python3', [path.join(REPLAY, 'expected_lines.py'), real], { encoding: 'utf8' })).devices[0];
  assert.ok(want.end_reserved_busy < want.end_reserved, 'the recording leaves free pages to unmap');
  const dir = path.join(tmp, 'real-session');
  fs.mkdirSync(dir, { mode: 0o700 });
  const proc = spawn('python3', [path.join(REPLAY, 'replay.py'), real, '--hold', '20'], { env: { ...process.env, GPUMEM_SESSION_DIR: dir }, stdio: ['ignore', 'pipe', 'inherit'] });
  let said = '';
  proc.stdout.on('data', (d) => (said += d));
  const done = new Promise((r) => proc.on('exit', r));
  const s = new LiveRun(dir, openModel);
  try {
    await until('the real capture to stream', () => said.includes('done streaming'));
    await until('the capture to be read', () => {
      s.refresh();
      return s.totals().allocatedBytes === want.end_allocated;
    });
    assert.deepEqual(s.totals(), { allocatedBytes: want.end_allocated, reservedBytes: want.end_reserved, processes: 1 });
    assert.equal(s.view(50).tracks[0].figures.peakAllocatedBytes, want.peak_allocated);
    const top = s.processes[0].model.lineStats(0)[0];
    assert.deepEqual([path.basename(top.file), top.line, top.selfBytesAtPeak], [path.basename(want.lines[0].file), want.lines[0].line, want.lines[0].self_bytes_at_peak]);
    const r = await emptyCache(s.processes[0].entry.socket);
    assert.deepEqual([r.reserved_before, r.reserved_after], [want.end_reserved, want.end_reserved_busy]);
    await until('reserved to drop in the capture', () => {
      s.refresh();
      return s.totals().reservedBytes === want.end_reserved_busy;
    });
    // its snapshot is a PyTorch pickle the reader opens: an expandable segment's blocks add up to its size
    const snap = await snapshot(s.processes[0].entry.socket);
    const pm = openModel(snap.pickle);
    try {
      const st = pm.stateAt(0, Infinity);
      assert.deepEqual([st.fragmentation.reservedBytes, st.fragmentation.allocatedBytes], [want.end_reserved_busy, want.end_allocated]);
    } finally {
      pm.close();
    }
  } finally {
    proc.kill('SIGINT');
    await done;
    s.close();
  }
  // what the replay wrote after the unmaps is a capture the reader takes whole: the allocator state at its end is
  // the pages still mapped, whole pages of each pool's size (the summary once failed on it)
  const cap = fs.readdirSync(dir).find((f) => /^capture-\d+\.gpumem$/.test(f));
  const m = openModel(path.join(dir, cap));
  try {
    const st = m.stateAt(0, Infinity);
    assert.equal(st.fragmentation.reservedBytes, want.end_reserved_busy);
    assert.equal(m.summary().devices[0].reserved_bytes, want.end_reserved_busy);
  } finally {
    m.close();
  }
});
