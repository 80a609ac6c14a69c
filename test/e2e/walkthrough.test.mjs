// The first-run walkthrough in a real VS Code (code-server + Chromium), as a new user follows it: "GPU Memory:
// Get Started" opens it, and each of its five steps is done with the step's own button, until VS Code marks the
// step complete (its completionEvents: Note [Walkthrough progress] in src/glue/walkthrough/progress.ts). A
// screenshot of each step goes to .test-output/e2e/walkthrough-<n>-<step>.png, for a person to look at.
//
// With no GPU, as `npm start` runs it (.dev/start-settings.mjs, Note [Replay hook]): the run is the replay of
// the sample's recorded capture, and the budget tests run on the stand-in torch with the lens allocator on the
// simulated device. The expected line is decoded from that capture by test/e2e/replay/expected_lines.py.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { startSettings } from '../../.dev/start-settings.mjs';
import { formatBytes } from '../../src/core/base/units/bytes.ts';
import { vsCodeSuite } from './harness/suite.mjs';
import { ROOT } from './harness/paths.mjs';
import { needsAllocator } from '../unit/reader-support.mjs';

const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
const walkthrough = manifest.contributes.walkthroughs[0];
const SAMPLES = path.join(ROOT, 'media/walkthrough');
const hook = startSettings({ replay: true });

// The sample's heaviest line at the peak, as the recorded capture has it (the replay streams that capture).
const FIXTURE = path.join(ROOT, 'test/fixtures/h200-e2e-train.capture');
const expected = JSON.parse(execFileSync('python3', [path.join(ROOT, 'test/e2e/replay/expected_lines.py'), FIXTURE], { encoding: 'utf8' }));
const target = expected.devices[0].lines.find((l) => l.stable && path.basename(l.file) === 'gpumem_sample.py');
const expectedText = `▲ ${formatBytes(target.self_bytes_at_peak)} at peak · ${target.alloc_count} alloc${target.alloc_count === 1 ? '' : 's'}`;

let vsc;
const skip = (!hook.settings && hook.reason) || needsAllocator;
const step = skip
  ? undefined
  : vsCodeSuite(
      'walkthrough',
      {
        workspaceSettings: { ...hook.settings, 'editor.stickyScroll.enabled': false },
      },
      (v) => (vsc = v),
    );

/** The step's row in the walkthrough (its id ends with the manifest's step id). */
const stepRow = (id) => vsc.page.locator(`.getting-started-step[data-step-id$="#${id}"]`).first();
const stepDone = (id) => vsc.page.locator(`[data-done-step-id$="#${id}"]`).first();

/** Brings the walkthrough's tab to the front when another editor covers it (a snapshot opens over it). */
async function showWalkthrough(id) {
  const row = stepRow(id);
  if (!(await row.isVisible())) await vsc.page.locator('.tabs-container .tab', { hasText: /^Walkthrough: / }).first().click();
  await row.waitFor({ state: 'visible', timeout: 20_000 });
  return row;
}

/** Shows the walkthrough and expands the step. */
async function expand(id) {
  const row = await showWalkthrough(id);
  if ((await row.getAttribute('aria-expanded')) !== 'true') await row.click();
  await vsc.page.waitForFunction((sel) => document.querySelector(sel)?.getAttribute('aria-expanded') === 'true', `.getting-started-step[data-step-id$="#${id}"]`, { timeout: 10_000 });
  return row;
}

/** Clicks the button a step's description makes of the link `[label](command:…)`. */
async function press(id, label) {
  const row = await expand(id);
  const button = row.locator('.monaco-button', { hasText: label }).first();
  await button.waitFor({ state: 'visible', timeout: 10_000 });
  await button.click();
}

async function waitDone(id, timeout) {
  await showWalkthrough(id);
  const box = stepDone(id);
  const deadline = Date.now() + timeout;
  while (!((await box.getAttribute('class')) ?? '').split(/\s+/).includes('complete')) {
    if (Date.now() > deadline) throw new Error(`the walkthrough's step "${id}" is not complete after ${timeout} ms; on screen: ${JSON.stringify(await vsc.visibleMessages())}`);
    await vsc.page.waitForTimeout(200);
  }
}

test('the walkthrough opens from the palette and lists its five steps; the sample, opened before it, is done', { skip }, async () => {
  await step('open', async () => {
    // Other "Get Started" commands (VS Code's own walkthroughs) match the palette's search before ours is
    // registered, and runCommand would take one of them: wait for all of ours first.
    const title = 'GPU Memory: Get Started';
    const entries = await vsc.paletteEntries('GPU Memory:', { expectAtLeast: manifest.contributes.commands.length });
    assert.ok(entries.some((l) => l.startsWith(title)), `the palette has "${title}": ${JSON.stringify(entries)}`);
    // A user who opens the sample before the walkthrough: VS Code creates the walkthrough's state only when it is
    // first asked for, and the step must be done all the same (Note [Walkthrough progress]).
    await vsc.runCommand('GPU Memory: Open Sample Training Script');
    await vsc.page.locator('.tabs-container .tab[aria-label*="gpumem_sample.py"]').first().waitFor({ timeout: 15_000 });
    await vsc.runCommand(title);
    const ids = walkthrough.steps.map((s) => s.id);
    assert.deepEqual(ids, ['sampleOpened', 'runStarted', 'linesShown', 'snapshotOpened', 'budgetRun']);
    for (const id of ids) await stepRow(id).waitFor({ state: 'visible', timeout: 30_000 });
    await waitDone('sampleOpened', 10_000);
    for (const id of ids.slice(1)) assert.doesNotMatch((await stepDone(id).getAttribute('class')) ?? '', /\bcomplete\b/, `step ${id} starts not done`);
  });
});

