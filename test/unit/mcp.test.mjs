// `gpumem mcp` as an MCP client meets it: the CLI bundled from the sources (as test/unit/cli.test.mjs does), started as
// a child process and driven over stdio by the official SDK's Client. Every tool is called on real fixtures and its
// figures are checked against the reader's own commands on the same file (`gpumem summary|advise|replay --json`);
// then wrong inputs, a missing file, a damaged file and a cut-off file, each followed by a call that must still work.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { formatBytes } from '../../src/core/base/units/bytes.ts';
import { TOOLS } from '../../src/core/views/assistant/tools.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const ADDON = process.env.GPUMEM_ADDON || path.join(ROOT, 'dist/native/gpumem_addon.node');
const fixture = (p) => path.join(ROOT, 'test/fixtures', p);
const LEAKY = fixture('h100-leaky-convnet.capture');
const TRAIN = fixture('h200-e2e-train.capture');
const OOM_PICKLE = fixture('pytorch-snapshots/mlp-oom.pickle');
const EXPANDABLE_PICKLE = fixture('pytorch-snapshots/mlp-expandable.pickle');
const tmp = (p) => fs.mkdtempSync(path.join(os.tmpdir(), p));

let install; // a throwaway install: dist/cli.js bundled from the sources, the built reader beside it
let cli;
let sessionRoot; // --out: the session folders the server looks for a running workload in
let client;
let serverStderr = '';

before(async () => {
  if (!fs.existsSync(ADDON)) throw new Error(`the MCP tests need the built reader at ${ADDON}: run \`npm run build\` first`);
  install = tmp('gpumem-mcp-');
  cli = path.join(install, 'dist', 'cli.js');
  await esbuild.build({
    entryPoints: [path.join(ROOT, 'src/cli/main.ts')], bundle: true, platform: 'node', format: 'cjs', target: 'node20',
    outfile: cli, external: ['*.node'], banner: { js: '#!/usr/bin/env node' }, logLevel: 'silent',
  });
  fs.mkdirSync(path.join(install, 'dist', 'native'));
  fs.symlinkSync(ADDON, path.join(install, 'dist', 'native', 'gpumem_addon.node'));
  sessionRoot = tmp('gpumem-mcp-sessions-');
  client = await connect();
});

after(async () => {
  await client?.close();
  fs.rmSync(install, { recursive: true, force: true });
  fs.rmSync(sessionRoot, { recursive: true, force: true });
});

function cleanEnv() {
  const env = { ...process.env };
  for (const k of Object.keys(env)) if (k.startsWith('GPUMEM_')) delete env[k];
  return env;
}

async function connect() {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [cli, 'mcp', '--out', sessionRoot],
    cwd: path.join(ROOT, 'test/fixtures'),
    env: cleanEnv(),
    stderr: 'pipe',
  });
  transport.stderr?.on('data', (d) => (serverStderr += d));
  const c = new Client({ name: 'gpumem-mcp-test', version: '1' });
  await c.connect(transport);
  return c;
}

/** The reader's own answer: `gpumem <args> --json` from the same bundle. */
function reader(...args) {
  const r = spawnSync(process.execPath, [cli, ...args, '--json'], { encoding: 'utf8', env: cleanEnv() });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout);
}

/** A tool's answer, parsed; fails the test on an error result. */
async function call(name, args) {
  const r = await client.callTool({ name, arguments: args });
  assert.equal(r.content.length, 1);
  assert.equal(r.content[0].type, 'text');
  assert.ok(!r.isError, `${name} ${JSON.stringify(args)} answered an error: ${r.content[0].text}\n${serverStderr}`);
  return JSON.parse(r.content[0].text);
}

/** A tool's error result: its text. */
async function callError(name, args) {
  const r = await client.callTool({ name, arguments: args });
  assert.equal(r.isError, true, `${name} ${JSON.stringify(args)} should have been an error: ${r.content[0]?.text}`);
  return r.content[0].text;
}

const lineKey = (file, line) => `${file}:${line}`;

