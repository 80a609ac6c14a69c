// The snapshot panel's actions in Chromium over the real Model of the ResNet-50 fixture: compare two
// moments, export (pickle request and PNG bytes), drag-and-drop, and keyboard pan/zoom on the timeline.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { formatBytes, formatBytesDelta } from '../../src/core/base/units/bytes.ts';
import { openSnapshotPanel } from './snapshot-host.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const FILE = path.join(ROOT, 'test/fixtures/pytorch-snapshots/resnet50-bf16-train-python-stacks.pickle');
process.env.GPUMEM_ADDON ||= path.join(ROOT, 'dist/native/gpumem_addon.node');
const { openModel } = await import('../../src/core/base/model/open.ts');
const summary = JSON.parse(execFileSync('python3', [path.join(ROOT, 'test/unit/reference/snapshot_summary.py'), FILE], { encoding: 'utf8' }));
// Bytes allocated in the trace and never freed, by innermost user line (the summary's attribution rule).
const liveAtEnd = JSON.parse(
  execFileSync(
    'python3',
    [
      '-c',
      `
import json, pickle, sys
sys.path.insert(0, sys.argv[2])
from snapshot_summary import innermost_user
live = {}
for e in pickle.load(open(sys.argv[1], 'rb'))['device_traces'][0]:
    if e['action'] == 'alloc': live[e['addr']] = e
    elif e['action'] == 'free_requested': live.pop(e['addr'], None)
out = {}
for e in live.values():
    f, l = innermost_user(e['frames']); out[f'{f}:{l}'] = out.get(f'{f}:{l}', 0) + e['size']
print(json.dumps(out))`,
      FILE,
      path.join(ROOT, 'test/unit/reference'),
    ],
    { encoding: 'utf8' },
  ),
);

let model;
let wv;
before(async () => {
  model = openModel(FILE);
  wv = await openSnapshotPanel(model, { fileName: 'resnet50.pickle' });
  await wv.page.waitForSelector('[data-testid=verdict]', { timeout: 20_000 });
});
after(async () => {
  await wv?.close();
  model?.close();
});

async function waitPosted(predicate) {
  const deadline = Date.now() + 5000;
  for (;;) {
    const hit = wv.forEditor.find(predicate);
    if (hit) return hit;
    if (Date.now() > deadline) throw new Error(`not posted; for the editor so far: ${JSON.stringify(wv.forEditor).slice(0, 300)}`);
    await wv.page.waitForTimeout(20);
  }
}

test('compare peak (A) with end (B): the grid shows the top line shrinking from python\'s bytes at peak', async () => {
  const { page } = wv;
  await page.click('[data-testid=tab-compare]');
  // The defaults are A = peak, B = end.
  await page.click('[data-testid=compare-moments]');
  const headline = page.locator('[data-testid=compare-headline]');
  await headline.waitFor({ timeout: 10_000 });
  // Note [Steps]: the peak comes before the first optimizer.step() of the trace ends: the first iteration.
  assert.match(await headline.textContent(), /^A = 0\.011 s \(step 1\), B = the end: grew .+, shrank .+ across \d+ lines\.$/);
  const top = summary.top_lines[0];
  const rows = page.locator('[data-testid=compare-grid] vscode-data-grid-row[data-index]');
  const texts = await rows.evaluateAll((rs) => rs.map((r) => [...r.querySelectorAll('vscode-data-grid-cell')].map((c) => c.textContent.trim())));
  const row = texts.find((t) => t[0] === `${top.file}:${top.line}`);
  assert.ok(row, JSON.stringify(texts.slice(0, 3)));
  assert.equal(row[1], formatBytes(top.bytes_at_peak));
  const atEnd = liveAtEnd[`${top.file}:${top.line}`] ?? 0;
  assert.equal(row[2], formatBytes(atEnd));
  assert.equal(row[3], formatBytesDelta(atEnd - top.bytes_at_peak));
  await wv.screenshot('snapshot-resnet50-compare');
});

test('Export pickle asks the host to save the state at the selected moment', async () => {
  await wv.page.click('[data-testid=export-pickle]');
  const msg = await waitPosted((m) => m.type === 'exportPickle');
  assert.deepEqual(msg, { type: 'exportPickle', device: 0, atUs: -1 });
});

