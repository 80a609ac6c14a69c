// Budgeted captures through the extension's reader (issue 16, FORMAT.md §5, Note [Capture budget]): the GPT-2-size
// loop of test/bench/budget/gen_stream.py on the simulated device, without a budget, and the same stream written
// again through the writer with a 2 MiB budget (rebudget.cc: same times and ids). The summary's whole-run figures
// agree, per-line counts and totals agree, and the integrity part says which part of the run is aggregated.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { ALLOCATOR_LIB, needsAllocator, openModel, root, tmpDir } from './reader-support.mjs';

const { summarizeFile } = await import('../../src/core/analyses/summary/index.ts');

const BUDGET = 2 * 1024 * 1024;
const skip = needsAllocator || (spawnSync('g++', ['--version']).status === 0 ? false : 'needs g++ for rebudget.cc');

function run(cmd, args) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 1 << 26 });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed:\n${r.stderr}`);
  return r.stdout;
}

function pair() {
  const dir = tmpDir();
  const tool = path.join(dir, 'rebudget');
  const src = path.join(root, 'native/allocator/src');
  run('g++', ['-std=c++17', '-O1', '-o', tool, path.join(root, 'test/bench/budget/rebudget.cc'), path.join(src, 'writer.cc'), path.join(src, 'compactor.cc'), '-lpthread']);
  const full = path.join(dir, 'full.gpumem');
  const budgeted = path.join(dir, 'budgeted.gpumem');
  run('python3', [path.join(root, 'test/bench/budget/gen_stream.py'), ALLOCATOR_LIB, full, '200000']);
  run(tool, [full, budgeted, String(BUDGET)]);
  return { full, budgeted };
}

const files = skip ? null : pair();

test('a budgeted capture has the whole-run figures of the unbudgeted one and stays under its budget', { skip }, () => {
  const { full, budgeted } = files;
  assert.ok(fs.statSync(full).size > 4 * BUDGET, 'the stream is larger than the budget');
  assert.ok(fs.statSync(budgeted).size <= BUDGET);
  const u = summarizeFile(full).summary;
  const b = summarizeFile(budgeted).summary;
  const strip = (devs) => devs.map(({ events: _e, ...d }) => d);
  assert.ok(u.devices[0].peak_allocated_bytes > 0);
  assert.deepEqual(strip(b.devices), strip(u.devices));
  assert.ok(u.top_lines.length > 3);
  assert.deepEqual(b.top_lines, u.top_lines);
  assert.deepEqual(b.ooms, u.ooms);
  assert.deepEqual(b.categories, u.categories);
  assert.deepEqual(
    b.steps.map((s) => s.steps.map((x) => x.end_us)),
    u.steps.map((s) => s.steps.map((x) => x.end_us)),
  );
  assert.equal(b.integrity.endS, u.integrity.endS);
});

test('per-line counts and totals of a budgeted capture are those of the whole run', { skip }, () => {
  const lines = (file) => {
    const m = openModel(file);
    try {
      return m.lineStats(0).map((l) => JSON.stringify(l)).sort();
    } finally {
      m.close();
    }
  };
  const u = lines(files.full);
  assert.ok(u.length > 3);
  assert.deepEqual(lines(files.budgeted), u);
});

test('the integrity part says which part of the run is aggregated and from when every event is kept', { skip }, () => {
  const u = summarizeFile(files.full).summary;
  const s = summarizeFile(files.budgeted);
  const budget = s.summary.integrity.budget;
  assert.equal(u.integrity.budget, undefined);
  assert.equal(budget.budget_bytes, BUDGET);
  assert.ok(budget.aggregated.length > 1);
  for (const r of budget.aggregated) assert.ok(r.from_s <= r.to_s && r.events > 0);
  assert.equal(budget.full_detail_from_s, Math.max(...budget.aggregated.map((r) => r.to_s)));
  // Events compacted = the stream's events − the budgeted file's events that are not restated moments.
  const m = openModel(files.budgeted);
  let restated;
  try {
    restated = m.fileInfo().aggregated.reduce((n, r) => n + r.restated, 0);
  } finally {
    m.close();
  }
  assert.equal(budget.events_compacted, u.devices[0].events - (s.summary.devices[0].events - restated));
  const sentence = s.summary.integrity.sentences.find((x) => x.startsWith('Budgeted capture'));
  assert.match(sentence, /^Budgeted capture \(2\.00 MiB\): every event from \d+\.\d{3} s on is kept/);
  // The text summary says it too, word for word (wrapped in its box).
  const words = (t) => t.replace(/[|!]/g, ' ').split(/\s+/).filter(Boolean).join(' ');
  assert.ok(words(s.text).includes(words(sentence)), 'the text summary says it too');
});

test("the timeline of a budgeted capture spans the compacted ranges' buckets and keeps the peak", { skip }, () => {
  const timeline = (file) => {
    const m = openModel(file);
    try {
      const { t0Us, t1Us } = m.timeRange(0);
      const fullFrom = Math.max(0, ...(m.fileInfo().aggregated ?? []).map((r) => r.toUs));
      return { tl: m.timeline(0, t0Us, t1Us, 200), t0Us, t1Us, fullFrom, peak: m.summary().devices[0].peak_allocated_bytes };
    } finally {
      m.close();
    }
  };
  const u = timeline(files.full);
  const b = timeline(files.budgeted);
  assert.equal(b.t0Us, u.t0Us);
  assert.equal(Math.max(...u.tl.allocatedMax), u.peak);
  assert.equal(Math.max(...b.tl.allocatedMax), u.peak);
  // Inside the compacted part the shape comes from REC_TIMELINE: every display bucket there moves (min < max),
  // as in the unbudgeted timeline, instead of the few steps restated moments alone would draw.
  const w = (u.t1Us - u.t0Us) / 200;
  const inside = [...Array(200).keys()].filter((k) => u.t0Us + (k + 1) * w < b.fullFrom && u.tl.allocatedMin[k] < u.tl.allocatedMax[k]);
  assert.ok(inside.length > 20);
  for (const k of inside) {
    assert.ok(b.tl.allocatedMin[k] < b.tl.allocatedMax[k], `bucket ${k}`);
    assert.ok(b.tl.allocatedMin[k] <= u.tl.allocatedMax[k] && b.tl.allocatedMax[k] >= u.tl.allocatedMin[k], `bucket ${k} overlaps`);
    assert.ok(b.tl.allocatedMax[k] <= u.peak);
  }
});
