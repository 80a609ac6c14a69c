// In a real VS Code (code-server + Chromium): with gpuMemoryLens.allocator set to "pytorch", the
// sample runs through the replay workload (which, like the bootstrap, writes the mode into the capture
// header), and the UI says which allocator made the numbers: the status bar item and its tooltip. The figures
// are the capture's own (expected_lines.py decodes it independently of the extension's reader).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { vsCodeSuite } from './harness/suite.mjs';
import { ROOT } from './harness/paths.mjs';
import { formatBytes } from '../../src/core/base/units/bytes.ts';

const REPLAY = path.join(ROOT, 'test/e2e/replay');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'gpumem-mode-e2e-'));
const fixture = path.join(tmp, 'standin.gpumem');
execFileSync('python3', [path.join(REPLAY, 'make_standin.py'), fixture]);
const expected = JSON.parse(execFileSync('python3', [path.join(REPLAY, 'expected_lines.py'), fixture], { encoding: 'utf8' }));
const dev = expected.devices[0];

let vsc;
const step = vsCodeSuite(
  'mode',
  {
    workspaceSettings: {
      'gpuMemoryLens.launchCommand': `\${python} ${REPLAY}/replay.py ${fixture} --speed 3 --hold 60`,
      'gpuMemoryLens.allocator': 'pytorch',
      'gpuMemoryLens.livePanel.openOnRun': false,
    },
  },
  (v) => (vsc = v),
  () => fs.rmSync(tmp, { recursive: true, force: true }),
);

test('a run in the PyTorch-allocator mode says so in the status bar, with the capture’s figures', async (t) => {
  await step('run', async () => {
    await vsc.openFile('live_sample.py');
    await vsc.runCommand('GPU Memory: Run Python File with Memory Tracking');
  });
  await step('status bar', async () => {
    const item = vsc.page.locator('.statusbar-item', { hasText: 'pytorch allocator' }).first();
    await item.waitFor({ timeout: 60_000 });
    // Once the stream is over, the item shows the end state the capture itself gives.
    const want = `${formatBytes(dev.end_allocated)} / ${formatBytes(dev.end_reserved)} · pytorch allocator`;
    await vsc.page.waitForFunction(
      (w) => [...document.querySelectorAll('.statusbar-item')].some((e) => (e.textContent ?? '').includes(w)),
      want,
      { timeout: (expected.duration_s / 3 + 30) * 1000 },
    );
    const text = (await item.textContent()).trim();
    t.diagnostic(`status bar: "${text}"`);
    assert.ok(text.endsWith(want), text);
    await item.hover();
    const hover = vsc.page.locator('.monaco-hover, .workbench-hover, .workbench-hover-container, .statusbar-item-hover, [role=tooltip]', { hasText: 'allocator: pytorch (observed' }).first();
    await hover.waitFor({ timeout: 15_000 });
    await vsc.screenshot('mode-status-bar');
  });
});