test('Save PNG sends the timeline canvas as a PNG of its pixel size', async () => {
  const { page } = wv;
  await page.click('[data-testid=tab-timeline]');
  await page.waitForFunction(() => document.querySelector('[data-testid=timeline-canvas]')?.dataset.painted, null, { timeout: 10_000 });
  await page.click('[data-testid=export-png]');
  const msg = await waitPosted((m) => m.type === 'exportPng');
  assert.equal(msg.suggestedName, 'resnet50-timeline.png');
  const png = Buffer.from(msg.dataUrl.slice('data:image/png;base64,'.length), 'base64');
  assert.equal(png.subarray(1, 4).toString('ascii'), 'PNG');
  const size = await page.evaluate(() => {
    const c = document.querySelector('[data-testid=timeline-canvas]');
    return [c.width, c.height];
  });
  assert.deepEqual([png.readUInt32BE(16), png.readUInt32BE(20)], size);
});

test('keyboard: + zooms in around the centre, → pans by a tenth, Home shows the whole trace', async () => {
  const { page } = wv;
  const [{ t0Us, t1Us }] = [model.timeRange(0)];
  await page.focus('[data-testid=timeline-canvas]');
  await page.keyboard.press('Home');
  let w = (await wv.state()).window;
  assert.deepEqual(w, { v0: t0Us, v1: t1Us });
  await page.keyboard.press('+');
  w = (await wv.state()).window;
  // µs since the epoch are ~1.8e15: doubles keep them to a fraction of a µs, so compare to 1 µs.
  near(w.v1 - w.v0, (t1Us - t0Us) / 2);
  near(w.v0, t0Us + (t1Us - t0Us) / 4);
  const before = w;
  await page.keyboard.press('ArrowRight');
  w = (await wv.state()).window;
  near(w.v0 - before.v0, (before.v1 - before.v0) / 10);
  await page.keyboard.press('Home');
  assert.deepEqual((await wv.state()).window, { v0: t0Us, v1: t1Us });
});

test('a file dropped from the explorer (a URI) is handed to the host to open', async () => {
  const uri = 'file:///home/user/runs/run-2.pickle';
  await wv.page.evaluate((u) => {
    const dt = new DataTransfer();
    dt.setData('text/uri-list', u);
    document.body.dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
  }, uri);
  assert.deepEqual(await waitPosted((m) => m.type === 'openDroppedUri'), { type: 'openDroppedUri', uri });
});

test('a dropped OS file without a path is sent as its bytes', async () => {
  await wv.page.evaluate(() => {
    const dt = new DataTransfer();
    dt.items.add(new File([new Uint8Array([0x80, 0x04, 0x2e])], 'tiny.pickle'));
    document.body.dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
  });
  const msg = await waitPosted((m) => m.type === 'openDroppedBytes');
  assert.equal(msg.name, 'tiny.pickle');
  // The harness carries the Uint8Array across as its bytes (as VS Code does), and the host's check took it.
  assert.deepEqual(Object.values(msg.bytes), [0x80, 0x04, 0x2e]);
});

function near(actual, expected) {
  assert.ok(Math.abs(actual - expected) <= 1, `${actual} is not within 1 µs of ${expected}`);
}

test('the summary\'s peak link opens the timeline at python\'s peak moment', async () => {
  const { page } = wv;
  await page.click('[data-testid=tab-summary]');
  const link = page.locator('[data-testid=peak-link]');
  assert.equal((await link.textContent()).trim(), `at ${((summary.devices[0].peak_at_time_us - model.timeRange(0).t0Us) / 1e6).toFixed(3)} s`);
  await link.click();
  await page.waitForFunction(() => document.querySelector('vscode-panels')?.getAttribute('activeid') === 'tab-timeline');
  const state = await wv.state();
  assert.equal(state.tab, 'timeline');
  assert.equal(state.momentUs, summary.devices[0].peak_at_time_us);
  assert.ok(state.window.v0 <= state.momentUs && state.momentUs <= state.window.v1);
});

test('clicking a band selects that moment and asks the host to open the band\'s source line', async () => {
  const { page } = wv;
  // The peak link left the timeline zoomed around the peak, where the bottom of the stack, above the memory
  // allocated before the trace (drawn at the bottom by owner), is a band.
  await page.waitForFunction(() => document.querySelector('[data-testid=timeline-canvas]')?.dataset.painted, null, { timeout: 10_000 });
  const box = await page.locator('[data-testid=timeline-canvas]').boundingBox();
  const before = wv.forEditor.filter((m) => m.type === 'goToSource').length;
  await page.mouse.click(box.x + box.width * 0.3, box.y + box.height - 120);
  const deadline = Date.now() + 5000;
  while (wv.forEditor.filter((m) => m.type === 'goToSource').length === before && Date.now() < deadline) await page.waitForTimeout(20);
  const go = wv.forEditor.filter((m) => m.type === 'goToSource').at(-1);
  assert.ok(go, 'no goToSource posted');
  // The line is one the model attributes allocations to (a real user line of the training script).
  assert.ok(model.lineStats(0).some((s) => s.file === go.file && s.line === go.line), JSON.stringify(go));
  const state = await wv.state();
  assert.ok(state.momentUs > state.window.v0 && state.momentUs < state.window.v1);
});

