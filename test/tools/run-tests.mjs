// `npm test`: every test layer in order, each with its own summary and duration, then ONE closing line
// `N passed, N failed` summed over the layers; exits non-zero on any failure.
//
//   node test/tools/run-tests.mjs                  all layers
//   node test/tools/run-tests.mjs unit webview     only these (build runs first when a later layer needs it)
//   GPUMEM_TEST_SKIP=e2e,native npm test           all but these
//
// Layers: install · typecheck · lint · build · unit · python · webview · package · e2e · native · fuzz.
// Note [Counting]: every layer is counted from ONE format, the results file (Note [Results format] in
// test/README.md): run-tests gives each run its own fresh `.test-output/results/<run>.jsonl` in GPUMEM_RESULTS,
// the runners append one JSON line per test (node --test: results-reporter.mjs; unittest:
// results_unittest.py; shell/Make: emit-result.sh; C++: the native harness), and passed/failed/skipped are
// the lines by status. A run that exits non-zero with no failing line counts one failure; one that exits 0
// with no line at all fails ("reported no results"). typecheck, build and package write their one line
// here, lint its two (ESLint, .dev/product-speech.mjs). Nothing is counted from a runner's printed output: every native check writes its own line
// (check.h, the run_tests.sh scripts' emit-result.sh calls, the recorder's Python tests through
// results_unittest.py). A layer with no tests yet is "skipped" and counts nothing. All lines end up in .test-output/results.jsonl.
// Note [Preflight] (preflight.mjs): before a layer runs, what it needs is checked; a missing tool fails
// the layer at once with one line naming the apt package or command that provides it. In CI (CI=true) a
// skipped layer is a failure: CI must run every layer, so GPUMEM_TEST_SKIP is refused there too.
// Only Node built-ins here: this file runs before `npm ci` on a fresh clone.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { preflight } from '../../.dev/preflight.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const OUT = path.join(ROOT, '.test-output');
const CODE_SERVER = path.join(process.env.GPUMEM_TOOLS_DIR || path.join(ROOT, '.tools'), 'code-server/node_modules/.bin/code-server');
const rel = (p) => path.join(ROOT, p);
process.env.npm_config_nodedir ||= '/usr'; // node-gyp: local headers, no download

const ALL = ['install', 'typecheck', 'lint', 'build', 'unit', 'python', 'webview', 'package', 'e2e', 'native', 'fuzz'];
const NEEDS_DIST = new Set(['webview', 'package', 'e2e']);
const asked = process.argv.slice(2).filter((a) => !a.startsWith('-'));
for (const a of asked) if (!ALL.includes(a)) fail(`run-tests: unknown layer "${a}"; layers: ${ALL.join(', ')}`);
const skip = new Set((process.env.GPUMEM_TEST_SKIP || '').split(',').map((s) => s.trim()).filter(Boolean));
let selected = asked.length ? new Set(asked) : new Set(ALL);
if (asked.length && asked.some((a) => NEEDS_DIST.has(a))) selected.add('build');
if (asked.includes('e2e')) selected.add('package');
selected.add('install'); // cheap when node_modules is there
selected = new Set(ALL.filter((l) => selected.has(l) && !skip.has(l)));

function fail(msg) {
  console.error(msg);
  process.exit(2);
}

/** Test files under dir (recursive), skipping helpers/harness folders. */
function testFiles(dir, pattern = /\.test\.mjs$/, recursive = true) {
  if (!fs.existsSync(rel(dir))) return [];
  const names = fs.readdirSync(rel(dir), { recursive });
  return names
    .map(String)
    .filter((n) => pattern.test(n) && !n.split(path.sep).includes('node_modules'))
    .map((n) => path.join(dir, n))
    .sort();
}

/** Runs one command with live output; resolves {code, output}. */
function run(cmd, args, opts = {}) {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], ...opts });
    let output = '';
    const tee = (stream) => (chunk) => {
      output += chunk;
      stream.write(chunk);
    };
    child.stdout.on('data', tee(process.stdout));
    child.stderr.on('data', tee(process.stderr));
    child.on('close', (code, signal) => resolve({ code: code ?? (signal ? 128 : 1), output }));
    child.on('error', (err) => resolve({ code: 127, output: String(err) }));
  });
}

const RESULTS = path.join(OUT, 'results');
const ALL_LINES = [];

