// The snapshot panel in a real VS Code (code-server): open a real PyTorch snapshot through the palette's
// "Open Snapshot…" (code-server's simple file dialog is a quick input: type the path), click the top
// allocation site, and the editor shows that source line. The expected line is python3's (the
// reference summary of the same pickle); the workspace holds the script at the frame's basename.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { vsCodeSuite } from './harness/suite.mjs';
import { ROOT, SAMPLE_WORKSPACE } from './harness/paths.mjs';

const PICKLE = 'mlp-expandable.pickle';
const reference = JSON.parse(execFileSync('python3', [path.join(ROOT, 'test/unit/reference/snapshot_summary.py'), path.join(SAMPLE_WORKSPACE, PICKLE)], { encoding: 'utf8' }));
const top = reference.top_lines.find((l) => !l.file.startsWith('<'));

let vsc;
const step = vsCodeSuite('snapshot', {}, (v) => (vsc = v));

test('Open Snapshot… opens the pickle in the snapshot panel with python\'s figures', async () => {
  const frame = await step('open', async () => {
    await vsc.runCommand('GPU Memory: Open Snapshot…');
    await vsc.acceptFileDialog(path.join(vsc.workspaceDir, PICKLE));
    return vsc.webviewFrame(PICKLE);
  });
  await step('summary', async () => {
    const verdict = frame.locator('[data-testid=verdict]');
    await verdict.waitFor({ timeout: 30_000 });
    const d = reference.devices[0];
    assert.equal(Number(await frame.locator('[data-figure=reserved]').getAttribute('data-bytes')), d.reserved_bytes);
    assert.equal(Number(await frame.locator('[data-figure=peakAllocated]').getAttribute('data-bytes')), d.peak_allocated_bytes);
    assert.equal(Number(await frame.locator('[data-figure=segments]').getAttribute('data-count')), d.segments);
    await vsc.screenshot('snapshot-summary');
  });
});

test('clicking the top allocation site reveals its file and line in the editor', async () => {
  const frame = await vsc.webviewFrame(PICKLE);
  await step('sites', async () => {
    await frame.locator('[data-testid=tab-sites]').click();
    const firstRow = frame.locator('[data-testid=sites-grid] vscode-data-grid-row[data-index="0"]');
    await firstRow.waitFor({ timeout: 15_000 });
    const site = (await firstRow.locator('vscode-data-grid-cell').first().textContent()).trim();
    assert.equal(site, `${top.file}:${top.line}`);
    await firstRow.locator('vscode-data-grid-cell').first().click();
  });
  await step('reveal', async () => {
    const base = path.basename(top.file);
    const tab = vsc.page.locator(`.tabs-container .tab.active[aria-label*="${base}"]`);
    await tab.first().waitFor({ timeout: 20_000 });
    // The cursor position in the status bar: "Ln 14, Col 1".
    const position = vsc.page.locator('.statusbar-item[id="status.editor.selection"]');
    await vsc.page.waitForFunction((line) => document.querySelector('[id="status.editor.selection"]')?.textContent?.includes(`Ln ${line},`), top.line, { timeout: 20_000 });
    assert.match(await position.textContent(), new RegExp(`Ln ${top.line}, Col 1`));
    // And the line shown is the script's own line, read from the workspace copy.
    const current = await vsc.page.locator('.monaco-editor .view-overlays .current-line').count();
    assert.ok(current >= 1, 'the revealed line is highlighted as the current line');
    await vsc.screenshot('snapshot-go-to-source');
  });
});

test('Export pickle… writes a PyTorch snapshot that python3 loads with the same segments', async () => {
  const frame = await vsc.webviewFrame(PICKLE);
  const out = path.join(vsc.workspaceDir, 'mlp-expandable-export.pickle');
  fs.rmSync(out, { force: true }); // a retried run must not meet an "overwrite?" question
  await step('export', async () => {
    await frame.locator('[data-testid=tab-summary]').click();
    await frame.locator('[data-testid=export-pickle]').click();
    // code-server's save dialog fills in the suggested path a moment after it shows (Note [File dialog input]).
    await vsc.acceptFileDialog(out, { starting: (v) => v.endsWith('.pickle') });
    await frame.locator('[data-testid=notice]', { hasText: 'Exported mlp-expandable-export.pickle' }).waitFor({ timeout: 20_000 });
  });
  await step('exported', async () => {
    const exported = JSON.parse(execFileSync('python3', [path.join(ROOT, 'test/unit/reference/snapshot_summary.py'), out], { encoding: 'utf8' }));
    const d = reference.devices[0];
    const e = exported.devices[0];
    assert.deepEqual([e.segments, e.reserved_bytes, e.allocated_bytes], [d.segments, d.reserved_bytes, d.allocated_bytes]);
    await vsc.screenshot('snapshot-exported');
  });
});

