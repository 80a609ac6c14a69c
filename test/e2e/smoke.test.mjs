// Smoke: the packaged extension installs into a real VS Code (code-server 1.100.3), its commands are in
// the palette under "GPU Memory", and running one from the palette does what a user sees.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { vsCodeSuite } from './harness/suite.mjs';
import { ROOT } from './harness/paths.mjs';

// Derived from the manifest, so a renamed or dropped command fails here and not silently.
const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
const paletteTitles = manifest.contributes.commands.map((c) => `${c.category}: ${c.title}`);

// What "GPU Memory: Show Live Panel" shows a user with no workload running: the live panel, empty, saying
// how to start one. (Before the panel existed this asserted the stub's "not available yet" warning.)
const SHOW_LIVE_PANEL = 'GPU Memory: Show Live Panel';
async function expectShowLivePanelOutcome(vsc) {
  const frame = await vsc.webviewFrame('GPU Memory — Live');
  const empty = (await frame.locator('#empty').textContent({ timeout: 20_000 })).replace(/\s+/g, ' ').trim();
  assert.match(empty, /Run your Python file with GPU Memory: Run Python File with Memory Tracking/);
  assert.equal((await frame.locator('#run-name').textContent()).trim(), 'No run');
}

let vsc;
const step = vsCodeSuite('smoke', {}, (v) => (vsc = v));

test('all 12 commands are in the palette under the "GPU Memory" category', async (t) => {
  await step('palette', async () => {
    assert.equal(paletteTitles.length, 12, 'the manifest contributes 12 commands (Open Ranks Side by Side…, Restart Notebook Kernel, Open Snapshot by Time Range…, Open Sample Training Script and Get Started among them)');
    const labels = await vsc.paletteEntries('GPU Memory:', { expectAtLeast: paletteTitles.length });
    for (const title of paletteTitles) {
      assert.ok(labels.some((l) => l.startsWith(title)), `palette lacks "${title}"; it shows: ${JSON.stringify(labels)}`);
    }
  });
  t.diagnostic(`palette: ${paletteTitles.length} GPU Memory commands`);
});

test(`"${SHOW_LIVE_PANEL}" runs from the palette`, async () => {
  await step('show-live-panel', async () => {
    await vsc.runCommand(SHOW_LIVE_PANEL);
    await expectShowLivePanelOutcome(vsc);
    await vsc.screenshot('smoke-show-live-panel');
  });
});

// The harness helpers other E2E tests build on, checked against something VS Code itself provides: the
// built-in Markdown preview is a webview panel, like ours.
test('harness: openFile and webviewFrame reach a webview panel', async () => {
  await step('harness', async () => {
    await vsc.openFile('README.md');
    await vsc.runCommand('Markdown: Open Preview to the Side');
    const frame = await vsc.webviewFrame('Preview README.md');
    const heading = await frame.locator('h1').first().textContent({ timeout: 20_000 });
    const expected = fs.readFileSync(path.join(vsc.workspaceDir, 'README.md'), 'utf8').match(/^# (.+)$/m)[1];
    assert.equal(heading.trim(), expected);
  });
});
