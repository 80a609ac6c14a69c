// Benchmark (not a test): the snapshot panel opens a budgeted capture of the 1-hour stream in ≤ 3 s.
//
//   node --import ./test/tools/ts-loader.mjs test/bench/budget/panel-open.mjs [--budgeted PATH] [--baseline PATH] [--runs 3]
//
// --budgeted: the 256 MiB budgeted capture of the 100 M-event stream that run.mjs leaves (default
//   $TMPDIR/gpumem-budget-100000000/budgeted.gpumem); --baseline: an unbudgeted capture to compare against in the
//   same run (default: gen_stream.py records 1 M events of the same loop into $TMPDIR, once).
// Each run opens the file as the panel host does (SnapshotPanelHost: openModelAsync on the reader's worker thread
// while the real page loads in Chromium, test/webview/snapshot-host.mjs answering with OpenedCapture) on the
// Timeline tab, and waits for the panel's first complete state: the summary shown and the timeline painted with
// its data (the page's marks). Time is from the start of the open to that paint, with Chromium already running (as
// VS Code's webview process is when a panel opens; each open gets a fresh browser context and page, so the page's
// load, scripts and toolkit are inside the time). `--cold 1` launches Chromium inside each timed open instead (an
// upper bound). `--marks 1` prints the page's marks of each open (ms from its start). Budgeted and baseline alternate, so load drifts on the shared machine hit both; the ratio is per pair.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { openSnapshotPanel } from '../../webview/snapshot-host.mjs';
import { launchChromium } from '../../webview/harness/index.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
process.env.GPUMEM_ADDON ||= path.join(root, 'dist/native/gpumem_addon.node');
const { openModelAsync } = await import('../../../src/core/base/model/open.ts');

const arg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : dflt;
};
const budgeted = arg('budgeted', path.join(os.tmpdir(), 'gpumem-budget-100000000', 'budgeted.gpumem'));
const runs = Number(arg('runs', 3));
const cold = arg('cold', '0') === '1';
const showMarks = arg('marks', '0') === '1';
const browser = cold ? undefined : await launchChromium();
if (!fs.existsSync(budgeted)) {
  throw new Error(`${budgeted} is missing: make it with test/bench/budget/run.mjs --events 100000000 (or pass --budgeted PATH)`);
}
let baseline = arg('baseline', '');
if (!baseline) {
  baseline = path.join(os.tmpdir(), 'gpumem-budget-baseline-1M.gpumem');
  if (!fs.existsSync(baseline)) {
    const g = spawnSync('python3', [path.join(root, 'test/bench/budget/gen_stream.py'), path.join(root, 'dist/native/libgpumem_allocator.so'), baseline, '1000000'], { encoding: 'utf8' });
    if (g.status !== 0) throw new Error(`gen_stream.py failed:\n${g.stderr}`);
  }
}

const STATE = { tab: 'timeline', device: 0, sitesSort: { key: 'selfBytesAtPeak', descending: true }, compare: { a: 'peak', b: 'end' } };

async function openOnce(file) {
  const t0 = Date.now();
  const cpu0 = process.cpuUsage();
  let openedAt = 0;
  const opening = openModelAsync(file).then((m) => {
    openedAt = Date.now();
    return m;
  });
  const wv = await openSnapshotPanel(opening, { fileName: path.basename(file), viewport: { width: 1400, height: 900 }, state: STATE, browser });
  await wv.page.waitForFunction(() => window.__snapshotPanel?.marks.timelinePainted && window.__snapshotPanel?.marks.summary, null, { timeout: 300_000 });
  const marks = await wv.page.evaluate(() => ({ ...window.__snapshotPanel.marks, nav: performance.timing.navigationStart }));
  const integrity = await wv.page.locator('[data-testid=integrity-banner]').allTextContents().catch(() => []);
  // the host side's CPU (reader worker thread + OpenedCapture's answers): what load on the machine cannot inflate
  const cpu = process.cpuUsage(cpu0);
  await wv.close();
  const model = await opening;
  const events = model.summary().devices.reduce((s, d) => s + d.events, 0);
  model.close();
  const at = (ms) => Math.round(marks.nav + ms - t0);
  // where the time went: each page mark (a message received, the summary shown, the timeline asked and painted), ms from the open's start
  const steps = Object.entries(marks)
    .filter(([k, v]) => k !== 'nav' && v > 0)
    .map(([k, v]) => [k, at(v)])
    .sort((a, b) => a[1] - b[1]);
  return { openMs: openedAt - t0, hostCpuMs: Math.round((cpu.user + cpu.system) / 1000), summaryMs: at(marks.summary), firstCompleteMs: Math.max(at(marks.summary), at(marks.timelinePainted)), events, integrity, steps };
}

const rows = [];
console.log(`budgeted ${budgeted} (${(fs.statSync(budgeted).size / 2 ** 20).toFixed(1)} MiB); baseline ${baseline} (${(fs.statSync(baseline).size / 2 ** 20).toFixed(1)} MiB); load ${os.loadavg().map((x) => x.toFixed(1)).join(' ')}`);
for (let r = 1; r <= runs; r++) {
  const base = await openOnce(baseline);
  const bud = await openOnce(budgeted);
  const row = { run: r, budgeted: bud, baseline: base, ratio: bud.firstCompleteMs / base.firstCompleteMs };
  rows.push(row);
  console.log(
    `run ${r}: budgeted (${bud.events.toLocaleString('en-US')} events held) read ${bud.openMs} ms, first complete state ${bud.firstCompleteMs} ms (host CPU ${bud.hostCpuMs} ms); ` +
      `baseline (${base.events.toLocaleString('en-US')} events) read ${base.openMs} ms, first complete state ${base.firstCompleteMs} ms (host CPU ${base.hostCpuMs} ms); ratio ×${row.ratio.toFixed(2)}`,
  );
  if (showMarks) for (const [name, o] of [['budgeted', bud], ['baseline', base]]) console.log(`  ${name} marks: ${o.steps.map(([k, v]) => `${k} ${v}`).join(', ')}`);
}
const worst = Math.max(...rows.map((x) => x.budgeted.firstCompleteMs));
console.log(`${worst <= 3000 ? 'PASS' : 'FAIL'} budgeted capture's first complete state ≤ 3 s in every run (worst ${worst} ms, Chromium ${cold ? 'launched inside each open' : 'already running'}); load ${os.loadavg().map((x) => x.toFixed(1)).join(' ')}`);
await browser?.close();
fs.mkdirSync(path.join(root, '.test-output/bench'), { recursive: true });
fs.writeFileSync(path.join(root, '.test-output/bench/budget-panel-open.json'), JSON.stringify(rows, null, 1));