/** A fresh results file for one run (Note [Results format]) and the env that hands it to the runners. */
function resultsFile(run, layer) {
  fs.mkdirSync(RESULTS, { recursive: true });
  const file = path.join(RESULTS, `${run}.jsonl`);
  fs.writeFileSync(file, '');
  return { file, env: { GPUMEM_RESULTS: file, GPUMEM_RESULTS_LAYER: layer } };
}

/** Appends one line of the results format (for single checks and run-tests' own verdicts). */
function emit(file, line) {
  fs.appendFileSync(file, `${JSON.stringify(line)}\n`);
}

/** Counts a results file; `code` is the run's exit status (Note [Counting]'s two guards). */
function countResults(file, layer, code) {
  const text = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '';
  const c = { passed: 0, failed: 0, skippedTests: 0, lines: 0, bad: [] };
  text.split('\n').forEach((raw, i) => {
    if (!raw.trim()) return;
    let l;
    try {
      l = JSON.parse(raw);
    } catch {
      l = null;
    }
    const ok = l && typeof l === 'object' && typeof l.name === 'string' && typeof l.layer === 'string' &&
      ['pass', 'fail', 'skip'].includes(l.status) && typeof l.ms === 'number';
    if (!ok) {
      c.bad.push(`${path.relative(ROOT, file)}:${i + 1}: not a results line (Note [Results format]): ${raw.slice(0, 200)}`);
      return;
    }
    c.lines++;
    ALL_LINES.push(raw);
    if (l.status === 'pass') c.passed++;
    else if (l.status === 'fail') c.failed++;
    else c.skippedTests++;
  });
  c.failed += c.bad.length;
  if (code !== 0 && c.failed === 0) {
    const line = { layer, name: `${layer}: exit status`, status: 'fail', ms: 0, message: `${layer}: exited with code ${code} and reported no failing test` };
    ALL_LINES.push(JSON.stringify(line));
    c.failed = 1;
  } else if (code === 0 && c.lines === 0 && !c.bad.length) {
    const line = { layer, name: `${layer}: results`, status: 'fail', ms: 0, message: `${layer}: reported no results (does its runner honour GPUMEM_RESULTS?)` };
    ALL_LINES.push(JSON.stringify(line));
    c.failed = 1;
  }
  for (const b of c.bad) console.log(b);
  return c;
}

const oneCheck = async (cmd, args, opts, layer, runName = layer) => {
  const started = Date.now();
  const r = await run(cmd, args, opts);
  const { file } = resultsFile(runName, layer);
  emit(file, { layer, name: `${layer}: ${[cmd === process.execPath ? 'node' : cmd, ...args].join(' ')}`.slice(0, 300), status: r.code === 0 ? 'pass' : 'fail',
    ms: Date.now() - started, ...(r.code === 0 ? {} : { message: `exited with code ${r.code}` }) });
  const c = countResults(file, layer, r.code);
  return { passed: c.passed, failed: c.failed, skippedTests: c.skippedTests };
};

/** node --test over files, counting from a TAP copy of the run. */
// Per-test (and per-hook) limits, so a hung browser or server fails its test instead of stalling CI.
const TEST_TIMEOUT_MS = { unit: 120_000, webview: 120_000, e2e: 300_000 };

async function nodeTests(layer, files, extraArgs = [], env = {}, timeoutMs = TEST_TIMEOUT_MS[layer] ?? 120_000, resultsLayer = layer) {
  if (!files.length) return { skipped: `no ${layer} tests yet` };
  const results = resultsFile(layer, resultsLayer);
  const r = await run(
    process.execPath,
    [
      '--import', './test/tools/ts-loader.mjs',
      '--test',
      '--test-reporter=spec', '--test-reporter-destination=stdout',
      '--test-reporter=./test/tools/results-reporter.mjs', `--test-reporter-destination=${results.file}`,
      `--test-timeout=${timeoutMs}`,
      ...extraArgs,
      ...files,
    ],
    { env: { ...process.env, ...env, ...results.env } },
  );
  // A crash before any test reported (a syntax error in a test file) still counts as a failure.
  const c = countResults(results.file, resultsLayer, r.code);
  return { passed: c.passed, failed: c.failed, skippedTests: c.skippedTests };
}

// Note [Parallel make]: the native and fuzz layers compile one object per source under two sanitizers;
// `-j` (one job per core) halves their time on CI's two cores. `--output-sync=target` keeps each target's
// output (compiler errors, a test binary's report) in one piece.
const MAKE_JOBS = [`-j${os.availableParallelism?.() ?? os.cpus().length}`, '--output-sync=target'];

