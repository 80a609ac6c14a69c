// The pseudo-gutter in a real VS Code (code-server): open the sample's real PyTorch snapshot, open the script
// that wrote it, and every line python's reference lists with ≥ 1 MiB at the peak shows both the heat bar
// at the start of the line (a `before` decoration: its length is ⌈8 × share⌉ steps, its colour the line's
// tier) and the end-of-line text (an `after` decoration). The glyph margin stays free: clicking it on an
// annotated line sets a breakpoint. Then gpuMemoryLens.annotations.style switches text and bar off and on.
//
// Nothing here reads the extension's numbers back as the truth: the bytes and the peak come from
// test/unit/reference/snapshot_summary.py (python3's pickle module on the same file).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { vsCodeSuite } from './harness/suite.mjs';
import { ROOT, SAMPLE_WORKSPACE } from './harness/paths.mjs';
import { formatBytes } from '../../src/core/base/units/bytes.ts';
import { BAR_STEP_CH, GUTTER_CH } from '../../src/core/views/annotations/heatBar.ts';

const PICKLE = 'mlp-expandable.pickle';
const SCRIPT = 'train_small.py'; // the script that wrote the pickle (its frames say /home/user/project/train_small.py)
const reference = JSON.parse(execFileSync('python3', [path.join(ROOT, 'test/unit/reference/snapshot_summary.py'), path.join(SAMPLE_WORKSPACE, PICKLE)], { encoding: 'utf8' }));
const peak = reference.devices[0].peak_allocated_bytes;
const source = fs.readFileSync(path.join(SAMPLE_WORKSPACE, SCRIPT), 'utf8').split('\n');
const tierOf = (share) => (share >= 0.25 ? 'high' : share >= 0.05 ? 'medium' : 'low');
const lines = reference.top_lines
  .filter((l) => l.file.endsWith(`/${SCRIPT}`) && l.bytes_at_peak >= 1 << 20)
  .map((l) => ({ ...l, text: source[l.line - 1].trim(), steps: Math.ceil((8 * l.bytes_at_peak) / peak), tier: tierOf(l.bytes_at_peak / peak) }));
assert.ok(lines.length >= 3 && lines.some((l) => l.tier === 'high'), `python lists ${JSON.stringify(lines)}`);
const heaviest = lines.reduce((a, b) => (b.bytes_at_peak > a.bytes_at_peak ? b : a));

let vsc;
const step = vsCodeSuite(
  'gutter',
  {
    workspaceSettings: {
      // No Python debugger extension is installed in the test VS Code; this lets the glyph margin take
      // breakpoints in a .py file as it does with the Python extension installed.
      'debug.allowBreakpointsEverywhere': true,
      'editor.stickyScroll.enabled': false,
    },
  },
  (v) => (vsc = v),
);

/**
 * What the editor's DOM shows for the line whose text is `text`: its `before` and `after` decorations
 * (pseudo-elements of the decoration spans) and where its first character is drawn.
 */
function lineDom(text) {
  return vsc.page.evaluate((want) => {
    const nb = (s) => (s ?? '').replace(/\u00a0/g, ' ');
    const line = [...document.querySelectorAll('.editor-instance .monaco-editor .view-lines .view-line')].find((l) => nb(l.textContent).trim() === want);
    if (!line) return null;
    const befores = [];
    const afters = [];
    for (const span of line.querySelectorAll('span')) {
      const b = getComputedStyle(span, '::before');
      if (b.content !== 'none' && b.content !== 'normal') {
        befores.push({ cls: span.className, position: b.position, width: parseFloat(b.width), height: parseFloat(b.height), background: b.backgroundColor, border: `${b.borderTopStyle} ${b.borderTopColor}` });
      }
      const a = getComputedStyle(span, '::after').content;
      if (a && a !== 'none' && a !== 'normal') afters.push({ cls: span.className, text: JSON.parse(a.startsWith('"') ? a : JSON.stringify(a)) });
    }
    // x of the line's first non-blank character
    const walker = document.createTreeWalker(line, NodeFilter.SHOW_TEXT);
    let codeX = null;
    for (let n = walker.nextNode(); n && codeX === null; n = walker.nextNode()) {
      const i = nb(n.textContent).search(/\S/);
      if (i < 0) continue;
      const r = document.createRange();
      r.setStart(n, i);
      r.setEnd(n, i + 1);
      codeX = r.getBoundingClientRect().x;
    }
    const box = line.getBoundingClientRect();
    return { befores, afters, codeX, lineLeft: box.x, top: box.y, height: box.height };
  }, text);
}