test('the server lists every tool of the table, with its schema, and marks the ones that change the run', async () => {
  const { tools } = await client.listTools();
  assert.deepEqual(tools.map((t) => t.name), TOOLS.map((t) => t.name));
  for (const t of tools) {
    const decl = TOOLS.find((d) => d.name === t.name);
    assert.equal(t.description, decl.modelDescription);
    assert.deepEqual(t.inputSchema, decl.inputSchema);
    assert.equal(t.annotations.readOnlyHint, !decl.changesRun, t.name);
  }
  assert.deepEqual(tools.filter((t) => !t.annotations.readOnlyHint).map((t) => t.name), ['gpumem_empty_cache', 'gpumem_capture_snapshot']);
  assert.deepEqual(tools.find((t) => t.name === 'gpumem_compare').inputSchema.required, ['other_path']);
});

test('summary: the reader\'s figures for the device, in bytes and in binary units', async () => {
  const want = reader('summary', LEAKY);
  const dev = want.devices[0];
  const got = await call('gpumem_summary', { path: LEAKY });
  assert.equal(got.file, LEAKY);
  assert.equal(got.format, 'gpumem-capture');
  assert.equal(got.run.command, want.identity.argv.join(' '));
  assert.equal(got.device.name, dev.name);
  assert.equal(got.peak.allocated_bytes, dev.peak_allocated_bytes);
  assert.equal(got.peak.allocated, formatBytes(dev.peak_allocated_bytes));
  assert.equal(got.peak.at_s, dev.peak_t_s);
  assert.equal(got.peak.step, dev.peak_step);
  assert.equal(got.at_end.allocated_bytes, dev.allocated_bytes);
  assert.equal(got.at_end.reserved_bytes, dev.reserved_bytes);
  assert.equal(got.at_end.empty_cache_would_release_bytes, dev.what_if.empty_cache_releases_bytes);
  assert.equal(got.at_end.empty_cache_would_release, formatBytes(dev.what_if.empty_cache_releases_bytes));
  // what the memory at the peak is: the summary's categories
  const cats = want.categories[0].peak;
  for (const [k, v] of Object.entries(cats.bytes)) assert.equal(got.peak.what[`${k}_bytes`] ?? 0, v, k);
  assert.equal(got.peak.what.activations_kept_by_a_container_bytes, cats.kept_activation_bytes);
  assert.equal(got.peak.top_modules[0].module, cats.activations_by_module[0].module);
  // the top lines at the peak: the summary's, with their share of the peak
  const lines = new Map(want.top_lines.map((l) => [lineKey(l.file, l.line), l.bytes_at_peak]));
  assert.equal(got.top_lines_at_peak.length, 5);
  for (const l of got.top_lines_at_peak) {
    assert.equal(l.bytes, lines.get(lineKey(l.file, l.line)), lineKey(l.file, l.line));
    assert.equal(l.size, formatBytes(l.bytes));
    assert.equal(l.percent_of_peak, Math.round((1000 * l.bytes) / dev.peak_allocated_bytes) / 10);
  }
  assert.equal(got.steps.count, want.steps[0].steps.length);
  assert.equal(got.steps.leak_findings, want.steps[0].leaks.length);
  assert.equal(got.steps.leaks_with_keeper, want.steps[0].leaks.filter((l) => l.keeper).length);
  assert.equal(got.ooms.count, 0);
  assert.equal(got.complete, true);
  assert.match(got.more[0], /^gpumem_leaks: the 5 leak findings/);
});

test('summary of a pickle with an OOM: the OOM row the reader gives', async () => {
  const want = reader('summary', OOM_PICKLE);
  const got = await call('gpumem_summary', { path: path.relative(path.join(ROOT, 'test/fixtures'), OOM_PICKLE) });
  assert.equal(got.file, OOM_PICKLE); // relative paths start at the server's working directory
  assert.equal(got.format, 'pytorch-pickle');
  assert.equal(got.run, undefined); // a pickle says nothing of its run
  assert.equal(got.ooms.count, want.ooms.length);
  const [o] = want.ooms;
  assert.deepEqual(got.ooms.first[0], {
    at_s: o.t_s, ...(o.step !== null ? { step: o.step } : {}), requested_bytes: o.requested_bytes, requested: formatBytes(o.requested_bytes),
    where: `${o.file}:${o.line}`, verdict: o.verdict, sentence: o.sentence,
  });
  assert.match(got.more.at(-1), /to avoid the OOM/);
});