async function makeTests(dir, target = 'test', layer = 'native') {
  const results = resultsFile(`${layer}-${path.basename(dir)}-${target}`, layer);
  const r = await run('make', [...MAKE_JOBS, '-C', dir, target], { env: { ...process.env, ...results.env } });
  const c = countResults(results.file, layer, r.code);
  return { passed: c.passed, failed: c.failed, skippedTests: c.skippedTests };
}

// Note [Tests built ahead]: node --test runs one file at a time on two cores, and the other layers before the native
// one mostly run one process at a time (one VS Code at a time in e2e), so a core idles for minutes while the native
// and fuzz layers compile every source under two sanitizers, about 1,000 CPU-seconds (CI measured: native 531 s, fuzz
// 164 s, most of it compiling). From the start (after install), `make test-build` compiles their x64 binaries, one
// job at nice 19, so that it takes only what the layers before leave idle, and runs none of them; the native and
// fuzz layers, last, then run their usual targets, which find the binaries up to date (a failure here is only
// logged: those targets build again and report it). What it has not finished when the native layer starts is
// stopped (make deletes a target it was interrupted in) and left to that layer's `make -j`, on both cores. It builds
// no library another layer loads, and nothing for ARM64 until the package layer has built the ARM64 objects; then
// `make test-arm64-build` builds the ARM64 tests from them beside the e2e layer. SCHED_IDLE (chrt --idle) where the
// system has it: below nice 19, so the layers' own processes keep their cores.
let ahead = null; // the queue's end: resolves to { code, secs, log } of everything queued so far
let aheadChild = null;
let aheadStopped = false;
let aheadLog = null;
const aheadStarted = Date.now();
/** Queues `make TARGET` in each native folder, one job at the lowest priority the system has (SCHED_IDLE, nice 19). */
function buildTestsAhead(target) {
  const dirs = ['native/allocator', 'native/addon'].filter((d) => fs.existsSync(rel(`${d}/Makefile`)) && (selected.has('native') || selected.has('fuzz')));
  if (!dirs.length || aheadStopped) return;
  if (!aheadLog) {
    fs.mkdirSync(OUT, { recursive: true });
    aheadLog = path.join(OUT, 'tests-built-ahead.log');
    fs.writeFileSync(aheadLog, '');
  }
  const log = aheadLog;
  const make = (d) =>
    new Promise((resolve) => {
      const out = fs.openSync(log, 'a');
      const idle = fs.existsSync('/usr/bin/chrt') ? ['chrt', '--idle', '0'] : [];
      const [cmd, ...args] = [...idle, 'nice', '-n', '19', 'make', '-j1', '-C', d, target];
      const child = spawn(cmd, args, { cwd: ROOT, stdio: ['ignore', out, out], detached: true });
      aheadChild = child;
      child.on('close', (c) => (fs.closeSync(out), resolve(c ?? 1)));
      child.on('error', () => (fs.closeSync(out), resolve(127)));
    });
  const before = ahead ?? Promise.resolve({ code: 0 });
  ahead = before.then(async (prev) => {
    let code = prev.code;
    for (const d of dirs) {
      if (aheadStopped || code !== 0) break;
      code = await make(d);
      aheadChild = null;
    }
    return { code, secs: (Date.now() - aheadStarted) / 1000, log };
  });
}
async function awaitTestsAhead(layer) {
  if (!ahead) return;
  aheadStopped = true;
  if (aheadChild) {
    try {
      process.kill(-aheadChild.pid, 'SIGTERM'); // make and its compilers: one process group (detached)
    } catch {
      // already gone
    }
  }
  const r = await ahead;
  ahead = null;
  const how = r.code ? `stopped after ${r.secs.toFixed(0)} s; the layer builds the rest (${path.relative(ROOT, r.log)})` : `built ahead in ${r.secs.toFixed(0)} s`;
  console.log(`${layer}: test binaries ${how}`);
}

