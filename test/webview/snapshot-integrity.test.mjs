// In the snapshot panel (Chromium): the integrity banner, the OOM list with a link that opens the
// line, the device's name and the process identity. Fed by OpenedCapture over the real native Model of the
// sim-backend fixtures (test/fixtures/sim-captures/); expected values come from the same bytes through the
// spec-only reader (test/unit/reference/capture_facts.py).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { formatBytes } from '../../src/core/base/units/bytes.ts';
import { openSnapshotPanel } from './snapshot-host.mjs';
import { needsAllocator, simTraining } from '../unit/reader-support.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
process.env.GPUMEM_ADDON ||= path.join(ROOT, 'dist/native/gpumem_addon.node');
const { openModel } = await import('../../src/core/base/model/open.ts');
const fixture = (name) => path.join(ROOT, 'test/fixtures/sim-captures', `${name}.capture`);
const facts = (name) => JSON.parse(execFileSync('python3', [path.join(ROOT, 'test/unit/reference/capture_facts.py'), fixture(name)], { encoding: 'utf8' }));

async function withPanel(name, fn) {
  const model = openModel(fixture(name));
  const wv = await openSnapshotPanel(model, { fileName: `${name}.capture` });
  try {
    await wv.page.waitForSelector('[data-testid=verdict]', { timeout: 20_000 });
    await fn(wv);
  } finally {
    await wv.close();
    model.close();
  }
}

describe('snapshot panel: integrity, OOMs and identity', () => {
  test('a capture whose writer stopped shows an alert banner with where and why, and its OOM with a link to the line', async () => {
    const f = facts('writer-failure');
    await withPanel('writer-failure', async (wv) => {
      const { page } = wv;
      const banner = page.locator('[data-testid=integrity-banner]');
      assert.equal(await banner.getAttribute('role'), 'alert');
      assert.equal(await banner.getAttribute('data-ended'), 'writer-failure');
      const endS = (Math.round(f.end.time_us - f.origin_us) / 1e6).toFixed(3);
      assert.equal((await banner.textContent()).trim(), `The capture stopped at ${endS} s: ${f.end.message}. The workload went on; nothing after that moment was recorded.`);
      const ooms = page.locator('[data-testid=oom]');
      assert.equal(await ooms.count(), f.ooms.length);
      const o = f.ooms[0];
      assert.equal(Number(await ooms.first().getAttribute('data-requested')), o.requested_bytes);
      assert.equal(await ooms.first().getAttribute('data-verdict'), 'shortage');
      const text = await ooms.first().textContent();
      assert.match(text, new RegExp(`\\(step 3\\) on cuda:0: ${formatBytes(o.requested_bytes)} requested by`));
      assert.match(text, new RegExp(`device: ${formatBytes(o.device_free_bytes)} free of ${formatBytes(o.device_total_bytes)} · verdict: shortage`));
      assert.equal((await page.locator('[data-testid=device-name]').textContent()).trim(), 'cuda:0 simulated device');
      assert.equal((await page.locator('[data-testid=identity]').textContent()).trim(), `· pid ${f.pid} on sim-host`);
      await wv.screenshot('snapshot-writer-failure-summary');
      await page.locator('[data-testid=oom-line]').first().click();
      const deadline = Date.now() + 5000;
      while (!wv.forEditor.some((m) => m.type === 'goToSource') && Date.now() < deadline) await page.waitForTimeout(20);
      assert.deepEqual(wv.forEditor.find((m) => m.type === 'goToSource'), { type: 'goToSource', file: o.file, line: o.line });
    });
  });

  test('a killed run and a run that lost events say so; a clean run shows no banner', async () => {
    const killed = facts('killed');
    await withPanel('killed', async ({ page }) => {
      const banner = page.locator('[data-testid=integrity-banner]');
      assert.equal(await banner.getAttribute('data-ended'), 'early');
      const endS = (Math.round(killed.last_us - killed.origin_us) / 1e6).toFixed(3);
      assert.match(await banner.textContent(), new RegExp(`The capture ends early at ${endS} s: the process died or was killed`));
      assert.equal(await page.locator('[data-testid=oom]').count(), 0);
    });
    const lost = facts('lost');
    await withPanel('lost', async ({ page }) => {
      const banner = page.locator('[data-testid=integrity-banner]');
      assert.equal(Number(await banner.getAttribute('data-lost')), lost.lost_events);
      const fromS = (Math.round(lost.lost_from_us - lost.origin_us) / 1e6).toFixed(3);
      assert.match(await banner.textContent(), new RegExp(`${lost.lost_events.toLocaleString('en-US')} events lost from ${fromS} s`));
      // Said once: the reader's own "events were dropped" problem is not repeated as a warning line.
      assert.doesNotMatch((await page.locator('body').textContent()) ?? '', /dropped by the recorder/);
    });
    await withPanel('rank1', async ({ page }) => {
      assert.equal(await page.locator('[data-testid=integrity-banner]').count(), 0);
      assert.equal((await page.locator('[data-testid=identity]').textContent()).trim(), `· rank 1 of 2 · pid ${facts('rank1').pid} on sim-host`);
      // cuda:0 (samples and markers only) is left out: one device, named, no dropdown.
      assert.equal(await page.locator('[data-testid=device]').count(), 0);
      assert.equal((await page.locator('[data-testid=device-name]').textContent()).trim(), 'cuda:1 simulated device');
      assert.equal(await page.locator('[data-testid=not-recorded]').count(), 0, 'recorded with stacks: nothing is said missing');
    });
  });

  // Note [Not recorded]: a capture recorded without Python stacks says so above its tables.
  test('a capture recorded without stacks says which parts are missing', { skip: needsAllocator }, async () => {
    const { cap } = simTraining(3, ['--no-stacks']);
    const model = openModel(cap);
    const wv = await openSnapshotPanel(model, { fileName: 'no-stacks.gpumem' });
    try {
      await wv.page.waitForSelector('[data-testid=not-recorded]', { timeout: 20_000 });
      const text = (await wv.page.locator('[data-testid=not-recorded]').textContent()).trim();
      assert.match(text, /^Not recorded: Python lines were not recorded \(stacks off: --no-stacks or gpuMemoryLens\.captureStacks = false\)/);
      assert.equal(await wv.page.locator('[data-testid=not-recorded]').count(), 1);
      await wv.screenshot('snapshot-not-recorded');
    } finally {
      await wv.close();
      model.close();
    }
  });
});
