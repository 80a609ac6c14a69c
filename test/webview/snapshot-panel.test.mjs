// The snapshot panel in Chromium, fed exactly what the extension host would send: OpenedCapture over the
// real native Model of the PyTorch 2.11 fixtures (dist/native/gpumem_addon.node). Every expected value is
// computed by python3 from the same pickle (test/unit/reference/snapshot_summary.py for the summary figures,
// test/unit/snapshot_reference.py for the breakdown). Screenshots land in .test-output/webview/.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { formatBytes } from '../../src/core/base/units/bytes.ts';
import { openSnapshotPanel } from './snapshot-host.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const FIXTURES = path.join(ROOT, 'test/fixtures/pytorch-snapshots');
process.env.GPUMEM_ADDON ||= path.join(ROOT, 'dist/native/gpumem_addon.node');
const { openModel } = await import('../../src/core/base/model/open.ts');

function python(script, file) {
  return JSON.parse(execFileSync('python3', [path.join(ROOT, script), file], { encoding: 'utf8', maxBuffer: 256 << 20 }));
}

function references(name) {
  const file = path.isAbsolute(name) ? name : path.join(FIXTURES, name);
  const summary = python('test/unit/reference/snapshot_summary.py', file);
  const mine = python('test/unit/snapshot_reference.py', file).devices['0'];
  return { file, summary, device: summary.devices[0], topLines: summary.top_lines, breakdown: mine.breakdown, mine };
}

async function figure(page, key) {
  const el = page.locator(`[data-figure="${key}"]`);
  return { bytes: Number(await el.getAttribute('data-bytes')), count: Number(await el.getAttribute('data-count')), text: (await el.locator('.figure-value').textContent()).trim() };
}

const cspErrors = (errors) => errors.filter((e) => /Content Security Policy/.test(e));