/** The computed colour a theme colour id resolves to in the workbench (e.g. rgb(244, 135, 113)). */
function themeColour(id) {
  return vsc.page.evaluate((v) => {
    const probe = document.createElement('div');
    probe.style.backgroundColor = `var(--vscode-${v.replace(/\./g, '-')})`;
    document.querySelector('.monaco-workbench').append(probe);
    const c = getComputedStyle(probe).backgroundColor;
    probe.remove();
    return c;
  }, id);
}

test('the sample\'s annotated lines show the heat bar at their start and the text at their end', async (t) => {
  await step('open', async () => {
    await vsc.runCommand('GPU Memory: Open Snapshot…');
    await vsc.acceptFileDialog(path.join(vsc.workspaceDir, PICKLE));
    const frame = await vsc.webviewFrame(PICKLE);
    await frame.locator('[data-testid=verdict]').waitFor({ timeout: 30_000 });
    await vsc.openFile(SCRIPT);
    await vsc.waitForDecorationText(`${formatBytes(heaviest.bytes_at_peak)} at peak`, { timeout: 30_000 });
  });
  await step('bars', async () => {
    // A line with nothing on it at the peak, for the spacer: every line moves right by the same amount.
    const plain = source.map((s) => s.trim()).find((s, i) => s.startsWith('b = random.choice') && !lines.some((l) => l.line === i + 1));
    const plainDom = await lineDom(plain);
    assert.ok(plainDom, `the editor shows "${plain}"`);
    assert.equal(plainDom.afters.length, 0, 'an unannotated line has no end-of-line text');
    assert.equal(plainDom.befores.length, 1, 'an unannotated line has the spacer only');
    const spacer = plainDom.befores[0];
    assert.notEqual(spacer.position, 'absolute');
    assert.ok(spacer.width > 10, `the spacer makes room for the bar (${spacer.width}px)`);
    assert.ok(plainDom.codeX - plainDom.lineLeft >= spacer.width, 'the code starts after the spacer');
    for (const l of lines) {
      const dom = await lineDom(l.text);
      assert.ok(dom, `the editor shows line ${l.line}: "${l.text}"`);
      t.diagnostic(`${SCRIPT}:${l.line} ${formatBytes(l.bytes_at_peak)} (${((100 * l.bytes_at_peak) / peak).toFixed(1)}%): ${JSON.stringify(dom.befores)} ${JSON.stringify(dom.afters)}`);
      // the end-of-line text
      assert.equal(dom.afters.length, 1, `line ${l.line} has one end-of-line text`);
      assert.match(dom.afters[0].text, new RegExp(`^▲ ${formatBytes(l.bytes_at_peak).replace('.', '\\.')} at peak · \\d+ allocs?$`));
      // the bar: an absolutely placed `before` over the spacer's room, ⌈8·share⌉ steps long (the spacer
      // is GUTTER_CH wide, a step BAR_STEP_CH), in the tier's colour
      const bars = dom.befores.filter((b) => b.position === 'absolute');
      assert.equal(bars.length, 1, `line ${l.line} has one heat bar`);
      assert.equal(dom.befores.length, 2, `line ${l.line}: the spacer and the bar`);
      const [bar] = bars;
      assert.equal(Math.round((bar.width / spacer.width) * (GUTTER_CH / BAR_STEP_CH)), l.steps, `line ${l.line}: ${bar.width}px of a ${spacer.width}px spacer is ${l.steps} steps`);
      assert.ok(bar.height > 2 && bar.height < dom.height / 2, `a thin bar (${bar.height}px in a ${dom.height}px line)`);
      assert.equal(bar.background, await themeColour(`gpuMemoryLens.annotation.${l.tier}`), `line ${l.line} is ${l.tier}`);
      // indentation still lines up: an annotated line's code starts where an unannotated line's would
      const indent = source[l.line - 1].search(/\S/) - source.find((s) => s.trim() === plain).search(/\S/);
      const charW = await vsc.page.evaluate(() => {
        const el = document.querySelector('.editor-instance .monaco-editor .view-lines');
        const probe = document.createElement('span');
        probe.textContent = 'x'.repeat(100);
        el.append(probe);
        const w = probe.getBoundingClientRect().width / 100;
        probe.remove();
        return w;
      });
      assert.ok(Math.abs(dom.codeX - (plainDom.codeX + indent * charW)) < 1, `line ${l.line}'s code starts at ${dom.codeX}, expected ${plainDom.codeX + indent * charW}`);
    }
    await vsc.screenshot('gutter-1-bars-and-text');
    await vsc.page.locator('.editor-instance .monaco-editor').first().screenshot({ path: path.join(ROOT, '.test-output/e2e/gutter-1-editor.png') });
  });
});

