// The assistant's tools in a real VS Code (code-server 1.100.3), called as Copilot's agent mode or a chat participant
// calls them: through vscode.lm. A test-only extension installed beside ours (test/e2e/lm-caller) lists
// vscode.lm.tools and calls vscode.lm.invokeTool outside any chat; its answers are checked against the reader's own
// commands (`gpumem summary|replay --json`, the built dist/cli.js) on the same files. Then a run is followed live (the
// replay workload of test/e2e/replay, as in live.test.mjs): the tools answer about it without a path, and the actions
// that change it ask the user first, in VS Code's dialog, and do nothing when the user cancels.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { vsCodeSuite } from './harness/suite.mjs';
import { ROOT } from './harness/paths.mjs';
import { testExtensionVsix } from './harness/vsix.mjs';
import { formatBytes } from '../../src/core/base/units/bytes.ts';

const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
const TOOLS = manifest.contributes.languageModelTools;
const LEAKY = path.join(ROOT, 'test/fixtures/h100-leaky-convnet.capture');
// the run followed live: the capture the live test replays too (replay.py serves its control socket)
const REPLAYED = path.join(ROOT, 'test/fixtures/h200-e2e-train.capture');
const REPLAY = path.join(ROOT, 'test/e2e/replay');
const CALL_TOOLS = 'GPU Memory E2E: Call Language Model Tools';

/** The reader's own answer on a file (`gpumem <command> FILE … --json`, the built CLI). */
function reader(...args) {
  return JSON.parse(execFileSync(process.execPath, [path.join(ROOT, 'dist/cli.js'), ...args, '--json'], { encoding: 'utf8' }));
}

let vsc;
const step = vsCodeSuite(
  'assistant',
  () => ({
    extensions: [testExtensionVsix(path.join(ROOT, 'test/e2e/lm-caller'))],
    // speed 20: the 4 s recording streams in a fraction of a second; --hold keeps the workload (and its socket) up
    workspaceSettings: { 'gpuMemoryLens.launchCommand': `\${python} ${REPLAY}/replay.py ${REPLAYED} --speed 20 --hold 300`, 'gpuMemoryLens.livePanel.openOnRun': false },
  }),
  (v) => (vsc = v),
);

let asked = 0;
/**
 * Runs the caller's command with `calls` and returns what it wrote: the tools vscode.lm lists and each call's
 * answer. `whileRunning(vsc)`: what the user does while the calls run (answer a confirmation dialog).
 */
async function callTools(calls, whileRunning) {
  const dir = path.join(vsc.workspaceDir, '.e2e');
  fs.mkdirSync(dir, { recursive: true });
  const id = ++asked;
  fs.rmSync(path.join(dir, 'lm-answers.json'), { force: true });
  fs.writeFileSync(path.join(dir, 'lm-request.json'), JSON.stringify({ id, calls }));
  await vsc.runCommand(CALL_TOOLS);
  await whileRunning?.(vsc);
  const file = path.join(dir, 'lm-answers.json');
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (fs.existsSync(file)) {
      const answers = JSON.parse(fs.readFileSync(file, 'utf8'));
      if (answers.id === id) return answers;
    }
    if (Date.now() > deadline) throw new Error(`the caller wrote no answers for ${JSON.stringify(calls)} within 60 s`);
    await vsc.page.waitForTimeout(200);
  }
}

function answer(result) {
  assert.ok(result.text !== undefined, `${result.name} failed: ${result.error}`);
  return JSON.parse(result.text);
}

/** Waits for VS Code's modal confirmation with `title`, and presses `button`. */
async function confirmDialog(title, button) {
  const box = vsc.page.locator('.monaco-dialog-box');
  await box.waitFor({ state: 'visible', timeout: 30_000 });
  assert.equal((await box.locator('.dialog-message-text').textContent()).trim(), title);
  await vsc.screenshot(`assistant-confirm-${button.toLowerCase()}`);
  await box.locator('.dialog-buttons .monaco-button', { hasText: button }).click();
  await box.waitFor({ state: 'hidden', timeout: 10_000 });
}