test('peak lines: the per-line figures at the peak, each line with its function and the lines that called it', async () => {
  const want = reader('summary', LEAKY, '--top', '50');
  const got = await call('gpumem_peak_lines', { path: LEAKY, top: 4 });
  assert.equal(got.peak.allocated_bytes, want.devices[0].peak_allocated_bytes);
  assert.equal(got.lines.length, 4);
  const lines = new Map(want.top_lines.map((l) => [lineKey(l.file, l.line), l.bytes_at_peak]));
  for (const l of got.lines) assert.equal(l.self_at_peak_bytes, lines.get(lineKey(l.file, l.line)));
  // the forward lines: ConvNet.forward, called from main's loop (leak_history.py:60) and the script's last line
  const forward = got.lines.find((l) => l.line === 31);
  assert.equal(forward.function, 'ConvNet.forward');
  assert.deepEqual(forward.called_from, ['/home/user/project/leak_history.py:60 in main', '/home/user/project/leak_history.py:84 in <module>']);
  const shown = got.lines.reduce((s, l) => s + l.self_at_peak_bytes, 0);
  const all = want.top_lines.reduce((s, l) => s + l.bytes_at_peak, 0);
  assert.equal(got.lines_with_memory_at_peak, want.top_lines.length);
  assert.equal(got.other_lines_at_peak_bytes, all - shown);
  // line 62 is the backward() call: its memory was allocated on autograd threads
  const backward = got.lines.find((l) => l.line === 62);
  assert.equal(backward.heaviest_stack_in_backward, true);
  assert.ok(backward.by_backward_at_peak_bytes > 0);
  assert.equal(await callError('gpumem_peak_lines', { path: LEAKY, top: 26 }), 'top must be at most 25 (got 26)');
});

test('leaks: the findings and their keeper as the summary gives them, the keeper told once', async () => {
  const want = reader('summary', LEAKY).steps[0];
  const got = await call('gpumem_leaks', { path: LEAKY });
  assert.equal(got.steps, want.steps.length);
  assert.equal(got.leaks.length, want.leaks.length);
  got.leaks.forEach((l, i) => {
    const w = want.leaks[i];
    assert.equal(l.allocated_at, lineKey(w.file, w.line));
    assert.equal(l.growth_per_step_bytes, w.growth_per_step_bytes);
    assert.equal(l.growth_per_step, formatBytes(w.growth_per_step_bytes));
    assert.deepEqual(l.grew_over_steps, [w.from_step, w.to_step]);
    assert.equal(l.at_last_step_end_bytes, w.bytes_at_last_end);
    assert.equal(l.kind, w.category);
    assert.equal(l.kept_by, 0);
  });
  assert.equal(got.keepers.length, 1);
  const k = want.leaks[0].keeper;
  assert.equal(got.keepers[0].kept_at, lineKey(k.file, k.line));
  assert.equal(got.keepers[0].code, 'history.append(loss)');
  assert.equal(got.keepers[0].container, 'history');
  assert.equal(got.keepers[0].holds_bytes, k.bytes);
  // the step figures: first two, last two and the highest peak
  assert.deepEqual(got.step_figures.map((s) => s.step), [1, 2, 7, 8]);
  const last = want.steps.at(-1);
  assert.equal(got.step_figures.at(-1).peak_allocated_bytes, last.peak_allocated_bytes);
  assert.equal(got.step_figures.at(-1).reserved_at_end_bytes, last.reserved_at_end_bytes);
  assert.equal(got.step_figures.at(-1).highest_peak, true);

  const none = await call('gpumem_leaks', { path: TRAIN });
  assert.deepEqual(none.leaks, []);
  assert.match(none.no_leak, /grew at 3 step ends in a row/);
});

test('categories: at the peak, at a step end and at a time, as the summary counts them', async () => {
  const want = reader('summary', LEAKY);
  const peak = await call('gpumem_categories', { path: LEAKY });
  assert.equal(peak.moment, 'the peak');
  for (const [k, v] of Object.entries(want.categories[0].peak.bytes)) assert.equal(peak.categories[`${k}_bytes`] ?? 0, v, k);
  assert.equal(peak.cache.reserved_minus_allocated_bytes, want.categories[0].peak.beyond_allocated.cacheBytes);
  assert.equal(peak.outside_the_allocator_bytes, want.categories[0].peak.beyond_allocated.notFromAllocatorBytes);

  const step3 = want.steps[0].steps[2];
  const atStep = await call('gpumem_categories', { path: LEAKY, step: 3 });
  assert.equal(atStep.moment, 'the end of step 3');
  assert.equal(atStep.allocated_bytes, step3.allocated_at_end_bytes);
  assert.equal(atStep.reserved_bytes, step3.reserved_at_end_bytes);
  for (const [k, v] of Object.entries(step3.categories)) assert.equal(atStep.categories[`${k}_bytes`] ?? 0, v, k);
  assert.equal(atStep.top_lines.reduce((s, l) => s + l.bytes, 0), step3.allocated_at_end_bytes);

  // the same moment asked by its time in seconds
  const atTime = await call('gpumem_categories', { path: LEAKY, time_s: atStep.at_s });
  assert.equal(atTime.allocated_bytes, atStep.allocated_bytes);
  assert.deepEqual(atTime.categories, atStep.categories);

  assert.equal(await callError('gpumem_categories', { path: LEAKY, step: 99 }), 'there is no step 99: the recording has steps 1 to 8');
  assert.equal(await callError('gpumem_categories', { path: LEAKY, step: 1, time_s: 1 }), 'give step or time_s, not both');
});