describe('ResNet-50 training snapshot', () => {
  const ref = references('resnet50-bf16-train-python-stacks.pickle');
  let model;
  let wv;
  before(async () => {
    model = openModel(ref.file);
    wv = await openSnapshotPanel(model, { fileName: 'resnet50-bf16-train-python-stacks.pickle' });
    await wv.page.waitForSelector('[data-testid=verdict]', { timeout: 20_000 });
  });
  after(async () => {
    await wv?.close();
    model?.close();
  });

  test('summary figures equal python3 from the pickle, to the byte', async () => {
    const { page } = wv;
    const d = ref.device;
    const b = ref.breakdown;
    for (const [key, bytes] of [
      ['allocated', d.allocated_bytes],
      ['reserved', d.reserved_bytes],
      ['active', b.allocatedBytes + b.pendingFreeBytes],
      ['requested', b.requestedBytes],
      ['peakAllocated', d.peak_allocated_bytes],
      ['largestFree', d.largest_free_block_bytes],
    ]) {
      const f = await figure(page, key);
      assert.equal(f.bytes, bytes, key);
      assert.equal(f.text, formatBytes(bytes), key);
    }
    for (const [key, n] of [
      ['segments', d.segments],
      ['blocks', d.blocks],
      ['allocatedBlocks', d.allocated_blocks],
      ['events', d.events],
      ['freeBlocks', b.freeBlocks],
      ['ooms', 0],
    ]) {
      assert.equal((await figure(page, key)).count, n, key);
    }
    for (const part of ['requestedBytes', 'roundingWasteBytes', 'pendingFreeBytes', 'splitRemainderBytes', 'cachedFreeBytes']) {
      assert.equal(Number(await page.locator(`.view-summary [data-part="${part}"]`).getAttribute('data-bytes')), b[part], part);
    }
    const unallocated = d.reserved_bytes - d.allocated_bytes;
    assert.equal(Number(await page.locator('.view-summary [data-part="unallocated"]').getAttribute('data-bytes')), unallocated);
    const verdict = await page.locator('[data-testid=verdict]').textContent();
    assert.ok(
      verdict.startsWith(`${formatBytes(unallocated)} reserved but unallocated in ${b.freeBlocks} free blocks, largest ${formatBytes(d.largest_free_block_bytes)}`),
      verdict,
    );
    assert.deepEqual(cspErrors(wv.errors), []);
    await wv.screenshot('snapshot-resnet50-summary');
  });

  test('the top site row is python\'s top line, and clicking it asks the host to open that line', async () => {
    const { page } = wv;
    await page.click('[data-testid=tab-sites]');
    const top = ref.topLines[0];
    const firstRow = page.locator('[data-testid=sites-grid] vscode-data-grid-row[data-index="0"]');
    await firstRow.waitFor();
    const cells = (await firstRow.locator('vscode-data-grid-cell').allTextContents()).map((s) => s.trim());
    assert.equal(cells[0], `${top.file}:${top.line}`);
    assert.equal(cells[1], formatBytes(top.bytes_at_peak));
    await wv.screenshot('snapshot-resnet50-sites');
    await firstRow.locator('vscode-data-grid-cell').first().click();
    const deadline = Date.now() + 5000;
    while (!wv.forEditor.some((m) => m.type === 'goToSource') && Date.now() < deadline) await page.waitForTimeout(20);
    assert.deepEqual(wv.forEditor.find((m) => m.type === 'goToSource'), { type: 'goToSource', file: top.file, line: top.line });
  });

  test('sorting by count puts the most frequent line first', async () => {
    const { page } = wv;
    await page.click('[data-testid=sites-grid] [data-key=allocCount]');
    const rows = model.lineStats(0);
    const maxCount = Math.max(...rows.map((r) => r.allocCount));
    const cells = (await page.locator('[data-testid=sites-grid] vscode-data-grid-row[data-index="0"] vscode-data-grid-cell').allTextContents()).map((s) => s.trim());
    assert.equal(cells[4], maxCount.toLocaleString('en-US'));
    assert.deepEqual((await wv.state()).sitesSort, { key: 'allocCount', descending: true });
  });

  test('the segment map shows every segment of the snapshot', async () => {
    const { page } = wv;
    await page.click('[data-testid=tab-segments]');
    const count = page.locator('[data-testid=segment-count]');
    await count.waitFor({ timeout: 10_000 });
    assert.equal(Number(await count.getAttribute('data-count')), ref.device.segments);
    assert.match(await count.textContent(), new RegExp(`^${ref.device.segments} segments`));
    assert.match(await page.locator('[data-testid=segments-caption]').textContent(), new RegExp(`${ref.device.blocks} blocks at the end of the trace`));
    // The map is as tall as its rows, up to 18 of them (then it scrolls): no empty screen under a few segments.
    const { shown, rows } = await page.locator('.segments-scroller').evaluate((el) => ({ shown: el.clientHeight, rows: el.firstElementChild.offsetHeight }));
    const row = rows / ref.device.segments;
    assert.equal(shown, Math.min(ref.device.segments, 18) * row, `the map shows ${shown} px for ${ref.device.segments} rows of ${row} px`);
    await page.waitForTimeout(200);
    await wv.screenshot('snapshot-resnet50-segments');
  });

  test('the timeline paints bands, and Peak centres the view on python\'s peak', async () => {
    const { page } = wv;
    await page.click('[data-testid=tab-timeline]');
    await page.waitForFunction(() => document.querySelector('[data-testid=timeline-canvas]')?.dataset.painted, null, { timeout: 10_000 });
    // The plot's coloured pixels: a band raster leaves most of the area under the allocated curve non-background.
    const coloured = await page.evaluate(() => {
      const c = document.querySelector('[data-testid=timeline-canvas]');
      const { data } = c.getContext('2d').getImageData(80, 20, c.width - 100, c.height - 50);
      let n = 0;
      for (let i = 0; i < data.length; i += 4) if (data[i + 3] > 0) n++;
      return n / (data.length / 4);
    });
    assert.ok(coloured > 0.2, `only ${(coloured * 100).toFixed(1)}% of the plot is painted`);
    await wv.screenshot('snapshot-resnet50-timeline');
    await page.click('[data-testid=timeline-peak]');
    await page.waitForTimeout(300);
    const state = await wv.state();
    assert.equal(state.momentUs, ref.device.peak_at_time_us);
    assert.ok(state.window.v0 <= ref.device.peak_at_time_us && ref.device.peak_at_time_us <= state.window.v1);
    await page.waitForFunction((id) => Number(document.querySelector('[data-testid=timeline-canvas]')?.dataset.painted) > id, 0);
    await wv.screenshot('snapshot-resnet50-timeline-peak');
  });

  test('hovering a band shows its size and stack from the model', async () => {
    const { page } = wv;
    const canvas = page.locator('[data-testid=timeline-canvas]');
    const box = await canvas.boundingBox();
    // Low in the plot at the peak, above the memory allocated before the trace (the model's weights, drawn
    // at the bottom by owner): the oldest live allocations there are bands.
    await page.mouse.move(box.x + box.width * 0.5, box.y + box.height - 120);
    const tip = page.locator('.timeline-wrap .tooltip');
    await tip.waitFor({ state: 'visible', timeout: 5000 });
    const title = await tip.locator('.tooltip-title').textContent();
    assert.match(title, /^\d[\d.]* (B|KiB|MiB|GiB) at 0x[0-9a-f]+$/);
    await page.waitForFunction(() => !document.querySelector('.timeline-wrap .tooltip .stack')?.textContent.includes('loading'), null, { timeout: 5000 });
    await wv.screenshot('snapshot-resnet50-timeline-hover');
  });
});

