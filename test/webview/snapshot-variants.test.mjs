// Snapshots of PyTorch 2.6–2.14 in the snapshot panel (Chromium): each fixture (test/fixtures/pytorch-snapshots/make_variants.py) opens
// in the real page, fed by OpenedCapture over the real native Model, and shows what it holds. Expected values come from
// python3 on the same pickle (test/unit/reference/snapshot_summary.py, test/unit/reference/snapshot_extras.py).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { formatBytes } from '../../src/core/base/units/bytes.ts';
import { openSnapshotPanel } from './snapshot-host.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
process.env.GPUMEM_ADDON ||= path.join(ROOT, 'dist/native/gpumem_addon.node');
const { openModel } = await import('../../src/core/base/model/open.ts');
const REF = path.join(ROOT, 'test/unit/reference');
const fixture = (name) => path.join(ROOT, 'test/fixtures/pytorch-snapshots', `${name}.pickle`);
const py = (script, ...args) => JSON.parse(execFileSync('python3', [path.join(REF, script), ...args], { encoding: 'utf8', maxBuffer: 1 << 28 }));
const pyInline = (code, ...args) => JSON.parse(execFileSync('python3', ['-c', code, ...args], { encoding: 'utf8', cwd: REF, maxBuffer: 1 << 28 }));
const MiB = 1 << 20;
const cspErrors = (errors) => errors.filter((e) => /Content Security Policy/.test(e));

async function withPanel(name, fn, state) {
  const model = openModel(fixture(name));
  const wv = await openSnapshotPanel(model, { fileName: `${name}.pickle`, ...(state ? { state } : {}) });
  try {
    await wv.page.waitForSelector('[data-testid=verdict]', { timeout: 20_000 });
    await fn(wv, model);
    assert.deepEqual(cspErrors(wv.errors), []);
  } finally {
    await wv.close();
    model.close();
  }
}

const figureBytes = async (page, key) => Number(await page.locator(`[data-figure="${key}"]`).getAttribute('data-bytes'));
const figureCount = async (page, key) => Number(await page.locator(`[data-figure="${key}"]`).getAttribute('data-count'));

/** The rows of a details table as attribute maps. */
async function rows(page, testId, attrs) {
  return page.locator(`[data-testid=${testId}] tbody tr`).evaluateAll((trs, names) => trs.map((tr) => Object.fromEntries(names.map((n) => [n, tr.getAttribute(n)]))), attrs);
}

/** Hovers a timeline band for which pick(index, spans) holds; returns its index, or undefined when none is drawn. */
async function hoverBand(page, pick) {
  await page.click('[data-testid=tab-timeline]');
  await page.waitForFunction(() => Number(document.querySelector('[data-testid=timeline-canvas]')?.dataset.painted) > 0, null, { timeout: 15_000 });
  const target = await page.evaluate((pickSrc) => {
    const pickFn = new Function('i', 's', `return (${pickSrc})(i, s)`);
    const tl = window.__snapshotPanel.timeline;
    const canvas = document.querySelector('[data-testid=timeline-canvas]');
    const r = canvas.getBoundingClientRect();
    const pw = canvas.width - 82;
    const ph = canvas.height - 34;
    for (let c = 0; c < pw; c += 2)
      for (let y = ph - 1; y >= 0; y -= 2) {
        const hit = tl.hit({ offsetX: 70 + c + 0.5, offsetY: 10 + y + 0.5 });
        if (hit && hit.index >= 0 && pickFn(hit.index, tl.data.spans)) return { x: r.left + 70 + c + 0.5, y: r.top + 10 + y + 0.5, index: hit.index };
      }
    return undefined;
  }, pick.toString());
  if (!target) return undefined;
  await page.mouse.move(target.x, target.y);
  await page.locator('.timeline-wrap .tooltip').waitFor({ state: 'visible', timeout: 5000 });
  const spans = await page.evaluate((i) => {
    const s = window.__snapshotPanel.timeline.data.spans;
    return { address: s.address[i], startUs: s.startUs[i] };
  }, target.index);
  return { index: target.index, ...spans };
}