test('advice: the items and predictions `gpumem advise` gives, and the batch line from two recordings', async () => {
  for (const file of [LEAKY, OOM_PICKLE]) {
    const want = reader('advise', file);
    const got = await call('gpumem_advice', { path: file });
    assert.equal(got.recorded_peak_reserved_bytes, want.recordedPeakReservedBytes);
    assert.equal(got.recorded_peak_allocated_bytes, want.recordedPeakAllocatedBytes);
    assert.deepEqual(got.items.map((i) => i.title), want.items.slice(0, 8).map((i) => i.title));
    assert.deepEqual(got.not_offered, want.notOffered);
    got.items.forEach((item, i) => {
      const p = want.items[i].predicted;
      if (p?.peakReservedBytes !== undefined) {
        assert.equal(item.predicted.peak_reserved_bytes, p.peakReservedBytes);
        assert.equal(item.predicted.peak_reserved, formatBytes(p.peakReservedBytes));
      } else assert.equal(item.predicted, undefined);
    });
  }
  const want = reader('advise', EXPANDABLE_PICKLE, OOM_PICKLE, '--batches', '8,16');
  const got = await call('gpumem_advice', { path: EXPANDABLE_PICKLE, other_path: OOM_PICKLE, batches: [8, 16] });
  assert.equal(got.other_file, OOM_PICKLE);
  assert.deepEqual(got.items.map((i) => i.kind), want.items.slice(0, 8).map((i) => i.kind));
  if (want.batchFit) {
    assert.equal(got.batch_fit.largest_batch_that_fits, want.batchFit.maxBatch);
    assert.equal(got.batch_fit.per_sample_allocated_bytes, want.batchFit.perSampleAllocatedBytes);
  } else assert.equal(got.batch_fit, undefined);
  assert.equal(await callError('gpumem_advice', { path: LEAKY, batches: [8, 16] }), 'batches needs other_path, the second recording');
});

test('replay: every policy\'s peak and OOM as `gpumem replay` gives them, at a capacity given in binary units', async () => {
  const want = reader('replay', OOM_PICKLE, '--capacity', '64GiB');
  const got = await call('gpumem_replay', { path: OOM_PICKLE, capacity: '64GiB' });
  assert.equal(got.capacity_bytes, 64 * 1024 ** 3);
  assert.equal(got.capacity, '64.0 GiB');
  assert.deepEqual(got.replays.map((r) => r.policy), want.replays.map((r) => r.policy));
  got.replays.forEach((r, i) => {
    const w = want.replays[i];
    assert.equal(r.peak_reserved_bytes, w.peak_reserved_bytes);
    assert.equal(r.peak_allocated_bytes, w.peak_allocated_bytes);
    if (w.oom) {
      assert.equal(r.out_of_memory.sentence, w.oom.sentence);
      assert.equal(r.out_of_memory.requested_bytes, w.oom.requested_bytes);
    } else assert.equal(r.out_of_memory, false);
  });
  const one = await call('gpumem_replay', { path: OOM_PICKLE, policy: 'pytorch-expandable' });
  assert.deepEqual(one.replays.map((r) => r.policy), ['pytorch-expandable']);
  assert.match(await callError('gpumem_replay', { path: OOM_PICKLE, capacity: '64GB' }), /^capacity: "64GB" is not a size \(GB is decimal; write GiB\)/);
  assert.match(await callError('gpumem_replay', { path: OOM_PICKLE, policy: 'cudaMallocAsync' }), /^policy must be one of all, pytorch, pytorch-expandable, lens, lens-no-trim/);
});