describe('record_stream snapshot', () => {
  const ref = references('mlp-record-stream-pending.pickle');
  let model;
  let wv;
  before(async () => {
    model = openModel(ref.file);
    // A restored panel: the segment map tab was open when it was hidden.
    wv = await openSnapshotPanel(model, { fileName: 'mlp-record-stream-pending.pickle', state: { tab: 'segments', device: 0, sitesSort: { key: 'selfBytesAtPeak', descending: true }, compare: { a: 'peak', b: 'end' } } });
    await wv.page.waitForSelector('[data-testid=segment-count]', { timeout: 20_000 });
  });
  after(async () => {
    await wv?.close();
    model?.close();
  });

  test('restores the segment map tab and shows the pending-free bytes python finds', async () => {
    const { page } = wv;
    assert.equal(Number(await page.locator('[data-testid=segment-count]').getAttribute('data-count')), ref.device.segments);
    assert.ok(ref.breakdown.pendingFreeBytes > 0);
    assert.equal(Number(await page.locator('.view-segments [data-part="pendingFreeBytes"]').getAttribute('data-bytes')), ref.breakdown.pendingFreeBytes);
    assert.match(await page.locator('[data-testid=segments-caption]').textContent(), new RegExp(`${formatBytes(ref.breakdown.pendingFreeBytes).replace('.', '\\.')} waits on other streams`));
    await page.waitForTimeout(200);
    await wv.screenshot('snapshot-record-stream-segments');
  });
});

