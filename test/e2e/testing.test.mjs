// The Testing view in a real VS Code (code-server + Chromium): a workspace with a pytest file whose two
// tests carry @pytest.mark.gpu_memory(peak="1MiB"), one that fits and one that does not. The tests are found by
// the "GPU Memory budgets" controller (nothing else activates the extension: its workspaceContains activation is
// under test too), run with the Testing view's own Run Tests button, and marked passed and failed; the failure's
// message (the Test Results panel) holds the test's own peak, what was live at its start and the lines at the peak,
// and its "Open capture" link opens the run's capture in the snapshot panel.
//
// CI has no GPU: pytest runs on the stand-in torch (test/python/fake_torch) with the real lens allocator on its
// simulated device. gpuMemoryLens.pythonPath is a two-line interpreter that sets GPUMEM_BACKEND=sim (the backend has
// no VS Code setting). The expected figures are not the plugin's: the project's reader reads them from the capture
// the run wrote (the failing test's begin/end markers, the device's peak and the lines at it).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { vsCodeSuite } from './harness/suite.mjs';
import { ROOT } from './harness/paths.mjs';
import { fmtBytes } from '../../src/core/views/testing/budgets.ts';
import { needsAllocator, openModel } from '../unit/reader-support.mjs';

const FILE = 'test_budgets.py';
const BUDGET = 1 << 20;
const TESTS = `import pytest
import torch

keep = []


@pytest.mark.gpu_memory(peak="1MiB")
def test_fits():
    keep.append(torch.empty(300 << 10, device="cuda"))  # FITS: live for the tests after it, not theirs


@pytest.mark.gpu_memory(peak="1MiB")
def test_over_budget():
    a = torch.empty(3 << 20, device="cuda")  # BIG-A
    b = torch.empty(1 << 20, device="cuda")  # BIG-B
    del a, b
`;
const lineOf = (marker) => TESTS.split('\n').findIndex((l) => l.includes(marker)) + 1;

let vsc;
let bin; // the folder of the simulated device's interpreter
const step = needsAllocator
  ? undefined
  : vsCodeSuite(
      'testing',
      () => {
        bin = fs.mkdtempSync(path.join(os.tmpdir(), 'gpumem-e2e-testing-'));
        const python = path.join(bin, 'python3');
        fs.writeFileSync(python, '#!/bin/sh\nGPUMEM_BACKEND=sim exec python3 "$@"\n', { mode: 0o755 });
        return {
          files: { [FILE]: TESTS },
          env: { PYTHONPATH: path.join(ROOT, 'test/python/fake_torch') },
          workspaceSettings: {
            'gpuMemoryLens.pythonPath': python,
            'gpuMemoryLens.allocator': 'lens',
            'gpuMemoryLens.deviceSampleIntervalMs': 0,
          },
        };
      },
      (v) => (vsc = v),
      () => bin && fs.rmSync(bin, { recursive: true, force: true }),
    );

/** The Testing view's tree rows (aria-labels: "test_fits (Passed)"). */
const explorerRows = () => vsc.page.locator('.test-explorer .monaco-list-row');

async function waitForRow(label, timeout) {
  const row = vsc.page.locator(`.test-explorer .monaco-list-row[aria-label^="${label} ("]`).first();
  try {
    await row.waitFor({ state: 'visible', timeout });
  } catch (err) {
    const rows = await explorerRows().evaluateAll((rs) => rs.map((r) => r.getAttribute('aria-label')));
    throw new Error(`no "${label}" in the Testing view within ${timeout} ms; it shows ${JSON.stringify(rows)}: ${err.message}`);
  }
  return row;
}

async function waitForState(row, state, timeout) {
  const deadline = Date.now() + timeout;
  let label;
  while (!(label = (await row.getAttribute('aria-label')) ?? '').includes(`(${state})`)) {
    if (Date.now() > deadline) throw new Error(`the Testing view shows "${label}", not ${state}, after ${timeout} ms`);
    await vsc.page.waitForTimeout(250);
  }
}

/** What the reader finds in the capture: the failing test's window, its peak and what was allocated at its start, and
 * the test file's lines at the device's peak. */
function fromCapture(capture, nodeid) {
  const model = openModel(capture);
  try {
    model.poll();
    const marks = model.markers(0);
    const begin = marks.find((m) => m.kind === 'range_begin' && m.label.startsWith(`${nodeid} #`));
    const end = begin && marks.find((m) => m.kind === 'range_end' && m.label === begin.label);
    assert.ok(begin && end, `the capture marks ${nodeid}: ${JSON.stringify(marks)}`);
    const windowPeak = model.timeline(0, begin.timeUs, end.timeUs, 1).allocatedMax[0];
    const before = model.stateAt(0, begin.timeUs).fragmentation.allocatedBytes;
    const devicePeak = model.timeline(0, model.timeRange(0).t0Us, model.timeRange(0).t1Us, 1).allocatedMax[0];
    // The test file's lines by the bytes under them at the peak. Inclusive: the stand-in torch is not in
    // site-packages, so to the reader its frame is the innermost user one; the workload's lines are the workspace's.
    const lines = model
      .lineStats(0)
      .filter((l) => path.basename(l.file) === FILE && l.inclusiveBytesAtPeak > 0)
      .sort((a, b) => b.inclusiveBytesAtPeak - a.inclusiveBytesAtPeak)
      .map((l) => ({ file: l.file, line: l.line, bytes: l.inclusiveBytesAtPeak }));
    return { windowPeak, before, own: windowPeak - before, devicePeak, lines };
  } finally {
    model.close();
  }
}

