// Every tab of both panels at 420 px (Note [Narrow panels] in harness/overflow.mjs): with the editor
// beside the panel it is about 500 px wide, and the Categories tab scrolled sideways with the category names
// hidden. Each tab is opened on real data — a training capture the lens allocator wrote on the simulated device
// (sim_training.py: module paths, repeated blocks, a leak and its keeper, so Categories and What to do have
// every section), the ResNet-50 PyTorch pickle (long real file paths in Top sites), two ranks of a session
// folder, and the live panel over a LiveRun — and must not scroll sideways, nor show any element past the
// page's edge. Screenshots land in .test-output/webview/narrow/.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { liveHtmlTemplate } from '../../src/glue/live/template.ts';
import { LiveRun } from '../../src/core/views/live/index.ts';
import { fixturesDir, needsAllocator, openModel, simTraining, tmpDir } from '../unit/reader-support.mjs';
import { openWebview } from './harness/index.mjs';
import { overflowOf, overflowProblem } from './harness/overflow.mjs';
import { openSnapshotPanel } from './snapshot-host.mjs';

const { captureFiles } = await import('../../src/core/analyses/ranks/index.ts');
const { RankSet } = await import('../../src/core/views/ranks/rankSet.ts');

const WIDTH = 420;
const VIEWPORT = { width: WIDTH, height: 900 };
const TRAINING = ['--module-paths', '--blocks', '4', '--leak', String(64 * 1024), '--keeper'];

/** Fails with the offending elements when the page is wider than the viewport; saves a screenshot either way (.test-output/webview/narrow-*.png). */
async function assertFits(wv, what) {
  await wv.page.waitForTimeout(100); // a ResizeObserver redraw (timeline, segment map) lands a frame later
  await wv.screenshot(`narrow-${what}`, { fullPage: true });
  const m = await overflowOf(wv.page);
  assert.equal(m.clientWidth, WIDTH, 'the page is as wide as the viewport');
  const problem = overflowProblem(what, m);
  if (problem) assert.fail(problem);
}

/** The snapshot panel's tabs, each with how to bring up its content (what a user clicks) and what shows it. */
const TABS = [
  ['summary', '[data-testid=verdict]'],
  ['timeline', '[data-testid=timeline-legend] .legend-item'],
  ['segments', '[data-testid=segment-count]'],
  ['sites', '[data-testid=sites-grid] vscode-data-grid-row.clickable'],
  ['compare', '[data-testid=compare-grid]', '[data-testid=compare-moments]'],
  ['replay', '[data-testid=replay-table]', '[data-testid=replay-run]'],
  ['categories', '[data-testid=categories-peak-table]'],
  ['advice', '[data-testid=advice-item-0], [data-testid=advice-none]'],
];

function snapshotTabs(label, open, only = TABS.map(([t]) => t)) {
  describe(`snapshot panel at ${WIDTH} px: ${label}`, { skip: needsAllocator }, () => {
    let model;
    let wv;
    before(async () => {
      const o = open();
      model = openModel(o.file);
      wv = await openSnapshotPanel(model, { fileName: path.basename(o.file), viewport: VIEWPORT });
      await wv.page.waitForSelector('[data-testid=verdict]', { timeout: 30_000 });
    });
    after(async () => {
      await wv?.close();
      model?.close();
    });
    for (const [tab, shown, press] of TABS.filter(([t]) => only.includes(t))) {
      test(`${tab} tab`, async () => {
        const { page } = wv;
        await page.locator(`[data-testid=tab-${tab}]`).click();
        if (press) await page.locator(press).click();
        await page.locator(shown).first().waitFor({ timeout: 60_000 });
        await assertFits(wv, `${label}-${tab}`);
      });
    }
    if (only.includes('categories')) {
      test('a table is stacked only while it does not fit, and refits as the panel is resized', async () => {
        const { page } = wv;
        await page.locator('[data-testid=tab-categories]').click();
        const stepTable = page.locator('[data-testid=step-table]');
        await stepTable.waitFor();
        // Note [Stacked tables]: refitting must not raise ResizeObserver's loop error (an 'error' event, no exception)
        await page.evaluate(() => {
          window.__resizeErrors = [];
          window.addEventListener('error', (e) => window.__resizeErrors.push(e.message));
        });
        const stacked = async (width) => {
          await page.setViewportSize({ ...VIEWPORT, width });
          await page.waitForTimeout(200);
          return (await stepTable.getAttribute('class')).split(' ').includes('stacked');
        };
        assert.equal(await stacked(1600), false, 'wide: a table');
        assert.equal(await stacked(WIDTH), true, 'narrow: cards');
        assert.equal(await stacked(1600), false, 'wide again: a table again');
        await stacked(WIDTH);
        assert.deepEqual(await page.evaluate(() => window.__resizeErrors), []);
      });
    }
  });
}

