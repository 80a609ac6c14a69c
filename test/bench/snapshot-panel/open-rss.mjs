// Peak resident memory of opening a snapshot the way the panel does (a big pickle's overview first, Note [First
// view]; then the asynchronous open and the queries
// of its first paint: summary, markers, sites, the whole-trace timeline with its bands), in a fresh
// process so nothing else counts. Prints one JSON line: { overviewMs, overviewRssMiB, openMs, queriesMs, maxRssMiB, readCpuMs, queriesCpuMs }:
// readCpuMs is the reader thread's CPU time (decode + derive, native timings()), queriesCpuMs the process's CPU
// time during the queries; on a loaded machine they measure the work where wall time measures the neighbours.
// stalls: [ms since the start, ms] of each block over 15 ms; modelMs: when the model was read (prepare follows).
// stallOpenMs / stallQueriesMs: the longest block of this (the extension host's) event loop while the file is read,
// and while the first queries run, from a 2 ms interval timer's lateness. The read includes the first answers computed
// on a worker (OpenedCapture.prepare, Note [First answers]; --no-prepare: without them, as before); the queries then
// run on this thread, one event-loop turn each, as the panel host answers them; queryMs: each one's block.
// --window A B (fractions of the overview's time range): the range-first open of that window instead of the whole
// file (Note [Range-first open] in native/addon/src/range_open.cpp); the overview is read first, as the panel does.
//   node --import ./test/tools/ts-loader.mjs test/bench/snapshot-panel/open-rss.mjs FILE [--window 0.4 0.45]
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
process.env.GPUMEM_ADDON ||= path.join(ROOT, 'dist/native/gpumem_addon.node');
const { openModelFirstView, openModelAsync, openOverviewAsync } = await import('../../../src/core/base/model/open.ts');
const { OpenedCapture } = await import('../../../src/core/views/snapshot/openedCapture.ts');

const file = process.argv[2];
const w = process.argv.indexOf('--window');
const windowFrac = w > 0 ? [Number(process.argv[w + 1]), Number(process.argv[w + 2])] : null;
let stallMax = 0;
let last = performance.now();
/** [ms since the open's start, block ms] of every block over 15 ms: where the longest ones fall (stalls) */
const stalls = [];
const tick = setInterval(() => {
  const now = performance.now();
  stallMax = Math.max(stallMax, now - last - 2);
  if (now - last - 2 > 15) stalls.push([Math.round(last - t0), Math.round(now - last - 2)]);
  last = now;
}, 2);
const t0 = performance.now();
let overviewMs = null;
let overviewRssMiB = null;
let model;
if (windowFrac) {
  const o = await openOverviewAsync(file);
  if (!o) throw new Error(`${file}: no overview`);
  overviewMs = Math.round(performance.now() - t0);
  overviewRssMiB = Math.round(process.resourceUsage().maxRSS / 1024);
  const { rangeT0Us: a, rangeT1Us: b } = o.devices[0];
  model = await openModelAsync(file, true, { fromUs: a + windowFrac[0] * (b - a), toUs: a + windowFrac[1] * (b - a) });
} else {
  model = await openModelFirstView(file, () => {
    overviewMs = Math.round(performance.now() - t0);
    overviewRssMiB = Math.round(process.resourceUsage().maxRSS / 1024); // peak so far: the overview pass's
  });
}
const modelMs = Math.round(performance.now() - t0);
// As src/glue/snapshot/panelHost.ts does: the first answers on a worker thread (Note [First answers]), part of the read.
const session = new OpenedCapture(model, { fileName: path.basename(file) });
if (!process.argv.includes('--no-prepare')) await session.prepare();
const t1 = performance.now();
await new Promise((r) => setTimeout(r, 5));
const stallOpenMs = Math.round(stallMax);
stallMax = 0;
last = performance.now();
const cpu1 = process.cpuUsage();
// The page's first questions, one event-loop turn each as the host answers them: opened, markers, summary, sites, timeline.
const turn = () => new Promise((r) => setImmediate(r));
const queryMs = {};
const timed = async (name, f) => {
  await turn();
  const t = performance.now();
  f();
  queryMs[name] = Math.round(performance.now() - t);
};
await timed('opened', () => session.opened());
let markers;
await timed('markers', () => (markers = session.timelineMarkers(0)));
await timed('summary', () => session.summaryMessage(0, markers));
await timed('sites', () => session.sitesMessage(0));
const { t0Us, t1Us } = model.timeRange(0);
if (!process.argv.includes('--no-prepare')) await session.prepareTimeline(0, t0Us, t1Us, 1300, 3000); // on a worker, as the host does
await timed('timeline', () => session.timeline(1, 0, t0Us, t1Us, 1300, 3000));
const t2 = performance.now();
const cpu = process.cpuUsage(cpu1);
await new Promise((r) => setTimeout(r, 5));
clearInterval(tick);
const stallQueriesMs = Math.round(stallMax);
const timings = JSON.parse(model.handle?.timings?.() ?? '{}');
console.log(
  JSON.stringify({
    overviewMs,
    overviewRssMiB,
    modelMs,
    openMs: Math.round(t1 - t0),
    queriesMs: Math.round(t2 - t1),
    maxRssMiB: Math.round(process.resourceUsage().maxRSS / 1024),
    readCpuMs: Math.round(((timings.decodeCpuNs ?? 0) + (timings.deriveCpuNs ?? 0)) / 1e6),
    queriesCpuMs: Math.round((cpu.user + cpu.system) / 1000),
    stallOpenMs,
    stallQueriesMs,
    queryMs,
    stalls,
    events: model.summary().devices.reduce((n, d) => n + d.events, 0),
  }),
);
model.close();