test('vscode.lm.tools lists every tool of the manifest, with its description for the model and its input schema', async () => {
  await step('listed', async () => {
    const { tools } = await callTools([]);
    const ours = tools.filter((t) => t.name.startsWith('gpumem_'));
    assert.deepEqual(ours.map((t) => t.name).sort(), TOOLS.map((t) => t.name).sort());
    for (const t of ours) {
      const declared = TOOLS.find((d) => d.name === t.name);
      assert.equal(t.description, declared.modelDescription);
      assert.deepEqual(t.inputSchema, declared.inputSchema);
      assert.deepEqual(t.tags, declared.tags);
    }
  });
});

test('vscode.lm.invokeTool answers about a capture and a pickle with the reader\'s figures', async (t) => {
  await step('invoke', async () => {
    const { results } = await callTools([
      { name: 'gpumem_summary', input: { path: LEAKY } },
      { name: 'gpumem_leaks', input: { path: LEAKY } },
      { name: 'gpumem_peak_lines', input: { path: LEAKY, top: 3 } },
      // a relative path starts at the workspace folder (the sample workspace holds this pickle)
      { name: 'gpumem_replay', input: { path: 'mlp-expandable.pickle', policy: 'pytorch' } },
      { name: 'gpumem_summary', input: { path: 'no-such-file.gpumem' } },
    ]);
    const want = reader('summary', LEAKY);
    const dev = want.devices[0];
    const summary = answer(results[0]);
    assert.equal(summary.peak.allocated_bytes, dev.peak_allocated_bytes);
    assert.equal(summary.peak.allocated, formatBytes(dev.peak_allocated_bytes));
    assert.equal(summary.peak.step, dev.peak_step);
    assert.equal(summary.steps.leak_findings, want.steps[0].leaks.length);
    const lines = new Map(want.top_lines.map((l) => [`${l.file}:${l.line}`, l.bytes_at_peak]));
    for (const l of summary.top_lines_at_peak) assert.equal(l.bytes, lines.get(`${l.file}:${l.line}`));

    const leaks = answer(results[1]);
    assert.deepEqual(leaks.leaks.map((l) => l.allocated_at), want.steps[0].leaks.map((l) => `${l.file}:${l.line}`));
    assert.deepEqual(leaks.leaks.map((l) => l.growth_per_step_bytes), want.steps[0].leaks.map((l) => l.growth_per_step_bytes));
    const keeper = want.steps[0].leaks[0].keeper;
    assert.equal(leaks.keepers[0].kept_at, `${keeper.file}:${keeper.line}`);
    assert.equal(leaks.keepers[0].code, keeper.code);

    const peakLines = answer(results[2]);
    assert.equal(peakLines.lines.length, 3);
    for (const l of peakLines.lines) assert.equal(l.self_at_peak_bytes, lines.get(`${l.file}:${l.line}`));

    const pickle = path.join(vsc.workspaceDir, 'mlp-expandable.pickle');
    const replay = answer(results[3]);
    assert.equal(replay.file, pickle);
    const wantReplay = reader('replay', pickle, '--policy', 'pytorch');
    assert.equal(replay.replays[0].peak_reserved_bytes, wantReplay.replays[0].peak_reserved_bytes);
    assert.equal(replay.replays[0].peak_reserved, formatBytes(wantReplay.replays[0].peak_reserved_bytes));

    // a wrong path is the tool's error, a sentence the model can act on
    assert.equal(results[4].error, `Error: no file at ${path.join(vsc.workspaceDir, 'no-such-file.gpumem')} (from "no-such-file.gpumem"): pass the path of a .gpumem capture or a PyTorch snapshot .pickle`);
    t.diagnostic(`summary answer: ${results[0].text.length} characters`);
  });
});

test('without a path and no run followed, the tools say so', async () => {
  await step('no-run', async () => {
    const { results } = await callTools([{ name: 'gpumem_summary', input: {} }]);
    assert.match(results[0].error, /^Error: no workload is followed in VS Code: run one with "GPU Memory: Run Python File with Memory Tracking", or pass path/);
  });
});