test('each step is completed with its own button, and shows what it promises', { skip, timeout: 150_000 }, async (t) => {
  await step('1-open-sample', async () => {
    // The button opens the sample as it is in the folder (written by the palette's command above).
    await press('sampleOpened', 'Open the Sample');
    await vsc.page.locator('.tabs-container .tab[aria-label*="gpumem_sample.py"]').first().waitFor({ timeout: 15_000 });
    // the shipped sample, written into the folder byte for byte
    assert.equal(
      fs.readFileSync(path.join(vsc.workspaceDir, 'gpumem_sample.py'), 'utf8'),
      fs.readFileSync(path.join(SAMPLES, 'gpumem_sample.py'), 'utf8'),
    );
    await vsc.screenshot('walkthrough-1-open-sample');
  });

  await step('2-run', async () => {
    await press('runStarted', 'Run with Memory Tracking');
    await waitDone('runStarted', 20_000);
    const panel = await vsc.webviewFrame('GPU Memory — Live');
    const allocated = panel.locator('.track .figure[data-figure="allocated"]').first();
    await allocated.waitFor({ state: 'attached', timeout: 30_000 });
    let bytes = 0;
    for (let i = 0; i < 60 && bytes === 0; i++) {
      bytes = Number(await allocated.getAttribute('data-bytes'));
      if (bytes === 0) await vsc.page.waitForTimeout(250);
    }
    assert.ok(bytes > 0, `the live panel's allocated figure stayed at ${bytes}`);
    // the run's terminal takes half the height: the screenshots show the steps instead
    await vsc.runCommand('View: Hide Panel');
    await expand('runStarted');
    await vsc.screenshot('walkthrough-2-run');
  });

  await step('3-lines', async () => {
    // The replayed run's heaviest line at the peak, on the sample the first step opened.
    const deco = await vsc.waitForDecorationText(expectedText, { timeout: 30_000 });
    assert.equal(deco.after.trim(), expectedText);
    await waitDone('linesShown', 10_000);
    await expand('linesShown');
    t.diagnostic(`line "${deco.line.trim()}": ${deco.after.trim()}`);
    await vsc.screenshot('walkthrough-3-lines');
  });

  await step('4-snapshot', async () => {
    await press('snapshotOpened', 'Capture Snapshot');
    // The snapshot opens over the walkthrough, in its group; the step is done once the panel shows it.
    const tab = vsc.page.locator('.tabs-container .tab', { hasText: /snapshot-\d+-\d+\.pickle/ }).first();
    await tab.waitFor({ timeout: 30_000 });
    const frame = await vsc.webviewFrame((await tab.locator('.label-name').textContent()).trim());
    const peak = frame.locator('[data-figure=peakAllocated]');
    await peak.waitFor({ timeout: 30_000 });
    assert.ok(Number(await peak.getAttribute('data-bytes')) > 0, 'the snapshot panel shows the snapshot of the running sample');
    await vsc.screenshot('walkthrough-4-snapshot');
    await waitDone('snapshotOpened', 15_000);
  });

  await step('5-budget', async () => {
    await press('budgetRun', 'Add the Sample Test');
    await vsc.page.locator('.tabs-container .tab[aria-label*="test_gpumem_sample.py"]').first().waitFor({ timeout: 15_000 });
    await press('budgetRun', 'Run the Budgets');
    await waitDone('budgetRun', 60_000);
    // The verdicts: the small batch fits its budget, the large one does not.
    await vsc.runCommand('Testing: Focus on Test Explorer View');
    const row = (name) => vsc.page.locator(`.test-explorer .monaco-list-row[aria-label^="${name} ("]`).first();
    const file = vsc.page.locator('.test-explorer .monaco-list-row[aria-label^="test_gpumem_sample.py"]').first();
    await file.waitFor({ timeout: 15_000 });
    if ((await file.getAttribute('aria-expanded')) !== 'true') await file.locator('.monaco-tl-twistie').click();
    await vsc.page.waitForFunction(
      () => [...document.querySelectorAll('.test-explorer .monaco-list-row')].map((r) => r.getAttribute('aria-label') ?? '').filter((l) => /\((Passed|Failed)\)/.test(l)).length >= 2,
      null,
      { timeout: 15_000 },
    );
    assert.match(await row('test_small_batch_fits').getAttribute('aria-label'), /\(Passed\)/);
    assert.match(await row('test_large_batch_over_budget').getAttribute('aria-label'), /\(Failed\)/);
    await expand('budgetRun');
    await vsc.screenshot('walkthrough-5-budget');
  });

  await step('all-done', async () => {
    for (const s of walkthrough.steps) assert.match((await stepDone(s.id).getAttribute('class')) ?? '', /\bcomplete\b/, `step ${s.id} is done`);
  });
});