describe('GPU Memory Lens capture (.gpumem)', () => {
  // A capture and its twin PyTorch pickle describing the same run (the reader's reference writer).
  const dir = path.join(ROOT, '.test-output/webview/capture');
  const capture = path.join(dir, 'run.gpumem');
  const twin = path.join(dir, 'run-twin.pickle');
  let model;
  let wv;
  let ref;
  before(async () => {
    fs.mkdirSync(dir, { recursive: true });
    execFileSync('python3', [path.join(ROOT, 'test/unit/reference/make_capture.py'), capture, twin, '--events', '4000', '--seed', '7']);
    ref = references(twin);
    model = openModel(capture);
    wv = await openSnapshotPanel(model, { fileName: 'run.gpumem' });
    await wv.page.waitForSelector('[data-testid=verdict]', { timeout: 20_000 });
  });
  after(async () => {
    await wv?.close();
    model?.close();
  });

  test('shows the same figures as python3 finds in the twin pickle', async () => {
    const { page } = wv;
    const d = ref.device;
    assert.equal((await figure(page, 'reserved')).bytes, d.reserved_bytes);
    assert.equal((await figure(page, 'allocated')).bytes, d.allocated_bytes);
    assert.equal((await figure(page, 'peakAllocated')).bytes, d.peak_allocated_bytes);
    assert.equal((await figure(page, 'segments')).count, d.segments);
    assert.equal((await figure(page, 'largestFree')).bytes, d.largest_free_block_bytes);
    assert.equal(Number(await page.locator('.view-summary [data-part="cachedFreeBytes"]').getAttribute('data-bytes')), ref.breakdown.cachedFreeBytes);
    await page.click('[data-testid=tab-sites]');
    const firstRow = page.locator('[data-testid=sites-grid] vscode-data-grid-row[data-index="0"]');
    await firstRow.waitFor();
    const top = ref.topLines[0];
    const cells = (await firstRow.locator('vscode-data-grid-cell').allTextContents()).map((s) => s.trim());
    assert.deepEqual(cells.slice(0, 2), [`${top.file}:${top.line}`, formatBytes(top.bytes_at_peak)]);
    await wv.screenshot('snapshot-capture-sites');
  });
});

describe('a capture that grows while the panel is open', () => {
  const dir = path.join(ROOT, '.test-output/webview/growing');
  const full = path.join(dir, 'full.gpumem');
  const twin = path.join(dir, 'full-twin.pickle');
  const growing = path.join(dir, 'growing.gpumem');
  let model;
  let wv;
  let ref;
  let bytes;
  before(async () => {
    fs.mkdirSync(dir, { recursive: true });
    execFileSync('python3', [path.join(ROOT, 'test/unit/reference/make_capture.py'), full, twin, '--events', '3000', '--seed', '11']);
    ref = references(twin);
    bytes = fs.readFileSync(full);
    // The workload has written the first half so far (cut anywhere: the reader keeps complete records).
    fs.writeFileSync(growing, bytes.subarray(0, Math.floor(bytes.length / 2)));
    model = openModel(growing);
    wv = await openSnapshotPanel(model, { fileName: 'growing.gpumem' });
    await wv.page.waitForSelector('[data-testid=verdict]', { timeout: 20_000 });
  });
  after(async () => {
    await wv?.close();
    model?.close();
  });

  test('after the rest is appended and the host reports it, the summary shows the whole run', async () => {
    const { page } = wv;
    const eventsBefore = (await figure(page, 'events')).count;
    assert.ok(eventsBefore < ref.device.events, `${eventsBefore} events shown for half the file`);
    assert.equal(model.ended(), false);
    fs.appendFileSync(growing, bytes.subarray(Math.floor(bytes.length / 2)));
    // What the panel host's poll timer does (src/glue/snapshot/panelHost.ts, Note [Growing captures]).
    assert.ok(model.poll() > 0);
    await wv.send({ type: 'grew', info: wv.session.opened(), ended: model.ended() });
    await page.waitForFunction((n) => Number(document.querySelector('[data-figure=events]')?.getAttribute('data-count')) === n, ref.device.events, { timeout: 10_000 });
    assert.equal((await figure(page, 'reserved')).bytes, ref.device.reserved_bytes);
    assert.equal((await figure(page, 'peakAllocated')).bytes, ref.device.peak_allocated_bytes);
    assert.equal(model.ended(), true, 'the appended half carries the end record');
  });
});