snapshotTabs('training capture', () => ({ file: simTraining(6, TRAINING).cap }));
// Real paths from a real run: the longest file:line texts in Top sites and Compare.
snapshotTabs('ResNet-50 pickle', () => ({ file: path.join(fixturesDir, 'resnet50-bf16-train-python-stacks.pickle') }), ['summary', 'sites', 'compare']);

describe(`ranks side by side at ${WIDTH} px`, { skip: needsAllocator }, () => {
  let dir;
  let wv;
  before(async () => {
    dir = tmpDir();
    for (const rank of [0, 1]) {
      const session = path.join(dir, `20261125-1200${rank}0-train`);
      fs.mkdirSync(session);
      simTraining(3, rank === 1 ? ['--leak', String(96 * 1024 * 1024)] : [], {
        capture: path.join(session, `capture-${4200 + rank}.gpumem`),
        env: { RANK: String(rank), LOCAL_RANK: String(rank), WORLD_SIZE: '2' },
      });
    }
    const session = await RankSet.open(captureFiles([dir]), { title: path.basename(dir) });
    wv = await openSnapshotPanel(null, { fileName: path.basename(dir), session, viewport: VIEWPORT });
    await wv.page.waitForSelector('[data-testid=rank-timeline]', { timeout: 20_000 });
  });
  after(async () => {
    await wv?.close();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });
  test('the rank table and the lanes', () => assertFits(wv, 'ranks'));
});

describe(`live panel at ${WIDTH} px`, { skip: needsAllocator }, () => {
  let wv;
  before(async () => {
    const dir = tmpDir();
    simTraining(6, TRAINING, { capture: path.join(dir, 'capture-4242.gpumem') });
    const run = new LiveRun(dir, openModel);
    let view;
    try {
      run.refresh();
      view = run.view(WIDTH);
    } finally {
      run.close();
    }
    // a problem line as long as the host writes them, so the banner's wrapping is checked too
    view.problems = [`${path.join(dir, 'capture-4242.gpumem')}: the capture ends in a truncated record (the workload was killed); what came before it is shown`];
    wv = await openWebview({
      html: (origin) => liveHtmlTemplate({ cspSource: origin, nonce: 'test-nonce', resource: (...p) => `${origin}/${p.join('/')}` }),
      files: {
        '/dist/webview/live.js': 'dist/webview/live.js',
        '/dist/webview/toolkit.min.js': 'dist/webview/toolkit.min.js',
        '/dist/webview/uPlot.min.css': 'dist/webview/uPlot.min.css',
        '/media/live.css': 'media/live.css',
      },
      viewport: VIEWPORT,
      theme: 'dark',
    });
    await wv.waitForMessage((m) => m.type === 'ready');
    await wv.send({ type: 'update', run: view });
    await wv.page.waitForSelector('[data-testid=live-leak]', { timeout: 20_000 });
  });
  after(() => wv?.close());
  test('toolbar, figures, chart, categories and the leak', () => assertFits(wv, 'live'));
});