test('compare: each recording\'s peak as its summary gives it, and the lines whose memory at the peak changed', async () => {
  const a = reader('summary', EXPANDABLE_PICKLE, '--top', '100');
  const b = reader('summary', OOM_PICKLE, '--top', '100');
  const got = await call('gpumem_compare', { path: EXPANDABLE_PICKLE, other_path: OOM_PICKLE });
  assert.equal(got.before.peak_allocated_bytes, a.devices[0].peak_allocated_bytes);
  assert.equal(got.after.peak_allocated_bytes, b.devices[0].peak_allocated_bytes);
  assert.equal(got.change.peak_allocated_bytes, b.devices[0].peak_allocated_bytes - a.devices[0].peak_allocated_bytes);
  assert.equal(got.change.peak_allocated, formatBytes(got.change.peak_allocated_bytes));
  const before = new Map(a.top_lines.map((l) => [lineKey(l.file, l.line), l.bytes_at_peak]));
  const after = new Map(b.top_lines.map((l) => [lineKey(l.file, l.line), l.bytes_at_peak]));
  assert.ok(got.lines_at_peak.most_changed.length > 0);
  for (const r of got.lines_at_peak.most_changed) {
    const k = lineKey(r.file, r.line);
    assert.equal(r.before_bytes, before.get(k) ?? 0, k);
    assert.equal(r.after_bytes, after.get(k) ?? 0, k);
    assert.equal(r.change_bytes, r.after_bytes - r.before_bytes);
  }
  // the same script under two allocators: the same lines hold the same bytes at the peak
  const same = await call('gpumem_compare', { path: fixture('h100-labels-lens.capture'), other_path: fixture('h100-labels-pytorch.capture') });
  assert.equal(same.change.peak_allocated_bytes, 0);
  assert.deepEqual(same.lines_at_peak.most_changed, []);
  assert.ok(same.change.peak_reserved_bytes < 0);
  assert.match(await callError('gpumem_compare', { path: LEAKY }), /^other_path is required$/);
});

test('wrong inputs and unreadable files are error results, and the server keeps answering', async () => {
  const work = tmp('gpumem-mcp-bad-');
  try {
    const missing = path.join(work, 'missing.gpumem');
    assert.equal(await callError('gpumem_summary', { path: missing }), `no file at ${missing}: pass the path of a .gpumem capture or a PyTorch snapshot .pickle`);
    const garbage = path.join(work, 'garbage.gpumem');
    fs.writeFileSync(garbage, Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 131 + 7) % 256)));
    assert.match(await callError('gpumem_leaks', { path: garbage }), new RegExp(`^${garbage.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} could not be read: .*neither a GPU Memory Lens capture`));
    const cutPickle = path.join(work, 'cut.pickle');
    fs.writeFileSync(cutPickle, fs.readFileSync(OOM_PICKLE).subarray(0, 20000));
    assert.match(await callError('gpumem_summary', { path: cutPickle }), /could not be read: .*truncated/);
    assert.match(await callError('gpumem_summary', { path: LEAKY, device: 3 }), /has no device 3; its devices: 0$/);
    assert.equal(await callError('gpumem_summary', { path: LEAKY, device: 'first' }), 'device must be a whole number, not "first"');
    assert.equal(await callError('gpumem_summary', { file: LEAKY }), 'unknown input "file"; this tool takes path, device');
    assert.match(await callError('gpumem_nonsense', {}), /^there is no tool named gpumem_nonsense; the tools are gpumem_summary, /);
    // a capture cut off mid-record (a killed run): what was written is answered, and said to be incomplete
    const cut = path.join(work, 'cut.gpumem');
    fs.writeFileSync(cut, fs.readFileSync(LEAKY).subarray(0, 30000));
    const partial = await call('gpumem_summary', { path: cut });
    assert.equal(partial.complete, false);
    assert.match(partial.integrity[0], /^The capture ends early at /);
    assert.ok(partial.peak.allocated_bytes < reader('summary', LEAKY).devices[0].peak_allocated_bytes);
    // and the next call on a good file still works
    assert.equal((await call('gpumem_summary', { path: LEAKY })).peak.step, 8);
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
});