const layers = {
  async install() {
    if (fs.existsSync(rel('node_modules/.package-lock.json'))) return { skipped: 'node_modules present' };
    return oneCheck('npm', ['ci', '--no-audit', '--no-fund'], {}, 'install');
  },
  typecheck: () => oneCheck(process.execPath, ['.dev/typecheck.mjs'], {}, 'typecheck'),
  // ESLint, then Note [Product speech] (.dev/product-speech.mjs): no issue numbers, work sessions or lettered runs.
  async lint() {
    const checks = [await oneCheck(process.execPath, ['node_modules/eslint/bin/eslint.js', '.'], {}, 'lint'),
      await oneCheck(process.execPath, ['.dev/product-speech.mjs'], {}, 'lint', 'lint-product-speech')];
    return checks.reduce((t, c) => ({ passed: t.passed + c.passed, failed: t.failed + c.failed, skippedTests: t.skippedTests + c.skippedTests }));
  },
  build: () => oneCheck(process.execPath, ['esbuild.config.mjs'], {}, 'build'),
  unit: () => nodeTests('unit', testFiles('test/unit')),
  async native() {
    await awaitTestsAhead('native');
    // The allocator's caching core (test) and its recording side (test-recorder), then the reader; both again for
    // ARM64 under qemu-user (Note [ARM64] in native/floor/README.md). native/Makefile's format-check: the C/C++ files
    // against .clang-format (Note [C++ style]); floor-check: the built binaries' symbol versions (Note [Binary floor]).
    const targets = [['native/allocator', 'test'], ['native/allocator', 'test-recorder'], ['native/addon', 'test'],
      ['native/allocator', 'test-arm64'], ['native/addon', 'test-arm64'], ['native', 'format-check'], ['native', 'floor-check']]
      .filter(([d]) => fs.existsSync(rel(`${d}/Makefile`)));
    if (!targets.length) return { skipped: 'no native Makefiles yet' };
    const total = { passed: 0, failed: 0, skippedTests: 0 };
    for (const [d, target] of targets) {
      const r = await makeTests(d, target);
      total.passed += r.passed;
      total.failed += r.failed;
      total.skippedTests += r.skippedTests;
    }
    return total;
  },
  // A short libFuzzer run of the capture decoder and the pickle reader from their seed corpora (the
  // 1 M-execution runs are in native/addon/fuzz/README.md). Needs clang (.ci/run installs it).
  async fuzz() {
    await awaitTestsAhead('fuzz');
    // Each fuzz target writes one line (emit-result.sh in the fuzz-smoke recipe).
    const results = resultsFile('fuzz', 'fuzz');
    const r = await run('make', [...MAKE_JOBS, '-C', 'native/addon', 'fuzz-smoke', `FUZZ_SECONDS=${process.env.FUZZ_SECONDS ?? 20}`],
      { env: { ...process.env, ...results.env } });
    const c = countResults(results.file, 'fuzz', r.code);
    return { passed: c.passed, failed: c.failed, skippedTests: c.skippedTests };
  },
  async python() {
    if (!testFiles('test/python', /^test.*\.py$|\/test[^/]*\.py$/).length) return { skipped: 'no python tests yet' };
    const results = resultsFile('python', 'python');
    const r = await run('python3', ['test/tools/results_unittest.py', 'test/python'], { env: { ...process.env, ...results.env } });
    const c = countResults(results.file, 'python', r.code);
    return { passed: c.passed, failed: c.failed, skippedTests: c.skippedTests };
  },
  webview: () => nodeTests('webview', testFiles('test/webview', /\.test\.mjs$/, false)),
  async package() {
    const vsix = path.join(OUT, 'e2e/gpu-memory-lens.vsix');
    const r = await oneCheck(process.execPath, ['.dev/package.mjs', '--out', vsix], {}, 'package');
    if (!r.failed) process.env.GPUMEM_VSIX = vsix; // packaged once, installed by every E2E test file
    return r;
  },
  async e2e() {
    const files = testFiles('test/e2e', /\.test\.mjs$/, false);
    if (!files.length) return { skipped: 'no e2e tests yet' };
    if (!fs.existsSync(CODE_SERVER)) {
      console.log('e2e: code-server missing, running .dev/setup-code-server.sh');
      const r = await run('bash', ['.dev/setup-code-server.sh']);
      const missing = r.code === 0 ? preflight('e2e') : 'e2e: missing code-server 4.100.3 in .tools/: npm run setup-e2e failed (see its output above)';
      if (missing) return { passed: 0, failed: 1, missing };
    }
    // One VS Code at a time: each is ~2 GB and the machine may have 2 cores.
    // Note [One retry per E2E file]: a file that fails is run once more in a fresh VS Code, and its second
    // result is the one that counts. Headless UI timing on two loaded cores occasionally misses a widget
    // (seen about once in five runs under load); a real regression fails both runs. Every retry is logged.
    const total = { passed: 0, failed: 0 };
    for (const file of files) {
      const label = `e2e-${path.basename(file, '.test.mjs')}`;
      const mark = ALL_LINES.length;
      let r = await nodeTests(label, [file], ['--test-concurrency=1'], {}, TEST_TIMEOUT_MS.e2e, 'e2e');
      if (r.failed) {
        console.log(`e2e: ${path.basename(file)} had ${r.failed} failure(s); retrying it once in a fresh VS Code`);
        ALL_LINES.length = mark; // the retry's lines are the ones that count (its file keeps the first run's)
        r = await nodeTests(`${label}-retry`, [file], ['--test-concurrency=1'], {}, TEST_TIMEOUT_MS.e2e, 'e2e');
      }
      total.passed += r.passed;
      total.failed += r.failed;
    }
    return total;
  },
};

