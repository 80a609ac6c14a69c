// The live panel's categories over time and its leak finding (Note [Live categories]): a real
// LiveRun over a session folder holding a capture the real allocator wrote on the simulated device for a
// training loop that keeps one 64 KiB tensor per step (test/unit/reference/sim_training.py --leak), fed to the
// panel's page in Chromium as the host feeds it. At the end of that loop what is live is known by construction:
// 3 × 4 MiB parameters, 3 × 4 MiB gradients, 3 × 8 MiB optimizer state and the kept tensors.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { formatBytes } from '../../src/core/base/units/bytes.ts';
import { liveHtmlTemplate } from '../../src/glue/live/template.ts';
import { LiveRun } from '../../src/core/views/live/index.ts';
import { needsAllocator, openModel, simTraining } from '../unit/reader-support.mjs';
import { openWebview } from './harness/index.mjs';

const KiB = 1024;
const MiB = 1024 * KiB;
const LEAK = 64 * KiB;
const STEPS = 5;
const FILES = {
  '/dist/webview/live.js': 'dist/webview/live.js',
  '/dist/webview/toolkit.min.js': 'dist/webview/toolkit.min.js',
  '/dist/webview/uPlot.min.css': 'dist/webview/uPlot.min.css',
  '/media/live.css': 'media/live.css',
};
const html = (origin) => liveHtmlTemplate({ cspSource: origin, nonce: 'test-nonce', resource: (...p) => `${origin}/${p.join('/')}` });

describe('live panel: categories over time and the leak finding', { skip: needsAllocator }, () => {
  let wv;
  let view;
  let info;
  before(async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpumem-live-categories-'));
    const t = simTraining(STEPS, ['--leak', String(LEAK)], { capture: path.join(dir, 'capture-4242.gpumem') });
    info = t.info;
    const run = new LiveRun(dir, openModel);
    try {
      run.refresh();
      run.running = false;
      view = run.view(600);
    } finally {
      run.close();
    }
    wv = await openWebview({ html, files: FILES, theme: 'dark' });
    await wv.waitForMessage((m) => m.type === 'ready');
    await wv.send({ type: 'update', run: view });
    await wv.page.waitForSelector('[data-testid=live-categories]', { timeout: 20_000 });
  });
  after(() => wv?.close());

  test('the host samples categories over the trace; the last sample is what the loop left live', () => {
    const c = view.tracks[0].categories;
    assert.ok(c, 'the track carries categories');
    assert.equal(c.t.length, 120);
    const last = (k) => c.bytes[k].at(-1);
    assert.deepEqual(
      ['parameter', 'gradient', 'optimizer_state', 'activation', 'temporary', 'other'].map(last),
      [12 * MiB, 12 * MiB, 24 * MiB, 0, 0, STEPS * LEAK],
    );
    // some sample falls inside a forward or backward: activations are seen over time
    assert.ok(Math.max(...c.bytes.activation) > 0);
    assert.deepEqual(c.steps.map((s) => s.index), [1, 2, 3, 4, 5]);
  });

  test('the page stacks them under the chart, with a legend of the bytes now and the leak named', async () => {
    const { page } = wv;
    const legend = await page.locator('[data-testid=live-categories] .categories-item').evaluateAll((els) => els.map((e) => [e.dataset.category, Number(e.dataset.bytes), e.textContent]));
    assert.deepEqual(legend.map(([k, b]) => [k, b]), [
      ['parameter', 12 * MiB],
      ['gradient', 12 * MiB],
      ['optimizer_state', 24 * MiB],
      ['activation', 0],
      ['temporary', 0],
      ['other', STEPS * LEAK],
    ]);
    assert.equal(legend[2][2], `optimizer state ${formatBytes(24 * MiB)}`);
    const inked = await page.evaluate(() => {
      const c = document.querySelector('[data-testid=live-categories] canvas');
      const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
      let n = 0;
      for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++;
      return n;
    });
    assert.ok(inked > 2000, `the stacked area is drawn (${inked} pixels)`);
    const leak = page.locator('[data-testid=live-leak]');
    assert.equal(await leak.count(), 1);
    assert.equal(Number(await leak.getAttribute('data-growth')), LEAK);
    assert.match(await leak.textContent(), new RegExp(`^Leak: .*sim_training\\.py:${info.lines.leak} keeps 64\\.0 KiB more at each step end \\(steps 1–${STEPS}`));
    await wv.screenshot('live-categories');
  });
});
