#!/usr/bin/env node
// Reader benchmark (not a timed test): `node test/bench/reader/bench.mjs [--events N] [--scale K] [--dir DIR]`
//
//   1. decode throughput of a capture written by the lens allocator (simulated device, N events,
//      default 10 M): events/s on one core, read+decode and pairing/series separately;
//   2. time to summarise that capture (open + summary()) and to answer a full-range timeline;
//   3. the ResNet-50 fixture pickle and a ×K scaled copy (../shared/tools/scale_snapshot.py, default
//      ×20 ≈ 1.1 M events): open + summary() vs Python's pickle.load of the same file (the ratio);
//   4. with --big FILE (e.g. a ×180 scaled pickle, 10 M events): open + summary() there too, and the
//      asynchronous open (openAsync, the reader on a worker thread) with the longest event-loop stall
//      seen meanwhile — what the extension host feels. GPUMEM_READER_TIMINGS=1 prints the reader's phases.
//
// Needs the build (dist/native/gpumem_addon.node, dist/native/libgpumem_allocator.so) and python3.
// Each measurement runs in a fresh Node process; the best of 3 is reported (the machine may be busy).
// CPU time (user + system of the measuring process) is reported next to wall time: on a loaded
// machine it is the honest "one core" figure.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const args = process.argv.slice(2);
const opt = (name, fallback) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : fallback;
};
const events = Number(opt('events', 10_000_000));
const scale = Number(opt('scale', 20));
const dir = opt('dir', fs.mkdtempSync(path.join(os.tmpdir(), 'gpumem-bench-')));
fs.mkdirSync(dir, { recursive: true });
const addon = path.join(root, 'dist/native/gpumem_addon.node');
const lib = path.join(root, 'dist/native/libgpumem_allocator.so');
const resnet = path.join(root, 'test/fixtures/pytorch-snapshots/resnet50-bf16-train-python-stacks.pickle');
const scaleTool = opt('scale-tool', path.resolve(root, '../shared/tools/scale_snapshot.py'));
for (const f of [addon, lib]) if (!fs.existsSync(f)) throw new Error(`missing ${f}: run \`npm run build\` first`);

function sh(cmd, argv) {
  const r = spawnSync(cmd, argv, { encoding: 'utf8', maxBuffer: 1 << 26 });
  if (r.status !== 0) throw new Error(`${cmd} ${argv.join(' ')} failed:\n${r.stderr}`);
  return r.stdout;
}

/** Runs `body` (JS source using `a` = addon, `file`) in a fresh Node; returns its JSON result. */
function inNode(body, file) {
  const src = `const a = require(${JSON.stringify(addon)}); const file = ${JSON.stringify(file)};
const cpu0 = process.cpuUsage(); const t0 = process.hrtime.bigint();
const out = (() => { ${body} })();
const wall = Number(process.hrtime.bigint() - t0) / 1e6; const c = process.cpuUsage(cpu0);
console.log(JSON.stringify({ ...out, wallMs: wall, cpuMs: (c.user + c.system) / 1000 }));`;
  return JSON.parse(sh(process.execPath, ['-e', src]));
}

/** Like inNode, for an async body (`await` allowed); also reports the longest event-loop gap while it ran. */
function inNodeAsync(body, file) {
  const src = `const a = require(${JSON.stringify(addon)}); const file = ${JSON.stringify(file)};
(async () => {
  let last = performance.now(), maxGapMs = 0;
  const iv = setInterval(() => { const n = performance.now(); maxGapMs = Math.max(maxGapMs, n - last); last = n; }, 5);
  const cpu0 = process.cpuUsage(); const t0 = process.hrtime.bigint();
  const out = await (async () => { ${body} })();
  const wall = Number(process.hrtime.bigint() - t0) / 1e6; const c = process.cpuUsage(cpu0);
  clearInterval(iv);
  console.log(JSON.stringify({ ...out, wallMs: wall, cpuMs: (c.user + c.system) / 1000, maxGapMs }));
})();`;
  return JSON.parse(sh(process.execPath, ['-e', src]));
}

function best(n, fn) {
  const runs = Array.from({ length: n }, fn);
  return runs.reduce((a, b) => (b.cpuMs < a.cpuMs ? b : a));
}

function pythonLoad(file) {
  const code = `import pickle, sys, time, resource
t = time.perf_counter(); c = time.process_time()
with open(sys.argv[1], 'rb') as f: pickle.load(f)
print((time.perf_counter() - t) * 1000, (time.process_time() - c) * 1000)`;
  const runs = Array.from({ length: 3 }, () => sh('python3', ['-c', code, file]).trim().split(' ').map(Number));
  const [wallMs, cpuMs] = runs.reduce((a, b) => (b[0] < a[0] ? b : a));
  return { wallMs, cpuMs };
}