describe('a capture opened before its first device record', () => {
  test('says it holds no GPU memory yet, then builds its tabs when the device arrives, on the tab asked for meanwhile', async () => {
    const dir = path.join(ROOT, '.test-output/webview/growing-empty');
    const full = path.join(dir, 'full.gpumem');
    const twin = path.join(dir, 'full-twin.pickle');
    const growing = path.join(dir, 'growing.gpumem');
    fs.mkdirSync(dir, { recursive: true });
    execFileSync('python3', [path.join(ROOT, 'test/unit/reference/make_capture.py'), full, twin, '--events', '3000', '--seed', '11']);
    const ref = references(twin);
    const bytes = fs.readFileSync(full);
    fs.writeFileSync(growing, bytes.subarray(0, 512)); // the header only: no device record yet
    const model = openModel(growing);
    const wv = await openSnapshotPanel(model, { fileName: 'growing.gpumem' });
    try {
      const { page } = wv;
      await page.waitForSelector('[data-testid=no-devices]', { timeout: 20_000 });
      assert.equal(await page.locator('[data-testid=tab-advice]').count(), 0);
      // Open Advice asked for "What to do" while the page had no tabs (panelHost posts showTab after `ready`).
      await wv.send({ type: 'showTab', tab: 'advice' });
      fs.appendFileSync(growing, bytes.subarray(512));
      assert.ok(model.poll() > 0);
      await wv.send({ type: 'grew', info: wv.session.opened(), ended: model.ended() });
      await page.locator('[data-testid=tab-advice][aria-selected=true]').waitFor({ timeout: 20_000 });
      assert.equal(await page.locator('[data-testid=no-devices]').count(), 0);
      await page.waitForFunction((n) => Number(document.querySelector('[data-figure=events]')?.getAttribute('data-count')) === n, ref.device.events, { timeout: 20_000 });
      assert.equal((await figure(page, 'peakAllocated')).bytes, ref.device.peak_allocated_bytes);
    } finally {
      await wv.close();
      model.close();
    }
  });
});

describe('snapshots without history', () => {
  const dir = path.join(ROOT, '.test-output/webview/no-history');
  const stateOnly = path.join(dir, 'state-only.pickle');
  const empty = path.join(dir, 'empty.pickle');
  before(() => {
    fs.mkdirSync(dir, { recursive: true });
    // What _dump_snapshot writes without _record_memory_history: segments, empty traces; and nothing at all.
    execFileSync('python3', [
      '-c',
      `import pickle, sys
d = pickle.load(open(sys.argv[1], 'rb')); d['device_traces'] = [[]]
pickle.dump(d, open(sys.argv[2], 'wb'))
pickle.dump({'segments': [], 'device_traces': [[]]}, open(sys.argv[3], 'wb'))`,
      path.join(FIXTURES, 'mlp-record-stream-pending.pickle'),
      stateOnly,
      empty,
    ]);
  });

  test('state only: the summary and segment map work, the timeline says why it is empty', async () => {
    const ref = references(stateOnly);
    const model = openModel(stateOnly);
    const wv = await openSnapshotPanel(model, { fileName: 'state-only.pickle' });
    try {
      await wv.page.waitForSelector('[data-testid=verdict]', { timeout: 20_000 });
      assert.equal((await figure(wv.page, 'reserved')).bytes, ref.device.reserved_bytes);
      assert.equal((await figure(wv.page, 'events')).count, 0);
      await wv.page.click('[data-testid=tab-timeline]');
      assert.match(await wv.page.locator('[data-testid=no-trace]').textContent(), /no allocation history/);
      await wv.page.click('[data-testid=tab-segments]');
      await wv.page.locator('[data-testid=segment-count]').waitFor({ timeout: 10_000 });
      assert.equal(Number(await wv.page.locator('[data-testid=segment-count]').getAttribute('data-count')), ref.device.segments);
    } finally {
      await wv.close();
      model.close();
    }
  });

  test('nothing recorded: one actionable sentence instead of empty tabs', async () => {
    const model = openModel(empty);
    const wv = await openSnapshotPanel(model, { fileName: 'empty.pickle' });
    try {
      const text = await wv.page.locator('[data-testid=no-devices]').textContent({ timeout: 20_000 });
      assert.match(text, /^empty\.pickle holds no GPU memory.*_record_memory_history\(\)/);
      await wv.screenshot('snapshot-empty');
    } finally {
      await wv.close();
      model.close();
    }
  });
});