test('choosing "Start of the trace" for A compares the first moment with the end', async () => {
  const { page } = wv;
  await page.click('[data-testid=tab-compare]');
  await page.click('[data-testid=compare-a]');
  await page.click('[data-testid=compare-a] vscode-option[value=start]');
  await page.waitForFunction(() => window.__state?.compare?.a === 'start');
  await page.click('[data-testid=compare-moments]');
  const t0 = model.timeRange(0).t0Us;
  await page.locator('[data-testid=compare-headline]', { hasText: 'A = 0.000 s' }).waitFor({ timeout: 10_000 });
  const posted = (await wv.posted()).filter((m) => m.type === 'compareMoments').at(-1);
  assert.deepEqual([posted.aUs, posted.bUs], [t0, -1]);
  const changed = model.diff(0, t0, Infinity).filter((r) => r.deltaBytes !== 0);
  assert.equal(await page.locator('[data-testid=compare-grid] vscode-data-grid-row[data-index]').count(), changed.length);
});

test('the segment map\'s Peak button shows the allocator state at python\'s peak moment', async () => {
  const { page } = wv;
  await page.click('[data-testid=tab-segments]');
  await page.click('[data-testid=segments-peak]');
  const peak = summary.devices[0].peak_at_time_us;
  const caption = page.locator('[data-testid=segments-caption]', { hasText: `at ${((peak - model.timeRange(0).t0Us) / 1e6).toFixed(3)} s` });
  await caption.waitFor({ timeout: 10_000 });
  const state = model.stateAt(0, peak);
  assert.equal(Number(await page.locator('[data-testid=segment-count]').getAttribute('data-count')), state.segments.length);
  // At the peak the allocated bytes shown are python's peak (the replay of the trace).
  assert.match(await caption.textContent(), new RegExp(`allocated ${formatBytes(summary.devices[0].peak_allocated_bytes).replace('.', '\\.')} of`));
  // The legend names what is drawn: no pending-free block at this moment (the model's state says), and blocks of
  // unknown history exactly when the caption counts some (the pickle's trace began after its first allocations).
  assert.equal(state.segments.some((s) => s.blocks.some((b) => b.state === 'active_pending_free')), false);
  assert.equal(await page.locator('[data-testid=legend-seg-pending]').isVisible(), false);
  const untraced = page.locator('[data-testid=segments-untraced]');
  const drawnUntraced = (await untraced.count()) > 0 && Number(await untraced.getAttribute('data-count')) > 0;
  assert.equal(await page.locator('[data-testid=legend-seg-untraced]').isVisible(), drawnUntraced);
  assert.equal(await page.locator('[data-testid=legend-seg-allocated]').isVisible(), true);
  await wv.screenshot('snapshot-resnet50-segments-at-peak');
});

test('messages both ways are checked: the page drops an ill-formed host message with its reason, and everything it posted was accepted', async () => {
  const { page } = wv;
  await wv.send({ type: 'notice', message: 'a valid notice' });
  await page.locator('[data-testid=notice]', { hasText: 'a valid notice' }).waitFor();
  const before = wv.warnings.length;
  await wv.send({ type: 'notice', message: { html: '<img src=x>' } });
  await wv.send({ type: 'sites', device: 0, rows: 'none' });
  await wv.send({ type: 'eval', code: '1' });
  await page.waitForFunction((n) => n, true);
  assert.deepEqual(wv.warnings.slice(before), [
    'GPU Memory Lens: dropped a message: snapshot panel, host → webview: notice.message must be a string, got object',
    'GPU Memory Lens: dropped a message: snapshot panel, host → webview: sites.rows must be an array, got "none"',
    'GPU Memory Lens: dropped a message: snapshot panel, host → webview: unknown message type "eval" (expected one of loading, loadFailed, overview, chooseRange, opened, grew, summary, timeline, markers, segments, sites, stack, diff, replay, categories, advice, showTab, requestFailed, notice, ranks)',
  ]);
  assert.equal(await page.locator('[data-testid=notice]').textContent(), 'a valid notice', 'the dropped notice changed nothing');
  // The pump checks what the page posts as SnapshotPanelHost does: after every test above, nothing was rejected.
  const posted = await wv.posted();
  assert.ok(posted.length > 10, `${posted.length} messages posted`);
  assert.deepEqual(wv.rejected, []);
});