const CI = /^(1|true|yes)$/i.test(process.env.CI ?? '');
const results = [];
const t0 = Date.now();
let buildFailed = false;
if (CI) {
  for (const layer of ALL.filter((l) => skip.has(l) && (!asked.length || asked.includes(l)))) {
    results.push({ layer, secs: 0, passed: 0, failed: 1, missing: `${layer}: GPUMEM_TEST_SKIP is not allowed in CI (CI=true): every layer must run` });
  }
}
for (const layer of selected) {
  // Later layers that test dist/ would only repeat the build's failure; unit/native/python test sources.
  if (buildFailed && NEEDS_DIST.has(layer)) {
    results.push({ layer, secs: 0, skipped: 'build failed' });
    console.log(`\n── ${layer}: skipped (build failed)`);
    continue;
  }
  console.log(`\n━━ ${layer} ━━`);
  const s = Date.now();
  // e2e installs code-server itself when it is missing (npm run setup-e2e), so that check waits for it.
  const missing = preflight(layer, { except: layer === 'e2e' && !fs.existsSync(CODE_SERVER) ? ['code-server'] : [] });
  let r = missing ? { passed: 0, failed: 1, missing } : await layers[layer]();
  if (r.missing) console.log(`preflight: ${r.missing}`);
  // In CI a layer that did not run is a failure (installing over a present node_modules is not a layer).
  if (CI && r.skipped && !(layer === 'install' && r.skipped === 'node_modules present')) {
    r = { passed: 0, failed: 1, missing: `${layer}: skipped in CI (${r.skipped}); CI must run every layer` };
    console.log(`preflight: ${r.missing}`);
  }
  const secs = (Date.now() - s) / 1000;
  results.push({ layer, secs, ...r });
  const summary = r.skipped ? `skipped (${r.skipped})` : `${r.passed} passed, ${r.failed} failed${r.skippedTests ? `, ${r.skippedTests} skipped` : ''}${r.missing ? ` (${r.missing})` : ''}`;
  console.log(`── ${layer}: ${summary} in ${secs.toFixed(1)} s`);
  if (layer === 'install' && r.failed) {
    console.log('── npm ci failed: later layers skipped');
    break;
  }
  if (layer === 'build' && r.failed) buildFailed = true;
  if (layer === 'install' && !r.failed) buildTestsAhead('test-build');
  // the ARM64 test binaries, from the objects the package layer just built, beside the e2e layer
  if (layer === 'package' && !r.failed) buildTestsAhead('test-arm64-build');
}

const passed = results.reduce((a, r) => a + (r.passed ?? 0), 0);
const failedN = results.reduce((a, r) => a + (r.failed ?? 0), 0);
const missingLines = results.filter((r) => r.missing).map((r) => r.missing);
if (missingLines.length) {
  console.log('\nMissing on this machine (.ci/run installs the apt packages; GPUMEM_TEST_SKIP=<layer> skips a layer locally):');
  for (const m of missingLines) console.log(`  ${m}`);
}
console.log('\nStage timings:');
for (const r of results) {
  const what = r.skipped ? 'skipped' : `${r.passed} passed, ${r.failed} failed`;
  console.log(`  ${r.layer.padEnd(10)} ${r.secs.toFixed(1).padStart(6)} s   ${what}`);
}
console.log(`  ${'total'.padEnd(10)} ${((Date.now() - t0) / 1000).toFixed(1).padStart(6)} s`);
fs.mkdirSync(OUT, { recursive: true });
fs.writeFileSync(path.join(OUT, 'timings.json'), JSON.stringify(results, null, 2));
fs.writeFileSync(path.join(OUT, 'results.jsonl'), ALL_LINES.map((l) => `${l}\n`).join(''));
console.log(`${passed} passed, ${failedN} failed`);
process.exit(failedN || !results.length ? 1 : 0);

