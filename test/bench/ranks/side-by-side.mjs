// Benchmark (not a test): 8 ranks × 1 M events side by side, all read and drawn-ready, ÷ one rank of 1 M.
//   node --import ./test/tools/ts-loader.mjs test/bench/ranks/side-by-side.mjs [--ranks 8] [--events 1000000] [--runs 3] [--dir DIR] [--full]
// Makes the captures once (test/bench/budget/gen_stream.py, the real lens allocator on the simulated device, unbounded,
// RANK=i; rank 2 records 20 % more events: the slowest), then times RankSet.open (the panel's ranks view: every rank
// read on the reader's worker threads, Note [Ranks off the host thread]) on rank 0 alone and on all ranks, alternating,
// `--runs` times each; prints the medians, their ratio, the longest event-loop stall and the marked ranks, and how many
// ranks came from their capture's index (Note [Rank row from the index]). --full: every rank by a full open (the view
// before the index carried the row), for a before/after on the same files. --page: also "all drawn", as the ranks panel
// runs (src/glue/snapshot/ranksPanel.ts): the read starts with the page's load, in a Chromium already running (as VS
// Code's webview process is), and the time is from that start to the page's ranks rendered (its `ranks` mark, the
// lanes drawn), one rank ÷ all ranks alternating as above (needs `npm run build:js`).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
process.env.GPUMEM_ADDON ||= path.join(root, 'dist/native/gpumem_addon.node');
const { RankSet } = await import('../../../src/core/views/ranks/rankSet.ts');

const arg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : dflt;
};
const ranks = Number(arg('ranks', 8));
const events = Number(arg('events', 1_000_000));
const runs = Number(arg('runs', 3));
const dir = arg('dir', path.join(os.tmpdir(), `gpumem-side-by-side-${ranks}x${events}`));
const lib = path.join(root, 'dist/native/libgpumem_allocator.so');
const files = [];
fs.mkdirSync(dir, { recursive: true });
for (let r = 0; r < ranks; r++) {
  const file = path.join(dir, `rank${r}`, `capture-${1000 + r}.gpumem`);
  files.push(file);
  if (fs.existsSync(file)) continue;
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const n = r === 2 ? Math.round(events * 1.2) : events;
  const p = spawnSync('python3', [path.join(root, 'test/bench/budget/gen_stream.py'), lib, file, String(n)], {
    encoding: 'utf8',
    env: { ...process.env, RANK: String(r), LOCAL_RANK: String(r), WORLD_SIZE: String(ranks) },
  });
  if (p.status !== 0) throw new Error(p.stderr);
}
const mib = files.reduce((s, f) => s + fs.statSync(f).size, 0) / 2 ** 20;
async function timed(list) {
  let last = performance.now();
  let stall = 0;
  const tick = setInterval(() => {
    const now = performance.now();
    stall = Math.max(stall, now - last);
    last = now;
  }, 1);
  const t0 = performance.now();
  const set = await RankSet.open(list, { title: 'bench', useIndex: !process.argv.includes('--full') });
  const ms = performance.now() - t0;
  clearInterval(tick);
  return { ms, stall, set };
}
const one = [];
const all = [];
let marked = '';
for (let i = 0; i < runs; i++) {
  one.push(await timed(files.slice(0, 1)));
  const a = await timed(files);
  all.push(a);
  marked = a.set.view().ranks.filter((r) => r.marks.length).map((r) => `rank ${r.rank}: ${r.marks.join('+')} (peak ${r.peakAllocatedBytes}, top line ${r.topLine?.displayFile}:${r.topLine?.line})`).join('; ');
}
const med = (xs) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)];
if (process.argv.includes('--page')) {
  const { launchChromium } = await import('../../webview/harness/index.mjs');
  const { openSnapshotPanel } = await import('../../webview/snapshot-host.mjs');
  const browser = await launchChromium();
  const drawn = async (list) => {
    const t0 = Date.now();
    const reading = RankSet.open(list, { title: 'bench', useIndex: !process.argv.includes('--full') });
    const wv = await openSnapshotPanel(reading, { fileName: 'bench', makeSession: (set) => set, browser, viewport: { width: 1400, height: 900 } });
    await wv.page.waitForFunction(() => window.__snapshotPanel?.marks.ranks, null, { timeout: 120_000 });
    const at = await wv.page.evaluate(() => performance.timing.navigationStart + window.__snapshotPanel.marks.ranks);
    await wv.close();
    return at - t0;
  };
  const p1 = [];
  const pAll = [];
  for (let i = 0; i < runs; i++) {
    p1.push(await drawn(files.slice(0, 1)));
    pAll.push(await drawn(files));
  }
  await browser.close();
  console.log(`all drawn (page): one rank ${p1.map((x) => x.toFixed(0)).join(', ')} ms (median ${med(p1).toFixed(0)}); ${ranks} ranks ${pAll.map((x) => x.toFixed(0)).join(', ')} ms (median ${med(pAll).toFixed(0)}); ratio ${(med(pAll) / med(p1)).toFixed(2)}`);
}
const oneMs = med(one.map((x) => x.ms));
const allMs = med(all.map((x) => x.ms));
console.log(`${ranks} ranks × ${events} events (${mib.toFixed(0)} MiB), ${os.cpus().length} CPUs`);
console.log(`one rank: ${one.map((x) => x.ms.toFixed(1)).join(', ')} ms (median ${oneMs.toFixed(1)})`);
console.log(`${ranks} ranks: ${all.map((x) => x.ms.toFixed(1)).join(', ')} ms (median ${allMs.toFixed(1)}), read ${all[0].set.readsAtOnceSeen} at once, ${all[0].set.fromIndex} from their index, longest event-loop stall ${Math.max(...all.map((x) => x.stall)).toFixed(0)} ms`);
console.log(`one rank: longest event-loop stall ${Math.max(...one.map((x) => x.stall)).toFixed(0)} ms`);
console.log(`ratio ${ranks} ranks ÷ one: ${(allMs / oneMs).toFixed(2)}`);
console.log(`marked: ${marked}`);