describe('PyTorch 2.6–2.14 snapshots in the panel', () => {
  test('protocol 5 and protocol 2 of one snapshot show the same figures, and they are python\'s', async () => {
    const ref = py('snapshot_summary.py', fixture('mlp-expandable-proto5')).devices[0];
    const shown = {};
    for (const name of ['mlp-expandable-proto5', 'mlp-expandable-proto2']) {
      await withPanel(name, async ({ page }) => {
        shown[name] = {
          allocated: await figureBytes(page, 'allocated'),
          reserved: await figureBytes(page, 'reserved'),
          peakAllocated: await figureBytes(page, 'peakAllocated'),
          largestFree: await figureBytes(page, 'largestFree'),
          segments: await figureCount(page, 'segments'),
          events: await figureCount(page, 'events'),
          verdict: await page.locator('[data-testid=verdict]').textContent(),
          settings: await rows(page, 'allocator-settings-table', ['data-key']),
        };
      });
    }
    assert.deepEqual(shown['mlp-expandable-proto5'], shown['mlp-expandable-proto2']);
    const p5 = shown['mlp-expandable-proto5'];
    assert.deepEqual(
      [p5.allocated, p5.reserved, p5.peakAllocated, p5.largestFree, p5.segments, p5.events],
      [ref.allocated_bytes, ref.reserved_bytes, ref.peak_allocated_bytes, ref.largest_free_block_bytes, ref.segments, ref.events],
    );
    const settings = pyInline("import pickle,sys,json; print(json.dumps(list(pickle.load(open(sys.argv[1],'rb'))['allocator_settings'])))", fixture('mlp-expandable-proto5'));
    assert.deepEqual(p5.settings.map((r) => r['data-key']), settings);
  });

  test('user metadata: its values with their allocations, the unknown keys raw, and the band hover says its metadata and compile context', async () => {
    const extras = py('snapshot_extras.py', fixture('mlp-user-metadata'));
    const allocs = pyInline(
      `import pickle,sys,json
sys.path.insert(0, '.')
from snapshot_extras import meta
t=pickle.load(open(sys.argv[1],'rb'))['device_traces'][0]
print(json.dumps({f"{e['addr']}:{e['time_us']}": [meta(e.get('user_metadata','')), e.get('compile_context','N/A')] for e in t if e['action']=='alloc'}))`,
      fixture('mlp-user-metadata'),
    );
    await withPanel('mlp-user-metadata', async (wv) => {
      const { page } = wv;
      const meta = await rows(page, 'user-metadata-table', ['data-value', 'data-allocations', 'data-bytes']);
      assert.deepEqual(
        meta,
        extras.devices[0].user_metadata.map((t) => ({ 'data-value': t.value, 'data-allocations': String(t.allocations), 'data-bytes': String(t.bytes) })),
      );
      const contexts = await rows(page, 'compile-contexts-table', ['data-value', 'data-allocations']);
      assert.deepEqual(contexts, extras.devices[0].compile_contexts.map((t) => ({ 'data-value': t.value, 'data-allocations': String(t.allocations) })));
      const unknown = await page.locator('[data-testid=unknown-keys-table] tbody tr').evaluateAll((trs) => trs.map((tr) => [tr.getAttribute('data-key'), tr.querySelector('code').textContent]));
      assert.deepEqual(
        unknown.sort(),
        extras.unknown_keys.map((u) => [`${u.where}.${u.key}`, u.raw]).sort(),
      );
      await wv.screenshot('variants-user-metadata-summary');
      const band = await hoverBand(page, (i, s) => s.userMetadata && s.userMetadata[i] !== '' && s.compileContext[i] !== '');
      assert.ok(band, 'a band with metadata and a compile context is drawn');
      const [metadata, context] = allocs[`${band.address}:${band.startUs}`];
      const tip = page.locator('.timeline-wrap .tooltip');
      assert.equal(await tip.locator('[data-testid=timeline-tip-metadata]').textContent(), `user metadata: ${metadata}`);
      assert.equal(await tip.locator('[data-testid=timeline-tip-context]').textContent(), `compile context: ${context}`);
      await wv.screenshot('variants-user-metadata-hover');
    });
  });

  test('annotations: the ranges by name, and a band inside a range says which ranges it was allocated in', async () => {
    const extras = py('snapshot_extras.py', fixture('mlp-annotations'));
    const ann = pyInline("import pickle,sys,json; d=pickle.load(open(sys.argv[1],'rb')); print(json.dumps(sorted([[a['time_us'], a['stage'], a['name']] for a in d['external_annotations']])))", fixture('mlp-annotations'));
    /** python: the ranges open at t, outermost first */
    const openAt = (t) => {
      const open = [];
      for (const [time, stage, name] of ann) {
        if (time > t) break;
        if (stage === 'START') open.push(name);
        else if (open.lastIndexOf(name) >= 0) open.splice(open.lastIndexOf(name), 1);
      }
      return open;
    };
    await withPanel('mlp-annotations', async (wv) => {
      const { page } = wv;
      const table = await rows(page, 'annotations-table', ['data-name', 'data-ranges']);
      assert.deepEqual(table, extras.devices[0].annotations.map((a) => ({ 'data-name': a.name, 'data-ranges': String(a.ranges) })));
      const forwardStarts = ann.filter(([, stage, name]) => stage === 'START' && name === '## forward ##').map(([t]) => t);
      const forwardEnds = ann.filter(([, stage, name]) => stage === 'END' && name === '## forward ##').map(([t]) => t);
      const band = await hoverBand(
        page,
        new Function('i', 's', `const a=${JSON.stringify(forwardStarts)}, b=${JSON.stringify(forwardEnds)}; return a.some((t, k) => s.startUs[i] > t && s.startUs[i] < b[k]);`),
      );
      assert.ok(band, 'a band allocated inside a forward range is drawn');
      const want = openAt(band.startUs);
      assert.ok(want.includes('## forward ##'), want.join(' › '));
      assert.equal(await page.locator('.timeline-wrap .tooltip [data-testid=timeline-tip-ranges]').textContent(), `in: ${want.join(' › ')}`);
      await wv.screenshot('variants-annotations-hover');
    });
  });

  test('pools: reserved, active, free and fragmentation per private pool, and the segment map marks the blocks of unknown history', async () => {
    const extras = py('snapshot_extras.py', fixture('mlp-pools'));
    const d = extras.devices[0];
    await withPanel('mlp-pools', async (wv) => {
      const { page } = wv;
      const pools = await rows(page, 'pools-table', ['data-pool', 'data-reserved', 'data-active', 'data-free', 'data-fragmentation']);
      assert.deepEqual(
        pools,
        d.pools.map((p) => ({
          'data-pool': p.pool_id.join(','),
          'data-reserved': String(p.reserved_bytes),
          'data-active': String(p.active_bytes),
          'data-free': String(p.free_bytes),
          'data-fragmentation': String(p.fragmentation),
        })),
      );
      const labels = await page.locator('[data-testid=pools-table] tbody tr td:first-child').allTextContents();
      assert.deepEqual(labels, d.pools.map((p) => `${p.kind === 'mempool' ? 'MemPool' : 'CUDA graph pool'} (${p.pool_id[0]}, ${p.pool_id[1]})`));
      const untraced = page.locator('[data-testid=untraced]');
      assert.deepEqual([Number(await untraced.getAttribute('data-count')), Number(await untraced.getAttribute('data-bytes'))], [d.untraced_blocks, d.untraced_bytes]);
      await wv.screenshot('variants-pools-summary');
      await page.click('[data-testid=tab-segments]');
      const caption = page.locator('[data-testid=segments-untraced]');
      await caption.waitFor({ timeout: 10_000 });
      assert.deepEqual([Number(await caption.getAttribute('data-count')), Number(await caption.getAttribute('data-bytes'))], [d.untraced_blocks, d.untraced_bytes]);
      assert.match(await caption.textContent(), new RegExp(`^${d.untraced_blocks} allocated blocks \\(${formatBytes(d.untraced_bytes).replace('.', '\\.')}\\) of unknown history`));
      assert.equal(d.untraced_blocks > 0, true);
      assert.equal(await page.locator('[data-testid=legend-seg-untraced]').isVisible(), true, 'blocks of unknown history drawn: the legend names them');
      await wv.screenshot('variants-pools-segments');
    });
  });

  test('host segments: pinned host memory beside device memory, with its own totals and segments', async () => {
    const extras = py('snapshot_extras.py', fixture('mlp-host-segments'));
    const h = extras.host;
    const segs = pyInline("import pickle,sys,json; d=pickle.load(open(sys.argv[1],'rb')); print(json.dumps([[s['address'], s['total_size'], sum(b['size'] for b in s['blocks'] if b['state']=='active_allocated')] for s in d['host_segments']]))", fixture('mlp-host-segments'));
    const device = py('snapshot_summary.py', fixture('mlp-host-segments')).devices[0];
    await withPanel('mlp-host-segments', async (wv) => {
      const { page } = wv;
      // Device memory is device memory alone: the host's bytes are not in it.
      assert.equal(await figureBytes(page, 'reserved'), device.reserved_bytes);
      assert.equal(await figureBytes(page, 'allocated'), device.allocated_bytes);
      for (const [key, bytes] of [
        ['hostReserved', h.reserved_bytes],
        ['hostAllocated', h.allocated_bytes],
        ['hostCached', h.cached_bytes],
        ['hostPeak', h.peak_allocated_bytes],
      ]) {
        assert.equal(await figureBytes(page, key), bytes, key);
        assert.equal((await page.locator(`[data-figure="${key}"] .figure-value`).textContent()).trim(), formatBytes(bytes), key);
      }
      assert.equal(await figureCount(page, 'hostEvents'), h.events);
      const table = await rows(page, 'host-segments', ['data-address', 'data-size', 'data-allocated']);
      assert.deepEqual(
        table.map((r) => [Number(r['data-address']), Number(r['data-size']), Number(r['data-allocated'])]),
        segs.sort((a, b) => a[0] - b[0]),
      );
      await wv.screenshot('variants-host-memory');
    });
  });

  // The memory labels' GPU proof in the panel: test/gpu/workloads/labels.py on an H100 (test/gpu/metadata_check.py, both
  // modes PASS there against PyTorch's own labels: 12 and 14 MiB "stage=train", 18 MiB "stage=eval", the rest none).
  for (const mode of ['lens', 'pytorch']) {
    test(`an H100 capture of a script that calls _set_memory_metadata (${mode} mode) shows its labels in the panel`, async () => {
      const file = path.join(ROOT, 'test/fixtures', `h100-labels-${mode}.capture`);
      const model = openModel(file);
      const wv = await openSnapshotPanel(model, { fileName: path.basename(file) });
      try {
        const { page } = wv;
        await page.waitForSelector('[data-testid=verdict]', { timeout: 20_000 });
        const meta = await rows(page, 'user-metadata-table', ['data-value', 'data-allocations', 'data-bytes']);
        assert.deepEqual(meta.sort((a, b) => a['data-value'].localeCompare(b['data-value'])), [
          { 'data-value': 'stage=eval', 'data-allocations': '1', 'data-bytes': String(18 * MiB) },
          { 'data-value': 'stage=train', 'data-allocations': '2', 'data-bytes': String(26 * MiB) },
        ]);
        const labelOf = { [12 * MiB]: 'stage=train', [14 * MiB]: 'stage=train', [18 * MiB]: 'stage=eval' };
        const band = await hoverBand(page, (i, s) => s.userMetadata && s.userMetadata[i] !== '');
        assert.ok(band, 'a labelled band is drawn');
        const size = await page.evaluate((i) => window.__snapshotPanel.timeline.data.spans.size[i], band.index);
        const tip = page.locator('.timeline-wrap .tooltip');
        assert.equal(await tip.locator('[data-testid=timeline-tip-metadata]').textContent(), `user metadata: ${labelOf[size]}`);
        assert.deepEqual(cspErrors(wv.errors), []);
      } finally {
        await wv.close();
        model.close();
      }
    });
  }
});