test('a failed GPU memory budget shows in the Testing view with its message; Open capture opens the capture', { skip: needsAllocator, timeout: 180_000 }, async (t) => {
  const { page } = vsc;
  let fits, over;
  await step('discover', async () => {
    await vsc.dismissDialogs();
    // The Testing view exists once a controller is registered: only our extension has one here, so this is also
    // the check that it activated on the workspace's test file.
    await vsc.runCommand('Testing: Focus on Test Explorer View');
    const file = await waitForRow(FILE, 30_000);
    if ((await file.getAttribute('aria-expanded')) !== 'true') await file.locator('.monaco-tl-twistie').click();
    fits = await waitForRow('test_fits', 10_000);
    over = await waitForRow('test_over_budget', 10_000);
  });
  await step('run', async () => {
    // The view's own Run Tests button (testing.runAll), as a user runs them.
    await page.locator('.action-label[aria-label="Run Tests"]:visible').first().click();
    await waitForState(over, 'Failed', 60_000);
    await waitForState(fits, 'Passed', 5_000);
    await vsc.screenshot('testing-run');
  });

  const root = path.join(vsc.workspaceDir, '.gpumem');
  const sessions = fs.readdirSync(root).filter((d) => d.endsWith('-pytest')).map((d) => path.join(root, d));
  assert.equal(sessions.length, 1, `one pytest session folder: ${fs.readdirSync(root)}`);
  const captureName = fs.readdirSync(sessions[0]).find((f) => /^capture-\d+\.gpumem$/.test(f));
  assert.ok(captureName, 'the run wrote a capture');
  const capture = path.join(sessions[0], captureName);
  const got = fromCapture(capture, `${FILE}::test_over_budget`);
  t.diagnostic(`capture ${captureName}: test peak ${got.windowPeak} (${got.before} at its start), lines ${JSON.stringify(got.lines)}`);
  // The run's peak is the failing test's (the passing one stays under 1 MiB), so the reader's lines at the device's
  // peak are the lines at the test's peak.
  assert.equal(got.devicePeak, got.windowPeak);
  assert.ok(got.own > BUDGET, `the test's peak ${got.own} is over its budget`);
  const top = got.lines.slice(0, 2);
  assert.deepEqual(
    top.map((l) => [path.basename(l.file), l.line]),
    [[FILE, lineOf('BIG-A')], [FILE, lineOf('BIG-B')]],
    'the reader puts the two big allocations at the peak',
  );

  await step('message', async () => {
    // The Test Results panel (the run opens it): the failed test's message.
    const results = page.locator('[id="workbench.panel.testResults"]');
    const message = results.locator('.monaco-list-row[aria-label^="gpu_memory: "]').first();
    await message.waitFor({ state: 'visible', timeout: 20_000 });
    await message.click();
    const shown = results.locator('.test-output-peek-message-container .rendered-markdown');
    await shown.locator('a', { hasText: 'Open capture' }).waitFor({ state: 'visible', timeout: 20_000 });
    const text = (await shown.innerText()).replace(/\u00a0/g, ' ');
    t.diagnostic(`message:\n${text}`);
    // pytest's own text, with the figures the reader found in the capture: the test's own peak (it frees nothing
    // that was live at its start, so the window's peak above its start) and what was live at its start
    assert.ok(
      text.includes(`gpu_memory: peak allocated ${fmtBytes(got.own)} exceeds the budget peak=${fmtBytes(BUDGET)} by ${fmtBytes(got.own - BUDGET)}`),
      `the message states the test's peak: ${text}`,
    );
    assert.ok(text.includes(`live at the test's start: ${fmtBytes(got.before)}, not counted`), text);
    assert.ok(text.includes(`top lines at the test's peak (its own allocations, ${fmtBytes(got.own)}):`), text);
    assert.ok(text.includes(`Lines at the test's peak, its own allocations (${fmtBytes(got.own)} above the ${fmtBytes(got.before)} live at its start):`), text);
    for (const l of top) assert.match(text, new RegExp(`^\\s*${esc(fmtBytes(l.bytes))}\\s+${esc(`${FILE}:${l.line}`)} in test_over_budget$`, 'm'));
    assert.ok(!text.includes(`${FILE}:${lineOf('FITS')}`), 'what test_fits left is not among the lines of test_over_budget');
    assert.ok(text.includes(`capture: ${capture}`) || text.includes(`capture: ${fs.realpathSync(capture)}`), `the message names the capture ${capture}`);
    // then each line at the peak as a link to it, named as the workspace names the file
    const links = await shown.locator('li a').evaluateAll((as) => as.map((a) => a.textContent));
    assert.deepEqual(links.slice(0, 2), top.map((l) => `${FILE}:${l.line}`));
    await vsc.screenshot('testing-message');
  });

  await step('line link', async () => {
    // A line at the peak opens the workspace's file at that line (the trusted gpuMemoryLens.openFrame link).
    await page.locator('[id="workbench.panel.testResults"] .test-output-peek-message-container li a').first().click();
    await page.locator(`.tabs-container .tab.active[aria-label*="${FILE}"]`).first().waitFor({ timeout: 20_000 });
    await page.waitForFunction((line) => document.querySelector('[id="status.editor.selection"]')?.textContent?.includes(`Ln ${line},`), top[0].line, { timeout: 20_000 });
  });

  await step('open capture', async () => {
    await page.locator('[id="workbench.panel.testResults"] .test-output-peek-message-container a', { hasText: 'Open capture' }).first().click();
    const frame = await vsc.webviewFrame(captureName);
    const peak = frame.locator('[data-figure=peakAllocated]');
    await peak.waitFor({ timeout: 30_000 });
    assert.equal(Number(await peak.getAttribute('data-bytes')), got.devicePeak, 'the snapshot panel shows the capture the run wrote');
    await vsc.screenshot('testing-open-capture');
  });
});

function esc(s) {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
