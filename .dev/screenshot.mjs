// The product's pictures, from a real VS Code session as a user sees it (build first: `npm run build`):
//
//   node .dev/screenshot.mjs            the README's and the walkthrough's pictures: media/screenshot.png and
//                                       media/walkthrough/{lines,live,snapshot,snapshot-timeline,testing}.png
//   node .dev/screenshot.mjs --review   also every screen a user reads at two widths, for a person to look at:
//                                       the live panel and each snapshot tab 420 px wide and in a 1400 px window,
//                                       the notebook, the Testing view and the walkthrough in a 1400 px window and
//                                       with a 420 px editor, into .test-output/review/ (not committed)
//
// The session: the walkthrough's sample opened with "Open Sample Training Script", run with memory tracking, a
// snapshot captured, the sample budget tests run, a notebook run. With no GPU the run is the replay of the sample's
// recorded capture, and the tests and the notebook run on the stand-in torch and the simulated device (Note
// [Replay hook] in start-settings.mjs); with a GPU everything runs for real.
import fs from 'node:fs';
import path from 'node:path';
import { startVsCode } from '../test/e2e/harness/index.mjs';
import { ROOT } from '../test/e2e/harness/paths.mjs';
import { startSettings } from './start-settings.mjs';

const REVIEW = process.argv.includes('--review');
const REVIEW_DIR = path.join(ROOT, '.test-output/review');
const WINDOW = { width: 1400, height: 900 };
const NARROW = 420;
// Each tab of the snapshot panel, and the button that fills it where it waits for one.
const SNAPSHOT_TABS = [['summary'], ['timeline'], ['segments'], ['sites'], ['compare', 'compare-moments'], ['replay', 'replay-run'], ['categories'], ['advice', 'advice-run']];

const cell = (source) => ({ cell_type: 'code', execution_count: null, metadata: {}, outputs: [], source });
const NOTEBOOK = {
  cells: [
    cell(['import torch\n', 'keep = []']),
    cell(['weights = torch.empty(3 << 20, device="cuda")\n', 'batch = torch.empty(1 << 20, device="cuda")\n', 'keep.append(batch)']),
    cell(['activations = torch.empty(6 << 20, device="cuda")\n', 'del activations\n', 'torch.cuda.max_memory_allocated()']),
  ],
  metadata: { language_info: { name: 'python' } },
  nbformat: 4,
  nbformat_minor: 5,
};

const log = (m) => console.log(`screenshot: ${m}`);
const hook = startSettings();
const vsc = await startVsCode({
  workspaceSettings: { ...hook.settings, 'editor.stickyScroll.enabled': false },
});
const { page } = vsc;
const shots = [];

/** A PNG of the whole window, or of one element (a webview's iframe, an editor group), or of a box. */
async function shot(file, { element, clip } = {}) {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  await page.waitForTimeout(400); // animations, the chart's last paint
  if (element) await element.screenshot({ path: file });
  else await page.screenshot({ path: file, clip });
  shots.push(path.relative(ROOT, file));
}
const review = (name) => path.join(REVIEW_DIR, `${name}.png`);

/** The outer iframe of the webview shown in the editor group of the tab titled `title`. */
async function webviewIframe(title) {
  const tab = page.locator('.tabs-container .tab', { has: page.locator('.label-name', { hasText: title }) }).first();
  await tab.click();
  return (await vsc.webviewInGroupOf(tab, 30_000)).first();
}

/** Resizes the window until the webview in `iframe` lays out its page `width` px wide (Note [Narrow panels]). */
async function panelWidth(iframe, frame, width) {
  for (let i = 0; i < 6; i++) {
    const now = await frame.locator(':root').evaluate((root) => root.clientWidth);
    if (now === width) return;
    const size = page.viewportSize();
    await page.setViewportSize({ width: Math.max(300, size.width + width - now), height: size.height });
    await page.waitForTimeout(400);
  }
}

async function both(name, iframe, frame) {
  await shot(review(`${name}-1400`), { element: iframe });
  await panelWidth(iframe, frame, NARROW);
  await shot(review(`${name}-${NARROW}`), { element: iframe });
  await page.setViewportSize(WINDOW);
  await page.waitForTimeout(400);
}

