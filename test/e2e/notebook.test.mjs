// The notebook kernel in a real VS Code (code-server + Chromium): a 3-cell .ipynb runs with the "GPU Memory
// Lens (Python)" kernel over VS Code's built-in .ipynb support, and each cell's status-bar item shows the figures of
// that cell's own window of the kernel's capture. CI has no GPU: the kernel runs on the stand-in torch
// (test/python/fake_torch) with the real lens allocator on its simulated device (gpuMemoryLens.kernel.command sets
// GPUMEM_BACKEND=sim). The expected figures are read from the capture by the reader, between each cell's begin and
// end markers, independently of the kernel's own counters.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { vsCodeSuite } from './harness/suite.mjs';
import { ROOT } from './harness/paths.mjs';
import { formatBytes, formatBytesDelta } from '../../src/core/base/units/bytes.ts';
import { needsAllocator, openModel } from '../unit/reader-support.mjs';

const cell = (source) => ({ cell_type: 'code', execution_count: null, metadata: {}, outputs: [], source });
const NOTEBOOK = {
  cells: [
    cell(['import torch\n', 'keep = []\n', 'print("cell one ran")']),
    cell(['a = torch.empty(3 << 20, device="cuda")\n', 'b = torch.empty(1 << 20, device="cuda")\n', 'del a\n', 'keep.append(b)']),
    cell(['c = torch.empty(6 << 20, device="cuda")\n', 'keep.clear()\n', 'del b\n', 'torch.cuda.max_memory_allocated()']),
  ],
  metadata: { language_info: { name: 'python' } },
  nbformat: 4,
  nbformat_minor: 5,
};

let vsc;
const step = needsAllocator
  ? undefined
  : vsCodeSuite(
      'notebook',
      {
        files: { 'cells.ipynb': JSON.stringify(NOTEBOOK, null, 1) },
        env: { PYTHONPATH: path.join(ROOT, 'test/python/fake_torch') },
        workspaceSettings: {
          'gpuMemoryLens.kernel.command': 'env GPUMEM_BACKEND=sim ${python} -m gpumem._kernel',
          'gpuMemoryLens.allocator': 'lens',
          'gpuMemoryLens.deviceSampleIntervalMs': 0,
          'gpuMemoryLens.livePanel.openOnRun': false,
        },
      },
      (v) => (vsc = v),
    );

/** Each cell's GPU status item text (or ''), in cell order: read from each cell's status bar by its text. */
async function cellStatus(page) {
  return page.evaluate(() =>
    [...document.querySelectorAll('.notebook-editor .cell-statusbar-container')]
      .filter((e) => e.getBoundingClientRect().height > 0)
      .sort((a, b) => a.getBoundingClientRect().top - b.getBoundingClientRect().top)
      .map((e) => /GPU(?: peak .*? · reserved [+-]?[\d.]+ [KMGT]?i?B|: no memory used)/.exec((e.textContent ?? '').replace(/\u00a0/g, ' '))?.[0] ?? ''),
  );
}

/** Each measured cell's figures as the reader has them: the window between its markers in the capture. */
function figuresFromCapture(capture) {
  const model = openModel(capture);
  try {
    model.poll();
    const marks = model.markers(0).filter((m) => m.kind === 'range_begin' || m.kind === 'range_end');
    const out = {};
    for (const end of marks.filter((m) => m.kind === 'range_end')) {
      const n = Number(/^cell \[(\d+)\]/.exec(end.label)[1]);
      const begin = marks.find((m) => m.kind === 'range_begin' && m.label === end.label);
      const t0 = begin?.timeUs ?? model.timeRange(0).t0Us; // the cell that started CUDA opens the capture
      const at = (t) => (begin || t !== t0 ? model.stateAt(0, t).fragmentation : { allocatedBytes: 0, reservedBytes: 0 });
      const before = at(t0);
      const after = at(end.timeUs);
      out[n] = { peak: model.timeline(0, t0, end.timeUs, 1).allocatedMax[0], before, addedAllocated: after.allocatedBytes - before.allocatedBytes, addedReserved: after.reservedBytes - before.reservedBytes, after };
    }
    return out;
  } finally {
    model.close();
  }
}

const signed = (n) => (n === 0 ? '+0 B' : formatBytesDelta(n));

