// Benchmark (not a test) for the capture budget, on the simulated device:
//   node --import ./test/tools/ts-loader.mjs test/bench/budget/run.mjs [--events 100000000] [--budget 268435456] [--dir DIR]
//     [--keep 1] (keep the unbudgeted capture) [--reuse 1] (use DIR's unbudgeted capture if there) [--live 0] (skip the live run)
// 1. gen_stream.py records a GPT-2-size loop (1,449 allocations a step, a slow leak, one late peak) without a
//    budget (the unbudgeted capture U, large: under DIR, deleted at the end) and again with the budget, live (L);
// 2. rebudget writes U again through the writer with the budget (B: the same stream, times and ids included);
// 3. `gpumem summary --json` of U and of B must agree on every whole-run figure: per device the peak allocated
//    bytes, its time and step, reserved, final state; the top lines at the peak; OOMs; categories at the peak; the
//    step boundaries (markers); the file's end;
// 4. prints sizes and timings (generation, compaction, summary of U and of B = the reader opening B).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const arg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : dflt;
};
const events = Number(arg('events', 100_000_000));
const budget = Number(arg('budget', 256 * 2 ** 20));
const dir = arg('dir', path.join(os.tmpdir(), `gpumem-budget-${events}`));
const lib = path.join(root, 'dist/native/libgpumem_allocator.so');
const mib = (b) => `${(b / 2 ** 20).toFixed(1)} MiB`;
fs.mkdirSync(dir, { recursive: true });

function run(cmd, args) {
  const t0 = process.hrtime.bigint();
  const p = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 1 << 30 });
  const s = Number(process.hrtime.bigint() - t0) / 1e9;
  if (p.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (${p.status}):\n${p.stderr}`);
  return { out: p.stdout, s };
}

const tool = path.join(dir, 'rebudget');
run('g++', ['-std=c++17', '-O2', '-o', tool, path.join(root, 'test/bench/budget/rebudget.cc'),
  path.join(root, 'native/allocator/src/writer.cc'), path.join(root, 'native/allocator/src/compactor.cc'), '-lpthread']);

const U = path.join(dir, 'unbudgeted.gpumem');
const L = path.join(dir, 'budgeted-live.gpumem');
const B = path.join(dir, 'budgeted.gpumem');
const gen = path.join(root, 'test/bench/budget/gen_stream.py');
if (arg('reuse', '') && fs.existsSync(U)) {
  console.log(`unbudgeted: reusing ${U}, ${mib(fs.statSync(U).size)}`);
} else {
  const g1 = run('python3', [gen, lib, U, String(events)]);
  console.log(`unbudgeted: ${g1.out.trim()} in ${g1.s.toFixed(1)} s, ${mib(fs.statSync(U).size)}`);
}
const live = arg('live', '1') !== '0';
if (live) {
  const g2 = run('python3', [gen, lib, L, String(events), String(budget)]);
  console.log(`live, budget ${mib(budget)}: ${g2.out.trim()} in ${g2.s.toFixed(1)} s, ${mib(fs.statSync(L).size)}`);
}
const rb = run(tool, [U, B, String(budget)]);
console.log(`rebudget: ${rb.out.trim()} in ${rb.s.toFixed(1)} s, ${mib(fs.statSync(B).size)}`);

const cli = path.join(root, 'dist/cli.js');
const su = run('node', [cli, 'summary', '--json', U]);
const sb = run('node', [cli, 'summary', '--json', B]);
const sl = live ? run('node', [cli, 'summary', '--json', L]) : null;
console.log(`summary: unbudgeted ${su.s.toFixed(2)} s, budgeted ${sb.s.toFixed(2)} s (the reader opening the budgeted capture)${sl ? `, live-budgeted ${sl.s.toFixed(2)} s` : ''}`);

// Whole-run figures: everything but the event count (B holds fewer events by design), the budget sentence and the
// per-step figures inside compacted ranges (the step boundaries themselves must agree).
const wholeRun = (j) => ({
  devices: j.devices.map(({ events: _e, ...d }) => d),
  top_lines: j.top_lines,
  ooms: j.ooms,
  categories: j.categories,
  steps: (j.steps ?? []).map((s) => ({ device: s.device, source: s.source, ends: s.steps.map((x) => [x.step, x.end_us]) })),
  end: { ended: j.integrity.ended, endS: j.integrity.endS, exitCode: j.integrity.exitCode, lostEvents: j.integrity.lostEvents },
});
const a = wholeRun(JSON.parse(su.out));
const b = wholeRun(JSON.parse(sb.out));
let same = true;
for (const k of Object.keys(a)) {
  const eq = JSON.stringify(a[k]) === JSON.stringify(b[k]);
  same &&= eq;
  console.log(`${eq ? 'PASS' : 'FAIL'} ${k}${eq ? '' : `\n  unbudgeted ${JSON.stringify(a[k]).slice(0, 400)}\n  budgeted   ${JSON.stringify(b[k]).slice(0, 400)}`}`);
}
const bj = JSON.parse(sb.out);
console.log(`budget sentence: ${(bj.integrity.sentences ?? []).find((s) => /budget/i.test(s)) ?? '(none)'}`);
if (sl) {
  const lj = JSON.parse(sl.out);
  console.log(`live budgeted capture: peak ${lj.devices.map((d) => d.peak_allocated_bytes).join(', ')} B (unbudgeted ${a.devices.map((d) => d.peak_allocated_bytes).join(', ')} B)`);
}
for (const [name, f] of live ? [['budgeted', B], ['live budgeted', L]] : [['budgeted', B]]) {
  const size = fs.statSync(f).size;
  console.log(`${size <= budget ? 'PASS' : 'FAIL'} ${name} capture ${mib(size)} ≤ budget ${mib(budget)}`);
  same &&= size <= budget;
}
if (!arg('keep', '')) fs.rmSync(U);
process.exitCode = same ? 0 : 1;