/** The window with the editor area about 420 px wide (the side bar open), and in 1400 px. */
async function windowBoth(name) {
  await shot(review(`${name}-1400`));
  const editor = await page.locator('.part.editor').boundingBox();
  await page.setViewportSize({ width: Math.round(WINDOW.width - editor.width + NARROW), height: WINDOW.height });
  await page.waitForTimeout(600);
  await shot(review(`${name}-${NARROW}`));
  await page.setViewportSize(WINDOW);
  await page.waitForTimeout(400);
}

try {
  log(hook.reason);
  // The sample, run: its lines annotated, the live panel beside it.
  await vsc.runCommand('GPU Memory: Open Sample Training Script');
  await page.locator('.tabs-container .tab[aria-label*="gpumem_sample.py"]').first().waitFor({ timeout: 20_000 });
  await vsc.runCommand('GPU Memory: Run Python File with Memory Tracking');
  const liveFrame = await vsc.webviewFrame('GPU Memory — Live');
  await liveFrame.locator('.track').first().waitFor({ timeout: 30_000 });
  await vsc.waitForDecorationText('at peak', { timeout: 30_000 });
  await page.waitForTimeout(1500); // the run's last records reach the chart
  // The editor as wide as the window allows, so the lines' text shows beside the live panel.
  await vsc.runCommand('View: Hide Panel');
  await vsc.runCommand('View: Close Primary Side Bar');
  await page.mouse.move(5, 5);
  await shot(path.join(ROOT, 'media/screenshot.png'));

  const sampleGroup = page.locator('.editor-group-container', { has: page.locator('.tab[aria-label*="gpumem_sample.py"]') }).first();
  await shot(path.join(ROOT, 'media/walkthrough/lines.png'), { clip: await sampleGroup.boundingBox() });
  const liveIframe = await webviewIframe('GPU Memory — Live');
  await shot(path.join(ROOT, 'media/walkthrough/live.png'), { element: liveIframe });
  if (REVIEW) await both('live', liveIframe, liveFrame);

  // The run's capture in the snapshot panel (the whole trace: a snapshot pickle of the running sample would hold
  // only the allocator's state at that moment), in one wide group. A click on a tab first: F1 does not reach the
  // palette while a webview has the focus.
  await vsc.runCommand('View: Toggle Primary Side Bar Visibility');
  await page.locator('.tabs-container .tab[aria-label*="gpumem_sample.py"]').first().click();
  const sessions = path.join(vsc.workspaceDir, '.gpumem');
  const session = fs.readdirSync(sessions).find((d) => d.endsWith('gpumem_sample'));
  const captureName = fs.readdirSync(path.join(sessions, session)).find((f) => /^capture-\d+\.gpumem$/.test(f));
  await vsc.runCommand('GPU Memory: Open Snapshot…');
  await vsc.acceptFileDialog(path.join(sessions, session, captureName));
  const snapTab = page.locator('.tabs-container .tab', { hasText: captureName }).first();
  await snapTab.waitFor({ timeout: 30_000 });
  await snapTab.click();
  await vsc.runCommand('View: Join All Editor Groups');
  await vsc.runCommand('Notifications: Clear All Notifications');
  const snapIframe = await webviewIframe(captureName);
  const snapFrame = snapIframe.contentFrame().locator('#active-frame').contentFrame();
  await snapFrame.locator('[data-figure=peakAllocated]').waitFor({ timeout: 30_000 });
  await shot(path.join(ROOT, 'media/walkthrough/snapshot.png'), { element: snapIframe });
  await snapFrame.locator('[data-testid=tab-timeline]').click();
  await page.waitForTimeout(1000);
  await snapFrame.getByRole('button', { name: 'Peak', exact: true }).click(); // the run's seconds around its peak
  await page.waitForTimeout(1500);
  await shot(path.join(ROOT, 'media/walkthrough/snapshot-timeline.png'), { element: snapIframe });
  if (REVIEW) {
    for (const [tab, press] of SNAPSHOT_TABS) {
      await snapFrame.locator(`[data-testid=tab-${tab}]`).click();
      if (press) await snapFrame.locator(`[data-testid=${press}]`).click();
      await page.waitForTimeout(press ? 4000 : 1500);
      await both(`snapshot-${tab}`, snapIframe, snapFrame);
    }
  }

  // The sample budget tests in the Testing view: one passes, one fails with the line at its peak.
  await snapTab.click();
  fs.copyFileSync(path.join(ROOT, 'media/walkthrough/test_gpumem_sample.py'), path.join(vsc.workspaceDir, 'test_gpumem_sample.py'));
  await vsc.runCommand('Testing: Focus on Test Explorer View');
  const fileRow = page.locator('.test-explorer .monaco-list-row[aria-label^="test_gpumem_sample.py"]').first();
  await fileRow.waitFor({ timeout: 30_000 });
  await page.locator('.action-label[aria-label="Run Tests"]:visible').first().click();
  await page.locator('.test-explorer .monaco-list-row[aria-label^="test_large_batch_over_budget (Failed)"]').first().waitFor({ timeout: 90_000 }).catch(async () => {
    if ((await fileRow.getAttribute('aria-expanded')) !== 'true') await fileRow.locator('.monaco-tl-twistie').click();
    await page.locator('.test-explorer .monaco-list-row[aria-label^="test_large_batch_over_budget (Failed)"]').first().waitFor({ timeout: 30_000 });
  });
  const results = page.locator('[id="workbench.panel.testResults"]');
  const message = results.locator('.monaco-list-row[aria-label^="gpu_memory: "]').first();
  await message.waitFor({ state: 'visible', timeout: 20_000 });
  // The picture: the Testing view beside the test file, whose failed test shows its message on its line (the
  // Test Results panel, hidden here, names the capture by its path on this machine).
  await vsc.runCommand('View: Hide Panel');
  await vsc.runCommand('Explorer: Focus on Folders View');
  await vsc.openFile('test_gpumem_sample.py');
  await vsc.runCommand('Testing: Focus on Test Explorer View');
  if ((await fileRow.getAttribute('aria-expanded')) !== 'true') await fileRow.locator('.monaco-tl-twistie').click();
  await page.mouse.move(5, 5);
  await page.waitForTimeout(1000);
  const sideBar = await page.locator('.part.sidebar').boundingBox();
  await shot(path.join(ROOT, 'media/walkthrough/testing.png'), { clip: { x: 0, y: 0, width: Math.round(sideBar.x + sideBar.width + 640), height: 440 } });
  await vsc.runCommand('View: Toggle Panel Visibility');
  await message.click();
  if (REVIEW) await windowBoth('testing');

  if (REVIEW) {
    // The notebook on the GPU Memory Lens kernel: each cell's figures in its status bar.
    fs.writeFileSync(path.join(vsc.workspaceDir, 'cells.ipynb'), JSON.stringify(NOTEBOOK, null, 1));
    await vsc.runCommand('View: Hide Panel');
    await vsc.runCommand('Explorer: Focus on Folders View');
    await page.locator('.explorer-folders-view .monaco-list-row', { hasText: 'cells.ipynb' }).first().dblclick();
    await page.locator('.notebook-editor .cell-list-container').first().waitFor({ timeout: 30_000 });
    await vsc.runCommand('Notebook: Select Notebook Kernel');
    const pick = page.locator('.quick-input-list .monaco-list-row', { hasText: 'GPU Memory Lens (Python)' }).first();
    await pick.waitFor({ timeout: 20_000 });
    await pick.click();
    await vsc.runCommand('Notebook: Run All');
    await page.locator('.notebook-editor .cell-statusbar-container', { hasText: /GPU peak/ }).nth(1).waitFor({ timeout: 120_000 });
    await windowBoth('notebook');

    // The walkthrough, its steps as the session left them.
    await vsc.runCommand('GPU Memory: Get Started');
    await page.locator('.getting-started-step').first().waitFor({ timeout: 30_000 });
    await windowBoth('walkthrough');
  }
} catch (err) {
  console.error(`screenshot: ${err.stack}`);
  await vsc.screenshot('screenshot-FAILED').catch(() => {});
  process.exitCode = 1;
} finally {
  await vsc.close();
  for (const f of shots) log(`wrote ${f} (${(fs.statSync(path.join(ROOT, f)).size / 1024).toFixed(0)} KiB)`);
}