test('a 3-cell notebook runs on the GPU Memory Lens kernel; each cell’s status item shows its window of the capture', { skip: needsAllocator, timeout: 240_000 }, async (t) => {
  const { page } = vsc;
  await step('open', async () => {
    await vsc.dismissDialogs();
    const row = page.locator('.explorer-folders-view .monaco-list-row', { hasText: 'cells.ipynb' }).first();
    await row.waitFor({ timeout: 20_000 });
    // The notebook editor is known once the extension host has registered the built-in ipynb contribution; a
    // file opened before that opens as JSON text: reopen it with the notebook editor then.
    await page.waitForTimeout(3000);
    await row.dblclick();
    const nbEditor = page.locator('.notebook-editor .cell-list-container').first();
    try {
      await nbEditor.waitFor({ timeout: 10_000 });
    } catch {
      await vsc.runCommand('View: Reopen Editor With...');
      const jupyter = page.locator('.quick-input-list .monaco-list-row', { hasText: 'Jupyter Notebook' }).first();
      await jupyter.waitFor({ timeout: 10_000 });
      await jupyter.click();
      await nbEditor.waitFor({ timeout: 30_000 });
    }
  });
  await step('kernel', async () => {
    // Pick our kernel in the notebook's kernel picker (no Jupyter extension: it is the only Python kernel).
    await vsc.runCommand('Notebook: Select Notebook Kernel');
    const pick = page.locator('.quick-input-list .monaco-list-row', { hasText: 'GPU Memory Lens (Python)' }).first();
    await pick.waitFor({ timeout: 20_000 });
    await pick.click();
    await page.locator('.notebook-toolbar-container, .notebook-editor', { hasText: 'GPU Memory Lens (Python)' }).first().waitFor({ timeout: 20_000 });
  });
  let shown;
  await step('run all', async () => {
    await vsc.runCommand('Notebook: Run All');
    const deadline = Date.now() + 120_000;
    while ((shown = await cellStatus(page)).filter(Boolean).length < 3 && Date.now() < deadline) await page.waitForTimeout(500);
    t.diagnostic(`cell status items: ${JSON.stringify(shown)}`);
    await vsc.screenshot('notebook-cells');
  });
  await step('figures', async () => {
    const root = path.join(vsc.workspaceDir, '.gpumem');
    const session = fs.readdirSync(root).filter((d) => d.endsWith('cells.ipynb')).map((d) => path.join(root, d));
    assert.equal(session.length, 1, `one kernel session folder: ${fs.readdirSync(root)}`);
    const capture = fs.readdirSync(session[0]).find((f) => /^capture-\d+\.gpumem$/.test(f));
    assert.ok(capture, 'the kernel wrote a capture');
    const want = figuresFromCapture(path.join(session[0], capture));
    assert.deepEqual(Object.keys(want).map(Number), [2, 3], 'cells 2 and 3 used the GPU (cell 1 only imported torch)');
    assert.equal(shown[0], 'GPU: no memory used');
    for (const n of [2, 3]) {
      const w = want[n];
      // the cell's own peak: no cell frees what was live at its start before its peak, so the window's above its start
      const own = w.peak - w.before.allocatedBytes;
      assert.equal(shown[n - 1], `GPU peak ${formatBytes(own)} above ${formatBytes(w.before.allocatedBytes)} · allocated ${signed(w.addedAllocated)} · reserved ${signed(w.addedReserved)}`, `cell ${n}`);
    }
    // The capture's windows are the cells' own: what the cells did, by construction.
    assert.deepEqual([want[2].peak, want[2].addedAllocated, want[3].peak, want[3].addedAllocated], [4 << 20, 1 << 20, 7 << 20, 5 << 20]);
    // The kernel is a tracked run: the window's status bar follows its capture.
    const end = `${formatBytes(want[3].after.allocatedBytes)} / ${formatBytes(want[3].after.reservedBytes)}`;
    await page.locator('.statusbar-item', { hasText: end }).first().waitFor({ timeout: 20_000 });
    // Cell output like a kernel's: cell 1's print, cell 3's value.
    const outputs = vsc.page.frameLocator('iframe.webview.ready').frameLocator('#active-frame');
    await outputs.locator('text=cell one ran').first().waitFor({ timeout: 20_000 });
    await outputs.locator(`text=${7 << 20}`).first().waitFor({ timeout: 20_000 });
  });
});