test('the run followed live: answered without a path; snapshot and empty_cache ask first, and do nothing when cancelled', async (t) => {
  await step('live', async () => {
    await vsc.openFile('train.py');
    await vsc.runCommand('GPU Memory: Run Python File with Memory Tracking');
    // the recording streams in well under a second at speed 20; ask until the followed run's capture has its peak
    const wantPeak = reader('summary', REPLAYED).devices[0].peak_allocated_bytes;
    let live;
    const deadline = Date.now() + 60_000;
    while (!live || live.peak?.allocated_bytes !== wantPeak) {
      if (Date.now() > deadline) throw new Error(`the followed run never reached the recording's peak: ${JSON.stringify(live)}`);
      await vsc.page.waitForTimeout(500);
      const { results } = await callTools([{ name: 'gpumem_summary', input: {} }]);
      live = results[0].text ? JSON.parse(results[0].text) : undefined;
    }
    // the stream goes on for a moment after its peak: ask once more when it has surely ended
    await vsc.page.waitForTimeout(1000);
    live = answer((await callTools([{ name: 'gpumem_summary', input: {} }])).results[0]);
    assert.match(live.about, /^the workload running now: train\.py \(.+\), (rank 0 \()?pid \d+\)?$/);
    assert.match(live.file, /capture-\d+\.gpumem$/);
    // the same figures as the reader on the followed run's own capture
    const onDisk = reader('summary', live.file).devices[0];
    assert.equal(live.peak.allocated_bytes, onDisk.peak_allocated_bytes);
    assert.equal(live.at_end.reserved_bytes, onDisk.reserved_bytes);
    const reservedBefore = live.at_end.reserved_bytes;

    // a snapshot, confirmed, then asked about by its path: the state at the end of what the run wrote
    const snap = answer((await callTools([{ name: 'gpumem_capture_snapshot', input: {} }], () => confirmDialog('Capture a memory snapshot of the running workload?', 'Yes'))).results[0]);
    const pickle = snap.snapshots[0].pickle;
    assert.ok(fs.existsSync(pickle), pickle);
    const ofPickle = answer((await callTools([{ name: 'gpumem_summary', input: { path: pickle } }])).results[0]);
    assert.equal(ofPickle.format, 'pytorch-pickle');
    assert.equal(ofPickle.at_end.allocated_bytes, onDisk.allocated_bytes);
    assert.equal(ofPickle.at_end.reserved_bytes, onDisk.reserved_bytes);

    // cancelled: VS Code asks before the tool runs, and the tool never reaches the workload
    const cancelled = await callTools([{ name: 'gpumem_empty_cache', input: {} }], () => confirmDialog('Empty the GPU cache of the running workload?', 'Cancel'));
    assert.match(cancelled.results[0].error, /Canceled/);
    const after = answer((await callTools([{ name: 'gpumem_summary', input: {} }])).results[0]);
    assert.equal(after.at_end.reserved_bytes, reservedBefore);

    // confirmed: the workload releases its cache, and the capture says so
    const done = await callTools([{ name: 'gpumem_empty_cache', input: {} }], () => confirmDialog('Empty the GPU cache of the running workload?', 'Yes'));
    const emptied = answer(done.results[0]);
    assert.equal(emptied.processes.length, 1);
    const [p] = emptied.processes;
    assert.equal(p.reserved_before_bytes, reservedBefore);
    assert.equal(p.released_bytes, p.reserved_before_bytes - p.reserved_after_bytes);
    assert.ok(p.released_bytes > 0, 'the replayed run has cached segments to release');
    assert.equal(emptied.released, formatBytes(p.released_bytes));
    let now;
    for (let i = 0; i < 20 && now?.at_end.reserved_bytes !== p.reserved_after_bytes; i++) {
      await vsc.page.waitForTimeout(250);
      now = answer((await callTools([{ name: 'gpumem_summary', input: {} }])).results[0]);
    }
    assert.equal(now.at_end.reserved_bytes, p.reserved_after_bytes);
    t.diagnostic(`empty_cache released ${emptied.released}: reserved ${formatBytes(p.reserved_before_bytes)} → ${formatBytes(p.reserved_after_bytes)}`);
  });
});