test('answering "Always for *.pickle" makes the explorer open pickles in the snapshot panel', async () => {
  const exported = 'mlp-expandable-export.pickle';
  await step('associate', async () => {
    // The question asked when the first pickle was opened; its toast may have gone to the notification centre.
    await vsc.runCommand('Notifications: Show Notifications');
    const toast = vsc.page
      .locator('.notifications-center .notification-list-item, .notifications-toasts .notification-list-item', { hasText: 'Open .pickle files with the GPU Memory Lens snapshot viewer by default?' })
      .first();
    await toast.waitFor({ timeout: 10_000 });
    await toast.locator('.monaco-button', { hasText: 'Always for *.pickle' }).click();
    // The answer lands in the user settings (where a user can undo it).
    const settingsFile = path.join(vsc.server.userDataDir, 'User/settings.json');
    const deadline = Date.now() + 10_000;
    while (!fs.readFileSync(settingsFile, 'utf8').includes('gpuMemoryLens.snapshotEditor') && Date.now() < deadline) await vsc.page.waitForTimeout(100);
    assert.match(fs.readFileSync(settingsFile, 'utf8'), /"\*\.pickle":\s*"gpuMemoryLens\.snapshotEditor"/);
    await vsc.runCommand('View: Close All Editors');
    // The file written by the export test: a plain double-click in the explorer now opens our editor.
    const row = vsc.page.locator('.explorer-folders-view .monaco-list-row', { has: vsc.page.locator('.label-name', { hasText: new RegExp(`^${exported.replace(/[.-]/g, '\\$&')}$`) }) }).first();
    await row.waitFor({ timeout: 20_000 });
    await row.dblclick();
    const frame = await vsc.webviewFrame(exported);
    await frame.locator('[data-testid=verdict]').waitFor({ timeout: 30_000 });
    assert.equal(Number(await frame.locator('[data-figure=segments]').getAttribute('data-count')), reference.devices[0].segments);
    await vsc.screenshot('snapshot-pickle-default');
  });
});

test('Open Ranks Side by Side… shows a session folder\'s ranks, one row each, and a click opens a rank', async () => {
  // two ranks of a torchrun job (the sim fixtures: rank 1 peaks higher), in one session folder outside the workspace
  const job = fs.mkdtempSync(path.join(os.tmpdir(), 'gpumem-ranks-e2e-'));
  for (const f of ['rank0.capture', 'rank1.capture']) fs.copyFileSync(path.join(ROOT, 'test/fixtures/sim-captures', f), path.join(job, f));
  try {
    const frame = await step('ranks', async () => {
      await vsc.runCommand('GPU Memory: Open Ranks Side by Side…');
      await vsc.acceptFileDialog(job);
      return vsc.webviewFrame(`Ranks: ${path.basename(job)}`);
    });
    await step('rows', async () => {
      const rows = frame.locator('[data-testid=rank-row]');
      await rows.first().waitFor({ timeout: 30_000 });
      assert.deepEqual(await rows.evaluateAll((rs) => rs.map((r) => r.getAttribute('data-rank'))), ['0', '1'], 'one row per rank, in rank order');
      await vsc.screenshot('snapshot-ranks');
      const peak = Number(await rows.nth(1).locator('[data-figure=peakAllocated]').getAttribute('data-bytes'));
      await rows.nth(1).click();
      // the rank's own snapshot panel, with the same peak as its row
      const rank = await vsc.webviewFrame('rank1.capture');
      await rank.locator('[data-testid=verdict]').waitFor({ timeout: 30_000 });
      assert.equal(Number(await rank.locator('[data-figure=peakAllocated]').getAttribute('data-bytes')), peak);
      assert.ok(peak > 0);
    });
  } finally {
    fs.rmSync(job, { recursive: true, force: true });
  }
});