const fmt = (ms) => (ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(1)} ms`);
const rate = (n, ms) => `${((n / ms) * 1000 / 1e6).toFixed(1)} M/s`;
const report = {};

// 1–2. A capture from the allocator.
const capture = path.join(dir, `sim-${events}.gpumem`);
if (!fs.existsSync(capture)) {
  const t = Date.now();
  sh('python3', [path.join(root, 'test/bench/reader/gen_sim_capture.py'), lib, capture, String(events)]);
  console.log(`generated ${capture} (${(fs.statSync(capture).size / 2 ** 20).toFixed(0)} MiB) in ${fmt(Date.now() - t)}`);
}
const open = best(3, () =>
  inNode(`const h = new a.ModelHandle(file); const t = JSON.parse(h.timings()); return { events: h.eventCount(), ...t };`, capture),
);
const decodeMs = open.decodeNs / 1e6;
const deriveMs = open.deriveNs / 1e6;
const decodeCpuMs = open.decodeCpuNs / 1e6;
const deriveCpuMs = open.deriveCpuNs / 1e6;
report.capture = {
  events: open.events,
  bytes: fs.statSync(capture).size,
  decodeMs,
  deriveMs,
  decodeCpuMs,
  deriveCpuMs,
  decodeEventsPerCpuSec: Math.round((open.events / decodeCpuMs) * 1000),
  decodeEventsPerSec: Math.round((open.events / decodeMs) * 1000),
  openEventsPerSec: Math.round((open.events / (decodeMs + deriveMs)) * 1000),
  openCpuMs: open.cpuMs,
};
const summ = best(3, () =>
  inNode(
    `const h = new a.ModelHandle(file); const s = JSON.parse(h.summary());
     const r = JSON.parse(h.timeRange(0)); const t1 = process.hrtime.bigint();
     h.timeline(0, r.t0Us, r.t1Us, 2000); const tl = Number(process.hrtime.bigint() - t1) / 1e6;
     const t2 = process.hrtime.bigint(); h.timeline(0, r.t0Us, r.t1Us, 2000); const tl2 = Number(process.hrtime.bigint() - t2) / 1e6;
     return { peak: s.devices[0].peak_allocated_bytes, firstTimelineMs: tl, timelineMs: tl2 };`,
    capture,
  ),
);
report.capture.summaryWallMs = summ.wallMs;
report.capture.summaryCpuMs = summ.cpuMs;
report.capture.firstTimelineMs = summ.firstTimelineMs;
report.capture.timelineMs = summ.timelineMs;

// 3. Pickles: ours vs pickle.load.
function pickleCase(file) {
  const ours = best(3, () => inNode(`const h = new a.ModelHandle(file); h.summary(); return { events: h.eventCount() };`, file));
  const py = pythonLoad(file);
  return { events: ours.events, bytes: fs.statSync(file).size, oursWallMs: ours.wallMs, oursCpuMs: ours.cpuMs, pythonLoadWallMs: py.wallMs, pythonLoadCpuMs: py.cpuMs, speedup: py.wallMs / ours.wallMs };
}
report.resnet = pickleCase(resnet);
if (fs.existsSync(scaleTool)) {
  const scaled = path.join(dir, `resnet-x${scale}.pickle`);
  if (!fs.existsSync(scaled)) sh('python3', [scaleTool, resnet, scaled, String(scale)]);
  report.scaled = pickleCase(scaled);
} else {
  console.log(`skipped the scaled pickle: ${scaleTool} not found (pass --scale-tool)`);
}
const bigFile = opt('big', '');
if (bigFile) {
  const sync = best(3, () => inNode(`const h = new a.ModelHandle(file); h.summary(); return { events: h.eventCount() };`, bigFile));
  const asyncOpen = best(3, () => inNodeAsync(`const h = await a.openAsync(file); const ms = Number(process.hrtime.bigint() - t0) / 1e6; h.summary(); return { events: h.eventCount(), openMs: ms };`, bigFile));
  report.big = { file: path.basename(bigFile), events: sync.events, bytes: fs.statSync(bigFile).size, oursWallMs: sync.wallMs, oursCpuMs: sync.cpuMs, asyncOpenMs: asyncOpen.openMs, asyncWallMs: asyncOpen.wallMs, asyncMaxEventLoopGapMs: asyncOpen.maxGapMs };
}

const c = report.capture;
console.log(`\ncapture: ${c.events} events, ${(c.bytes / 2 ** 20).toFixed(0)} MiB`);
console.log(`  read+decode      ${fmt(c.decodeCpuMs)} CPU  ${rate(c.events, c.decodeCpuMs)} per core   (wall ${fmt(c.decodeMs)})`);
console.log(`  pair+series      ${fmt(c.deriveCpuMs)} CPU  ${rate(c.events, c.deriveCpuMs)} per core   (wall ${fmt(c.deriveMs)})`);
console.log(`  open total       ${fmt(c.decodeMs + c.deriveMs)}  ${rate(c.events, c.decodeMs + c.deriveMs)}  (process CPU ${fmt(c.openCpuMs)})`);
console.log(`  open + summary   ${fmt(c.summaryWallMs)}  (CPU ${fmt(c.summaryCpuMs)})`);
console.log(`  timeline 2000 px ${fmt(c.firstTimelineMs)} first (builds the pyramid), then ${fmt(c.timelineMs)}`);
for (const [name, p] of Object.entries({ resnet: report.resnet, scaled: report.scaled })) {
  if (!p) continue;
  console.log(`${name} pickle: ${p.events} events, ${(p.bytes / 2 ** 20).toFixed(1)} MiB`);
  console.log(`  open + summary   ${fmt(p.oursWallMs)} (CPU ${fmt(p.oursCpuMs)})   python pickle.load ${fmt(p.pythonLoadWallMs)} (CPU ${fmt(p.pythonLoadCpuMs)})   ${p.speedup.toFixed(2)}× faster than pickle.load`);
}
if (report.big) {
  const b = report.big;
  console.log(`${b.file}: ${b.events} events, ${(b.bytes / 2 ** 20).toFixed(1)} MiB`);
  console.log(`  open + summary   ${fmt(b.oursWallMs)} (CPU ${fmt(b.oursCpuMs)}, with the prefault thread)`);
  console.log(`  openAsync        ${fmt(b.asyncOpenMs)} to the resolved promise; longest event-loop stall meanwhile ${fmt(b.asyncMaxEventLoopGapMs)}`);
}
console.log('\n' + JSON.stringify(report));