test('a folder holding one capture is that capture; with several, the answer lists them', async () => {
  const dir = tmp('gpumem-mcp-folder-');
  try {
    fs.copyFileSync(TRAIN, path.join(dir, 'capture-531.gpumem'));
    const got = await call('gpumem_summary', { path: dir });
    assert.equal(got.file, path.join(dir, 'capture-531.gpumem'));
    assert.equal(got.about, `the one capture in ${dir}`);
    fs.copyFileSync(LEAKY, path.join(dir, 'capture-601.gpumem'));
    assert.equal(await callError('gpumem_summary', { path: dir }), `${dir} holds 2 captures (one per process): pass one of them as path: capture-531.gpumem, capture-601.gpumem`);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('without a path: the workload running under --out, and the actions sent to it', async () => {
  assert.match(await callError('gpumem_summary', {}), new RegExp(`^no workload is running under ${sessionRoot}`));
  assert.match(await callError('gpumem_empty_cache', {}), /^no workload is running under/);
  // a session folder whose one process is this test's (alive), its capture a copy of a real one, its control
  // socket answered by a scripted server (the real one is the allocator's: test/unit/control-allocator.test.mjs)
  const dir = path.join(sessionRoot, '20261201-120000-train');
  fs.mkdirSync(dir);
  const capture = path.join(dir, `capture-${process.pid}.gpumem`);
  fs.copyFileSync(LEAKY, capture);
  const sock = path.join(dir, 'ctl.sock');
  const before = 9 * 1024 ** 3 + 512 * 1024 ** 2;
  const afterBytes = 128 * 1024 ** 2;
  const asked = [];
  const srv = net.createServer((c) => {
    c.setEncoding('utf8');
    c.on('data', (d) => {
      const req = JSON.parse(d.split('\n')[0]);
      asked.push(req.cmd);
      const reply = { empty_cache: { ok: true, reserved_before: before, reserved_after: afterBytes }, snapshot: { ok: true, pickle: path.join(dir, 'snapshot.pickle'), offset: 1 } }[req.cmd];
      c.write(JSON.stringify({ id: req.id, ...reply }) + '\n');
    });
  });
  await new Promise((r) => srv.listen(sock, r));
  try {
    fs.writeFileSync(path.join(dir, `proc-${process.pid}.json`), JSON.stringify({ version: 1, pid: process.pid, rank: 0, capture, socket: sock }));
    const got = await call('gpumem_summary', {});
    assert.equal(got.file, capture);
    assert.equal(got.about, `the workload running now: 20261201-120000-train, rank 0 (pid ${process.pid})`);
    assert.equal(got.peak.allocated_bytes, reader('summary', LEAKY).devices[0].peak_allocated_bytes);
    const emptied = await call('gpumem_empty_cache', {});
    assert.deepEqual(emptied.processes, [{
      pid: process.pid, rank: 0, reserved_before_bytes: before, reserved_before: formatBytes(before),
      reserved_after_bytes: afterBytes, reserved_after: formatBytes(afterBytes), released_bytes: before - afterBytes, released: formatBytes(before - afterBytes),
    }]);
    const snap = await call('gpumem_capture_snapshot', {});
    assert.deepEqual(snap.snapshots, [{ pid: process.pid, rank: 0, pickle: path.join(dir, 'snapshot.pickle') }]);
    assert.deepEqual(asked, ['empty_cache', 'snapshot']);
  } finally {
    await new Promise((r) => srv.close(r));
  }
  // the workload is gone (its proc file names no live process): the actions say so
  fs.writeFileSync(path.join(dir, `proc-${process.pid}.json`), JSON.stringify({ version: 1, pid: 2 ** 22 + 12345, rank: 0, capture, socket: sock }));
  assert.match(await callError('gpumem_capture_snapshot', {}), new RegExp(`^no workload is running under ${sessionRoot}.*the latest captures there: ${capture}`));
});

test('the server ends by itself, exit code 0, when its client closes stdin', async () => {
  const child = spawn(process.execPath, [cli, 'mcp', '--out', sessionRoot], { env: cleanEnv(), stdio: ['pipe', 'pipe', 'pipe'] });
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  child.stdin.write(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } } }) + '\n');
  const first = await new Promise((resolve) => child.stdout.once('data', (d) => resolve(JSON.parse(String(d).split('\n')[0]))));
  assert.equal(first.result.serverInfo.name, 'gpumem');
  child.stdin.end();
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  const { code, signal } = await exited;
  clearTimeout(timer);
  assert.deepEqual({ code, signal }, { code: 0, signal: null });
});