test('the glyph margin stays free: a click there sets a breakpoint on the heaviest annotated line', async (t) => {
  await step('breakpoint', async () => {
    const dom = await lineDom(heaviest.text);
    const glyph = await vsc.page.evaluate(() => {
      const g = document.querySelector('.editor-instance .monaco-editor .margin .glyph-margin');
      const r = g?.getBoundingClientRect();
      return r && r.width > 0 ? { x: r.x, width: r.width } : null;
    });
    assert.ok(glyph, 'the editor has a glyph margin');
    const y = dom.top + dom.height / 2;
    // No decoration of ours is in the glyph margin.
    assert.equal(await vsc.page.evaluate(() => document.querySelectorAll('.editor-instance .glyph-margin-widgets > div:not(.codicon-debug-hint)').length), 0);
    await vsc.page.mouse.move(glyph.x + glyph.width / 2, y);
    await vsc.page.mouse.click(glyph.x + glyph.width / 2, y);
    const bp = vsc.page.locator('.editor-instance .glyph-margin-widgets .codicon-debug-breakpoint');
    await bp.first().waitFor({ timeout: 10_000 });
    const box = await bp.first().boundingBox();
    t.diagnostic(`breakpoint glyph at y ${box.y}..${box.y + box.height}, line ${dom.top}..${dom.top + dom.height}`);
    assert.ok(box.y + box.height / 2 > dom.top && box.y + box.height / 2 < dom.top + dom.height, 'the breakpoint is on the line that was clicked');
    // The line keeps both its decorations next to the breakpoint.
    const after = await lineDom(heaviest.text);
    assert.equal(after.befores.filter((b) => b.position === 'absolute').length, 1);
    assert.equal(after.afters.length, 1);
    // And VS Code's breakpoint list has it, at that line of that file.
    await vsc.runCommand('View: Show Run and Debug');
    const row = vsc.page.locator('.debug-breakpoints .monaco-list-row', { hasText: SCRIPT }).first();
    await row.waitFor({ timeout: 10_000 });
    assert.match((await row.textContent()).replace(/\u00a0/g, ' '), new RegExp(`${heaviest.line}$`));
    await vsc.screenshot('gutter-2-breakpoint');
  });
});

test('gpuMemoryLens.annotations.style switches the text and the bar', async () => {
  const settingsFile = path.join(vsc.workspaceDir, '.vscode/settings.json');
  const setStyle = async (style) => {
    const settings = JSON.parse(fs.readFileSync(settingsFile, 'utf8'));
    settings['gpuMemoryLens.annotations.style'] = style;
    fs.writeFileSync(settingsFile, JSON.stringify(settings, null, 2));
  };
  const until = async (ok, what) => {
    const deadline = Date.now() + 10_000;
    for (;;) {
      const dom = await lineDom(heaviest.text);
      if (dom && ok(dom)) return dom;
      if (Date.now() > deadline) throw new Error(`${what}: ${JSON.stringify(dom)}`);
      await vsc.page.waitForTimeout(200);
    }
  };
  const bars = (d) => d.befores.filter((b) => b.position === 'absolute').length;
  await step('style', async () => {
    await vsc.runCommand('View: Show Explorer');
    const both = await lineDom(heaviest.text);
    await setStyle('text');
    const text = await until((d) => bars(d) === 0 && d.befores.length === 0 && d.afters.length === 1, 'style text: no bar, no spacer, the text');
    assert.ok(text.codeX < both.codeX - 10, `without bars the code moves back left (${both.codeX} → ${text.codeX})`);
    await setStyle('bar');
    await until((d) => bars(d) === 1 && d.afters.length === 0, 'style bar: the bar, no text');
    await vsc.screenshot('gutter-3-bar-only');
    await setStyle('both');
    await until((d) => bars(d) === 1 && d.afters.length === 1, 'style both: bar and text');
  });
});
