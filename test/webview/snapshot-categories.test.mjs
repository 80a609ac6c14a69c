// The snapshot panel's Categories tab on a capture the real allocator wrote on the simulated device
// for a training loop whose every allocation's kind is known by construction (test/unit/reference/
// sim_training.py --module-paths --leak): parameters 3 × 4 MiB, gradients 3 × 4 MiB, optimizer state
// 3 × 8 MiB, activations 3 × 6 MiB in blocks.0.attn and again in blocks.1.attn, 6 MiB in blocks.0.mlp and the
// 512 B loss in the root Net, and one kept 64 KiB tensor per step (history.append(loss)). The view shows each
// at the peak and at a step end picked in the step table, every byte the device holds, and the leak.
// Screenshots land in .test-output/webview/.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { formatBytes } from '../../src/core/base/units/bytes.ts';
import { parseSnapshotWebviewMessage } from '../../src/core/base/protocol/snapshot.ts';
import { needsAllocator, openModel, simTraining } from '../unit/reader-support.mjs';
import { openSnapshotPanel } from './snapshot-host.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const KiB = 1024;
const MiB = 1024 * KiB;
const LEAK = 64 * KiB;
const STEPS = 6;

describe('Categories tab: categories, cache and the step table with the leak', { skip: needsAllocator }, () => {
  const dir = path.join(ROOT, '.test-output/webview/categories');
  let model;
  let wv;
  let info;
  before(async () => {
    fs.mkdirSync(dir, { recursive: true });
    // --keeper: the bootstrap's keeper notice at step 5's end names history.append (Note [Leak keeper])
    const t = simTraining(STEPS, ['--module-paths', '--leak', String(LEAK), '--keeper'], { capture: path.join(dir, 'train.gpumem') });
    info = t.info;
    model = openModel(t.cap);
    wv = await openSnapshotPanel(model, { fileName: 'train.gpumem', state: { tab: 'categories', device: 0 } });
    await wv.page.waitForSelector('[data-testid=categories-peak-table]', { timeout: 30_000 });
  });
  after(async () => {
    await wv?.close();
    model?.close();
  });

  const rowBytes = async (id, part) => Number(await wv.page.locator(`[data-testid=categories-${id}-table] tr[data-part="${part}"]`).getAttribute('data-bytes'));

  test('at the peak: each category is what the loop made, the cache is reserved − allocated, modules by path', async () => {
    const { page } = wv;
    const asked = (await wv.posted()).filter((m) => m.type === 'requestCategories');
    assert.ok(asked.length >= 1);
    assert.deepEqual(parseSnapshotWebviewMessage(asked[0]), asked[0], 'the page speaks the validated contract');
    // the peak is in the last backward after its 2 MiB temporary: all activations of the step and every kept tensor
    const want = { parameter: 12 * MiB, gradient: 12 * MiB, optimizer_state: 24 * MiB, activation: 42 * MiB + 512, temporary: 2 * MiB, other: STEPS * LEAK };
    for (const [part, bytes] of Object.entries(want)) assert.equal(await rowBytes('peak', part), bytes, part);
    const peakUs = Number(await page.locator('[data-testid=categories-peak]').getAttribute('data-time-us'));
    const st = model.stateAt(0, peakUs);
    const allocated = Object.values(want).reduce((a, b) => a + b, 0);
    assert.equal(st.fragmentation.allocatedBytes, allocated, 'the categories sum to what the allocator holds');
    assert.equal(await rowBytes('peak', 'cache'), st.fragmentation.reservedBytes - allocated);
    const bar = page.locator('[data-testid=categories-peak-bar] .cat-part');
    assert.deepEqual(await bar.evaluateAll((els) => els.map((e) => e.getAttribute('data-part'))), ['parameter', 'gradient', 'optimizer_state', 'activation', 'temporary', 'other', 'cache']);
    const modules = await page.locator('[data-testid=categories-peak-modules] tr').evaluateAll((rows) => rows.map((r) => [r.getAttribute('data-module'), r.querySelector('td').textContent]));
    assert.deepEqual(modules, [
      ['blocks.0.attn', formatBytes(18 * MiB)],
      ['blocks.1.attn', formatBytes(18 * MiB)],
      ['blocks.0.mlp', formatBytes(6 * MiB)],
      ['Net', formatBytes(512)],
    ]);
    assert.match(await page.locator('[data-testid=categories-module-note]').first().textContent(), /by module path.*torch\.compile/);
    await wv.screenshot('snapshot-categories-peak');
  });

  test('the step table numbers every step; a step row shows that step end, where the kept tensors grow', async () => {
    const { page } = wv;
    const rows = page.locator('[data-testid=step-table] tbody tr');
    assert.equal(await rows.count(), STEPS);
    assert.deepEqual(await rows.evaluateAll((rs) => rs.map((r) => Number(r.getAttribute('data-step')))), [1, 2, 3, 4, 5, 6]);
    const ends = await rows.evaluateAll((rs) => rs.map((r) => Number(r.getAttribute('data-end-us'))));
    for (const [i, endUs] of ends.entries()) {
      const cells = (await rows.nth(i).locator('td').allTextContents()).map((s) => s.trim());
      assert.equal(cells[1], formatBytes(model.stateAt(0, endUs).fragmentation.allocatedBytes), `step ${i + 1} allocated at end`);
    }
    await rows.nth(2).click();
    await page.waitForSelector('[data-testid=categories-moment]', { timeout: 20_000 });
    assert.match(await page.locator('[data-testid=categories-moment] h3').textContent(), /\(step 3\)/);
    assert.equal(Number(await page.locator('[data-testid=categories-moment]').getAttribute('data-time-us')), ends[2]);
    // between steps only what the optimizer holds and the kept tensors are live: 3 kept after step 3
    assert.equal(await rowBytes('moment', 'other'), 3 * LEAK);
    assert.equal(await rowBytes('moment', 'activation'), 0);
    assert.equal(await rowBytes('moment', 'optimizer_state'), 24 * MiB);
  });

  test('the leak finding names the kept tensor\'s line, its growth per step and category, and opens it', async () => {
    const { page } = wv;
    const finding = page.locator('[data-testid=leak-finding]');
    assert.equal(await finding.count(), 1);
    assert.equal(Number(await finding.getAttribute('data-growth')), LEAK);
    const text = await finding.textContent();
    assert.match(text, new RegExp(`sim_training\\.py:${info.lines.leak} keeps 64\\.0 KiB more at each step end \\(steps 1–${STEPS}`));
    assert.match(text, /not parameters, gradients, optimizer state or activations/);
    await page.click('[data-testid=leak-line]');
    for (let i = 0; i < 50 && !wv.forEditor.some((m) => m.type === 'goToSource'); i++) await new Promise((r) => setTimeout(r, 100));
    const go = wv.forEditor.find((m) => m.type === 'goToSource');
    assert.equal(go?.line, info.lines.leak);
    assert.match(go?.file ?? '', /sim_training\.py$/);
    await wv.screenshot('snapshot-categories-leak');
  });

  test('the finding names the line that keeps the memory alive, and that line opens too', async () => {
    const { page } = wv;
    const keeper = page.locator('[data-testid=leak-finding] [data-testid=leak-keeper]');
    assert.equal(await keeper.getAttribute('data-match'), 'address');
    assert.match(
      await keeper.textContent(),
      new RegExp(`^kept alive by history \\(a list: 4 tensors with autograd graphs, 256 KiB at step \\d+\\), stored at \\S*sim_training\\.py:${info.lines.keeper}: history\\.append\\(kept\\)$`),
    );
    const before = wv.forEditor.filter((m) => m.type === 'goToSource').length;
    await page.click('[data-testid=leak-keeper-line]');
    for (let i = 0; i < 50 && wv.forEditor.filter((m) => m.type === 'goToSource').length === before; i++) await new Promise((r) => setTimeout(r, 100));
    const go = wv.forEditor.filter((m) => m.type === 'goToSource').at(-1);
    assert.deepEqual([go?.line, /sim_training\.py$/.test(go?.file ?? '')], [info.lines.keeper, true]);
  });
});
