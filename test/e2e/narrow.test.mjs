// The snapshot panel 420 px wide in a real VS Code (Note [Narrow panels] in
// test/webview/harness/overflow.mjs): the width of a panel with the editor beside it, where the Categories tab
// used to scroll sideways with the category names hidden and the advice ran off the right edge. A training capture
// the lens allocator wrote on the simulated device (sim_training.py: module paths, repeated blocks, a leak and its
// keeper, so Categories and What to do have every section) is opened through the palette; the window is sized so
// the webview's page is 420 px wide, and every tab is checked for anything past the page's edge, in VS Code's own
// theme and fonts. Screenshots: .test-output/e2e/narrow-categories.png and narrow-advice.png.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { vsCodeSuite } from './harness/suite.mjs';
import { needsAllocator, simTraining } from '../unit/reader-support.mjs';
import { overflowOf, overflowProblem } from '../webview/harness/overflow.mjs';

const WIDTH = 420;
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'gpumem-narrow-e2e-'));
const capture = path.join(tmp, 'train.gpumem');
if (!needsAllocator) simTraining(6, ['--module-paths', '--blocks', '4', '--leak', String(64 * 1024), '--keeper'], { capture });

let vsc;
const step = needsAllocator ? undefined : vsCodeSuite('narrow', {}, (v) => (vsc = v), () => fs.rmSync(tmp, { recursive: true, force: true }));

/** Resizes the window until the webview's page is `width` px wide (the workbench around it keeps its own size). */
async function narrowTo(frame, width) {
  const pageWidth = () => frame.locator(':root').evaluate((root) => root.clientWidth);
  for (let i = 0; i < 5; i++) {
    const now = await pageWidth();
    if (now === width) return;
    const size = vsc.page.viewportSize();
    await vsc.page.setViewportSize({ width: size.width + width - now, height: size.height });
    await vsc.page.waitForTimeout(300); // the workbench lays out, then the webview's iframe follows
  }
  assert.equal(await pageWidth(), width, 'the webview could not be sized');
}

const TABS = [
  ['summary', '[data-testid=verdict]'],
  ['timeline', '[data-testid=timeline-legend] .legend-item'],
  ['segments', '[data-testid=segment-count]'],
  ['sites', '[data-testid=sites-grid] vscode-data-grid-row.clickable'],
  ['compare', '[data-testid=compare-grid]', '[data-testid=compare-moments]'],
  ['replay', '[data-testid=replay-table]', '[data-testid=replay-run]'],
  ['categories', '[data-testid=step-table]'],
  ['advice', '[data-testid=advice-item-0]'],
];

test(`every tab of the snapshot panel reads at ${WIDTH} px: nothing past the page's edge`, { skip: needsAllocator }, async () => {
  const frame = await step('open', async () => {
    await vsc.runCommand('GPU Memory: Open Snapshot…');
    await vsc.acceptFileDialog(capture);
    const f = await vsc.webviewFrame('train.gpumem');
    await f.locator('[data-testid=verdict]').waitFor({ timeout: 30_000 });
    await narrowTo(f, WIDTH);
    return f;
  });
  const problems = [];
  for (const [tab, shown, press] of TABS) {
    await step(tab, async () => {
      await frame.locator(`[data-testid=tab-${tab}]`).click();
      if (press) await frame.locator(press).click();
      await frame.locator(shown).first().waitFor({ timeout: 60_000 });
      await vsc.page.waitForTimeout(200); // a ResizeObserver's redraw lands a frame later
      if (tab === 'categories' || tab === 'advice') await vsc.screenshot(`narrow-${tab}`);
      const m = await overflowOf(frame);
      assert.equal(m.clientWidth, WIDTH);
      const problem = overflowProblem(`${tab} tab in VS Code`, m);
      if (problem) problems.push(problem);
    });
  }
  if (problems.length) assert.fail(problems.join('\n'));
});
