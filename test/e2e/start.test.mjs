// `npm start` on a machine with no GPU: the sample workspace's settings (.dev/start-settings.mjs)
// must make "Run Python File with Memory Tracking" show a live workload — the product's main job.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startSettings } from '../../.dev/start-settings.mjs';
import { vsCodeSuite } from './harness/suite.mjs';

const hook = startSettings({ replay: true });
let vsc;
const step = vsCodeSuite('start', { workspaceSettings: hook.settings }, (v) => (vsc = v));

test("npm start's replay hook turns Run Python File into a live session", { skip: !hook.settings && hook.reason }, async () => {
  await step('replay', async () => {
    await vsc.openFile('live_sample.py');
    await vsc.runCommand('GPU Memory: Run Python File with Memory Tracking');
    const panel = await vsc.webviewFrame('GPU Memory — Live');
    // A track per device appears once the capture streams; its allocated figure is real bytes, not 0.
    const allocated = panel.locator('.track .figure[data-figure="allocated"]').first();
    await allocated.waitFor({ state: 'attached', timeout: 30_000 });
    let bytes = 0;
    for (let i = 0; i < 40 && bytes === 0; i++) {
      bytes = Number(await allocated.getAttribute('data-bytes'));
      if (bytes === 0) await vsc.page.waitForTimeout(250);
    }
    assert.ok(bytes > 0, `the live panel's allocated figure stayed at ${bytes}`);
    await vsc.screenshot('start-replay-live');
  });
});
