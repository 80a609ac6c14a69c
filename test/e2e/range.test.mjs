// Note [Range-first open] in a real VS Code (code-server): "Open Snapshot by Time Range…" shows the pickle's overview
// with a window picker (the panel host's own path: src/glue/snapshot/panelHost.ts and document.ts); the user types a
// window and clicks "Load this range"; the summary then shows that window's figures, which must equal what a full
// open of the same pickle gives for the same window (computed here by the reader, in this process).
import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import { vsCodeSuite } from './harness/suite.mjs';
import { ROOT, SAMPLE_WORKSPACE } from './harness/paths.mjs';

process.env.GPUMEM_ADDON ||= path.join(ROOT, 'dist/native/gpumem_addon.node');
const { openModel, openOverviewAsync } = await import('../../src/core/base/model/open.ts');

const PICKLE = 'mlp-expandable.pickle';
const overview = await openOverviewAsync(path.join(SAMPLE_WORKSPACE, PICKLE));
const d = overview.devices[0];
const spanS = (d.rangeT1Us - d.rangeT0Us) / 1e6;
// The last tenth of the run (this pickle's trace is its first and last moments: the middle holds no event), as the
// user types it: seconds since the file's first event, ms precision.
const fromS = Number((0.9 * spanS).toFixed(3));
const toS = Math.floor(spanS * 1000) / 1000;
const w = { fromUs: Math.floor(d.rangeT0Us + fromS * 1e6), toUs: Math.ceil(d.rangeT0Us + toS * 1e6) };
const full = openModel(path.join(SAMPLE_WORKSPACE, PICKLE));
const tl = full.timeline(d.device, w.fromUs, w.toUs, 256);
const want = { peakAllocated: Math.max(...tl.allocatedMax), peakReserved: Math.max(...tl.reservedMax), fullEvents: full.summary().devices[0].events };
full.close();

let vsc;
const step = vsCodeSuite('range', {}, (v) => (vsc = v));

test('Open Snapshot by Time Range… loads only the typed window; its figures equal the full open’s there', async () => {
  const frame = await step('choose', async () => {
    await vsc.runCommand('GPU Memory: Open Snapshot by Time Range…');
    await vsc.acceptFileDialog(path.join(vsc.workspaceDir, PICKLE));
    const f = await vsc.webviewFrame(PICKLE);
    await f.locator('[data-testid=range-choice]').waitFor({ timeout: 30_000 });
    assert.match(await f.locator('[data-testid=range-why]').textContent(), /opens by range, as asked/);
    await vsc.screenshot('range-choice');
    return f;
  });
  await step('load', async () => {
    await frame.locator('[data-testid=range-from]').fill(fromS.toFixed(3));
    await frame.locator('[data-testid=range-to]').fill(toS.toFixed(3));
    await frame.locator('[data-testid=load-range]').click();
    await frame.locator('[data-testid=verdict]').waitFor({ timeout: 30_000 });
  });
  await step('figures', async () => {
    const bytes = async (key) => Number(await frame.locator(`[data-figure=${key}]`).getAttribute('data-bytes'));
    assert.equal(await bytes('peakAllocated'), want.peakAllocated, 'peak allocated in the window');
    assert.equal(await bytes('peakReserved'), want.peakReserved, 'peak reserved in the window');
    const events = Number(await frame.locator('[data-figure=events]').getAttribute('data-count'));
    assert.ok(events > 0 && events < want.fullEvents, `only the window's events are held (${events} of ${want.fullEvents})`);
    assert.match(await frame.locator('[data-testid=opened-window]').textContent(), new RegExp(`range ${fromS.toFixed(3)}–${toS.toFixed(3)} s`));
    await vsc.screenshot('range-loaded');
  });
});
