// Categories, steps and a leak in a real VS Code (code-server + Chromium). The replay workload
// (test/e2e/replay/replay.py) streams a capture the real allocator wrote on its simulated device for a training
// loop that keeps one 64 KiB tensor per step, like history.append(loss) (test/unit/reference/sim_training.py
// --leak --module-paths: its phase marks, tags and module marks are the bootstrap's). The live panel names the
// leak as it appears; the capture opened in the snapshot panel shows the Categories tab with what the loop made,
// by construction: 3 × 4 MiB parameters, 3 × 4 MiB gradients, 3 × 8 MiB optimizer state, activations by module
// path, the kept tensors as "other", and the leak finding on the line that allocated them, with the line that keeps
// them (history.append) from the bootstrap's keeper notice (--keeper, Note [Leak keeper]) in both panels.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { vsCodeSuite } from './harness/suite.mjs';
import { ROOT } from './harness/paths.mjs';
import { needsAllocator, simTraining } from '../unit/reader-support.mjs';

const KiB = 1024;
const MiB = 1024 * KiB;
const LEAK = 64 * KiB;
const STEPS = 6;
const REPLAY = path.join(ROOT, 'test/e2e/replay');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'gpumem-categories-e2e-'));
const capture = path.join(tmp, 'train.gpumem');
const info = needsAllocator ? undefined : simTraining(STEPS, ['--leak', String(LEAK), '--module-paths', '--keeper'], { capture }).info;

let vsc;
const step = needsAllocator
  ? undefined
  : vsCodeSuite(
      'categories',
      {
        workspaceSettings: {
          'gpuMemoryLens.launchCommand': `\${python} ${REPLAY}/replay.py ${capture} --speed 1 --hold 120`,
          'gpuMemoryLens.livePanel.openOnRun': true,
        },
      },
      (v) => (vsc = v),
      () => fs.rmSync(tmp, { recursive: true, force: true }),
    );

test('the live panel stacks categories and names the leak of the kept tensors', { skip: needsAllocator }, async () => {
  const panel = await step('run', async () => {
    await vsc.openFile('live_sample.py');
    await vsc.runCommand('GPU Memory: Run Python File with Memory Tracking');
    return vsc.webviewFrame('GPU Memory — Live');
  });
  await step('leak', async () => {
    const leak = panel.locator('[data-testid=live-leak]').first();
    await leak.waitFor({ timeout: 60_000 });
    assert.equal(Number(await leak.getAttribute('data-growth')), LEAK);
    assert.match(await leak.textContent(), new RegExp(`sim_training\\.py:${info.lines.leak} keeps 64\\.0 KiB more at each step end \\(steps 1–`));
    // the keeper notice comes at step 5's end, after the finding first shows (3 growing step ends)
    const kept = panel.locator('[data-testid=live-leak]', { hasText: 'kept alive by history' }).first();
    await kept.waitFor({ timeout: 60_000 });
    assert.match(await kept.textContent(), new RegExp(`kept alive by history \\(a list: 4 tensors with autograd graphs, 256 KiB at step \\d+\\), stored at \\S*sim_training\\.py:${info.lines.keeper}: history\\.append\\(kept\\)`));
    const optimizer = panel.locator('[data-testid=live-categories] .categories-item[data-category=optimizer_state]').first();
    assert.equal(Number(await optimizer.getAttribute('data-bytes')), 24 * MiB);
    await vsc.screenshot('categories-live');
  });
});

test('the snapshot panel\'s Categories tab shows the categories at the peak, the step table and the leak', { skip: needsAllocator }, async () => {
  const frame = await step('open', async () => {
    await vsc.runCommand('GPU Memory: Open Snapshot…');
    await vsc.acceptFileDialog(capture);
    return vsc.webviewFrame('train.gpumem');
  });
  await step('categories', async () => {
    await frame.locator('[data-testid=tab-categories]').click();
    await frame.locator('[data-testid=categories-peak-table]').waitFor({ timeout: 30_000 });
    const want = { parameter: 12 * MiB, gradient: 12 * MiB, optimizer_state: 24 * MiB, activation: 42 * MiB + 512, temporary: 2 * MiB, other: STEPS * LEAK };
    for (const [part, bytes] of Object.entries(want)) {
      assert.equal(Number(await frame.locator(`[data-testid=categories-peak-table] tr[data-part="${part}"]`).getAttribute('data-bytes')), bytes, part);
    }
    assert.equal(await frame.locator('[data-testid=categories-peak-modules] tr[data-module="blocks.1.attn"] td').textContent(), '18.0 MiB');
    assert.equal(await frame.locator('[data-testid=step-table] tbody tr').count(), STEPS);
    const finding = frame.locator('[data-testid=leak-finding]');
    assert.equal(Number(await finding.getAttribute('data-growth')), LEAK);
    assert.match(await finding.textContent(), new RegExp(`:${info.lines.leak} keeps 64\\.0 KiB more at each step end \\(steps 1–${STEPS}`));
    const keeper = frame.locator('[data-testid=leak-finding] [data-testid=leak-keeper]');
    assert.equal(await keeper.getAttribute('data-match'), 'address');
    assert.match(await keeper.locator('[data-testid=leak-keeper-line]').textContent(), new RegExp(`sim_training\\.py:${info.lines.keeper}$`));
    await vsc.screenshot('categories-snapshot');
  });
});
