// The live experience in a real VS Code (code-server + Chromium), as a user would try it: run the sample
// from the palette, watch the live panel's figures move, see the annotation on the line that holds the
// most memory at the peak, hover it, press Empty Cache and see reserved drop.
//
// CI has no GPU: gpuMemoryLens.launchCommand runs the replay workload (test/e2e/replay/replay.py), which
// streams a capture into the session folder at real-time speed and serves the control socket. The
// capture is test/fixtures/h200-e2e-train.capture when present (recorded on a GPU with our allocator), else
// a stand-in written by test/e2e/replay/make_standin.py. Every expected value is decoded from that
// capture by test/e2e/replay/expected_lines.py, independently of the extension's reader.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { vsCodeSuite } from './harness/suite.mjs';
import { ROOT } from './harness/paths.mjs';
import { formatBytes } from '../../src/core/base/units/bytes.ts';

const REPLAY = path.join(ROOT, 'test/e2e/replay');
const WORKSPACE = path.join(ROOT, 'test/e2e/workspace');
const WALKTHROUGH = path.join(ROOT, 'media/walkthrough');
const STANDIN_SAMPLE = 'live_sample.py'; // the script make_standin.py models

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'gpumem-live-e2e-'));
const recorded = path.join(ROOT, 'test/fixtures/h200-e2e-train.capture');
const fixture = fs.existsSync(recorded) ? recorded : path.join(tmp, 'standin.gpumem');
if (fixture !== recorded) execFileSync('python3', [path.join(REPLAY, 'make_standin.py'), fixture]);
const expected = JSON.parse(execFileSync('python3', [path.join(REPLAY, 'expected_lines.py'), fixture], { encoding: 'utf8' }));
const dev = expected.devices[0];
// Real time ×1.5 (the stand-in's 15 s stream takes 10 s), faster for a long recording: at most ~12 s.
const SPEED = Math.max(1.5, expected.duration_s / 12);
// The line to check: the heaviest at the peak, in a script the sample workspace holds or the walkthrough's
// sample (the recorded fixture is a run of media/walkthrough/gpumem_sample.py, copied into the workspace
// here as "Open Sample" would), among lines whose bytes are the same at every moment the peak value was
// reached (which tie a reader reports is its choice).
const scriptOf = (file) => [WORKSPACE, WALKTHROUGH].map((d) => path.join(d, path.basename(file))).find((p) => fs.existsSync(p));
const target = dev.lines.find((l) => l.stable && l.self_bytes_at_peak >= 1 << 20 && scriptOf(l.file));
assert.ok(target, `the fixture has no stable line at its peak in a script of test/e2e/workspace or media/walkthrough: ${JSON.stringify(dev.lines.slice(0, 5))}`);
const SAMPLE = path.basename(target.file);
const sampleSource = fs.readFileSync(scriptOf(target.file), 'utf8');
const sampleText = sampleSource.split('\n');
const expectedText = `▲ ${formatBytes(target.self_bytes_at_peak)} at peak · ${target.alloc_count} alloc${target.alloc_count === 1 ? '' : 's'}`;
const targetSource = sampleText[target.line - 1].trim();

let vsc;
const step = vsCodeSuite(
  'live',
  {
    files: fs.existsSync(path.join(WORKSPACE, SAMPLE)) ? {} : { [SAMPLE]: sampleSource },
    workspaceSettings: {
      'gpuMemoryLens.launchCommand': `\${python} ${REPLAY}/replay.py ${fixture} --speed ${SPEED} --hold 120`,
      'gpuMemoryLens.livePanel.openOnRun': true,
      // Sticky scroll repaints its pinned lines with the decorations they had, so after Toggle a pinned
      // line can still show its annotation in the DOM; the test reads the editor's own lines only.
      'editor.stickyScroll.enabled': false,
    },
  },
  (v) => (vsc = v),
  () => fs.rmSync(tmp, { recursive: true, force: true }),
);

/** The live panel's figure (bytes) for the first track. */
/** allocated and reserved from one DOM read: two separate reads can straddle an update, so that a reserved read
 * after a drop meets an allocated read before it. */
async function figurePair(frame) {
  const track = frame.locator('.track').first();
  await track.locator('.figure[data-figure="reserved"]').first().waitFor({ state: 'attached', timeout: 30_000 });
  return track.evaluate((el) => {
    const bytes = (k) => Number(el.querySelector(`.figure[data-figure="${k}"]`).getAttribute('data-bytes'));
    return { allocated: bytes('allocated'), reserved: bytes('reserved'), t1: Number(el.getAttribute('data-t1')) };
  });
}

async function figure(frame, key) {
  const cell = frame.locator(`.track .figure[data-figure="${key}"]`).first();
  await cell.waitFor({ state: 'attached', timeout: 30_000 });
  return Number(await cell.getAttribute('data-bytes'));
}

let panel;

test('Run Python File with Memory Tracking opens the live panel and its figures move', async (t) => {
  await step('run', async () => {
    await vsc.openFile(SAMPLE);
    await vsc.runCommand('GPU Memory: Run Python File with Memory Tracking');
    panel = await vsc.webviewFrame('GPU Memory — Live');
    await panel.locator('.track').first().waitFor({ timeout: 30_000 });
    // Read the figures every 250 ms while the workload streams, until allocated has moved (at least six
    // reads). A real run has quiet stretches (the recorded one spends 3.6 s in CUDA/cuBLAS start-up between
    // its parameters and its first step), so a fixed window could fall entirely inside one.
    const reads = [];
    const deadline = Date.now() + (expected.duration_s / SPEED + 10) * 1000;
    while (reads.length < 6 || (new Set(reads.map((r) => r.allocated)).size < 2 && Date.now() < deadline)) {
      reads.push(await figurePair(panel));
      await vsc.page.waitForTimeout(250);
    }
    t.diagnostic(`allocated over ${(reads.length * 0.25).toFixed(1)} s: ${[...new Set(reads.map((r) => formatBytes(r.allocated)))].join(' → ')}`);
    assert.equal(await panel.locator('#run-state').textContent(), 'running');
    assert.ok(reads.at(-1).t1 > reads[0].t1, 'the timeline grows while the workload runs');
    assert.ok(new Set(reads.map((r) => r.allocated)).size > 1, 'allocated changes as events stream in');
    assert.ok(reads.every((r) => r.reserved >= r.allocated), 'reserved ≥ allocated at every read');
    assert.ok((await figure(panel, 'peak-allocated')) <= dev.peak_allocated, 'the peak never exceeds the capture’s');
    await vsc.screenshot('live-1-running');
  });
});

test('the heaviest line at the peak is annotated with the expected text, and its hover has the numbers', async (t) => {
  await step('annotation', async () => {
    // Wait for the whole stream: the peak is final only then.
    await vsc.page.waitForTimeout(Math.max(0, (dev ? expected.duration_s / SPEED : 0) * 1000 - 2000) + 1500);
    const deco = await vsc.waitForDecorationText(expectedText, { timeout: 30_000 });
    t.diagnostic(`annotation "${deco.after}" on "${deco.line.trim()}"`);
    assert.equal(deco.after.trim(), expectedText);
    assert.equal(deco.line.trim(), targetSource);
    await vsc.screenshot('live-2-annotation');

    // Hover the code of the line (the hover's range is the line's text, not its indentation).
    const at = await vsc.page.evaluate((src) => {
      for (const line of document.querySelectorAll('.monaco-editor .view-line')) {
        const i = (line.textContent ?? '').replace(/\u00a0/g, ' ').indexOf(src);
        if (i < 0) continue;
        const walker = document.createTreeWalker(line, NodeFilter.SHOW_TEXT);
        let off = 0;
        for (let n = walker.nextNode(); n; n = walker.nextNode()) {
          if (off + n.length > i + 2) {
            const r = document.createRange();
            r.setStart(n, i + 2 - off);
            r.setEnd(n, i + 3 - off);
            const b = r.getBoundingClientRect();
            return { x: b.x + b.width / 2, y: b.y + b.height / 2 };
          }
          off += n.length;
        }
      }
      return null;
    }, targetSource);
    assert.ok(at, `the editor shows the line "${targetSource}"`);
    await vsc.page.mouse.move(at.x, at.y);
    const hover = vsc.page.locator('.monaco-hover:visible', { hasText: 'Self at peak' }).first();
    await hover.waitFor({ timeout: 15_000 });
    const text = (await hover.textContent()).replace(/\u00a0/g, ' ');
    assert.match(text, new RegExp(`Self at peak\\s*${formatBytes(target.self_bytes_at_peak).replace('.', '\\.')}`));
    assert.match(text, new RegExp(`Allocations\\s*${target.alloc_count}`));
    assert.match(text, /Top stacks at peak/);
    assert.ok(text.includes(`${SAMPLE}:${target.line}`), `the hover lists the frame ${SAMPLE}:${target.line}`);
    await vsc.screenshot('live-3-hover');

    // The hover's frames are links: the outermost one opens its file at its line. (A hover can close
    // under a moving pointer; hover again and retry rather than fail on the widget's timing.)
    const linkRe = new RegExp(`^${SAMPLE.replace('.', '\\.')}:\\d+$`);
    let linkText;
    for (let attempt = 1; ; attempt++) {
      const link = vsc.page.locator('.monaco-hover:visible a', { hasText: linkRe }).last();
      try {
        await link.waitFor({ timeout: 5000 });
        linkText = await link.textContent();
        await link.click();
        await vsc.page.locator('.statusbar-item', { hasText: new RegExp(`^Ln ${linkText.split(':').pop()}, Col 1$`) }).first().waitFor({ timeout: 5000 });
        break;
      } catch (err) {
        if (attempt === 3) throw err;
        await vsc.page.mouse.move(5, 5);
        await vsc.page.mouse.move(at.x, at.y);
      }
    }
    t.diagnostic(`hover link ${linkText} moved the cursor to its line`);
    await vsc.page.mouse.move(5, 5);
  });
});

test('Toggle Line Annotations hides and shows them', async () => {
  await step('toggle', async () => {
    const count = () =>
      vsc.page.evaluate((needle) => [...document.querySelectorAll('.monaco-editor .view-lines span')].filter((el) => getComputedStyle(el, '::after').content.includes(needle)).length, 'at peak');
    assert.ok((await count()) > 0);
    await vsc.runCommand('GPU Memory: Toggle Line Annotations');
    const shown = () =>
      vsc.page.evaluate((needle) => [...document.querySelectorAll('.monaco-editor .view-lines span')]
        .filter((el) => getComputedStyle(el, '::after').content.includes(needle))
        .map((el) => `${el.className} in ${el.closest('.monaco-editor')?.className}: ${el.closest('.view-line')?.textContent}`), 'at peak');
    await vsc.page.waitForFunction((needle) => ![...document.querySelectorAll('.monaco-editor .view-lines span')].some((el) => getComputedStyle(el, '::after').content.includes(needle)), 'at peak', { timeout: 10_000 })
      .catch(async (err) => { throw new Error(`annotations still shown after Toggle: ${JSON.stringify(await shown())}`, { cause: err }); });
    await vsc.runCommand('GPU Memory: Toggle Line Annotations');
    // The hover's link moved the cursor (and the viewport) elsewhere; the editor renders only visible
    // lines, so bring the annotated line back into view first.
    const input = await vsc.openPalette('');
    await input.fill(`:${target.line}`);
    await vsc.page.keyboard.press('Enter');
    await vsc.waitForDecorationText(expectedText, { timeout: 10_000 });
  });
});

test('Empty Cache from the panel releases the cached segments: notification and panel agree', async (t) => {
  await step('empty-cache', async () => {
    panel = await vsc.webviewFrame('GPU Memory — Live');
    const before = await figure(panel, 'reserved');
    assert.equal(before, dev.end_reserved, 'after the stream, reserved is the capture’s final reserved');
    await panel.locator('#btn-empty-cache').click();
    const released = dev.end_reserved - dev.end_reserved_busy;
    const note = await vsc.waitForNotification('Empty Cache released', { timeout: 20_000 });
    t.diagnostic(note);
    assert.ok(
      note.includes(`Empty Cache released ${formatBytes(released)}: reserved ${formatBytes(dev.end_reserved)} → ${formatBytes(dev.end_reserved_busy)}.`),
      note,
    );
    await panel.locator(`.track .figure[data-figure="reserved"][data-bytes="${dev.end_reserved_busy}"]`).first().waitFor({ timeout: 10_000 });
    assert.equal(await figure(panel, 'allocated'), dev.end_allocated, 'allocated is untouched by empty_cache');
    await vsc.screenshot('live-4-empty-cache');
  });
});

test('Capture Snapshot from the panel writes a pickle into the session folder and opens it', async (t) => {
  await step('snapshot', async () => {
    panel = await vsc.webviewFrame('GPU Memory — Live');
    await panel.locator('#btn-snapshot').click();
    // The replay names it like the allocator does: snapshot-<pid>-<n>.pickle next to the capture.
    const tab = vsc.page.locator('.tabs-container .tab .label-name', { hasText: /^snapshot-\d+-1\.pickle$/ }).first();
    await tab.waitFor({ timeout: 30_000 });
    const name = await tab.textContent();
    t.diagnostic(`opened ${name}`);
    const sessions = fs.readdirSync(path.join(vsc.workspaceDir, '.gpumem'), { withFileTypes: true }).filter((d) => d.isDirectory()).map((d) => d.name);
    assert.equal(sessions.length, 1, 'one session folder under .gpumem/');
    assert.ok(fs.existsSync(path.join(vsc.workspaceDir, '.gpumem', sessions[0], name.trim())), 'the pickle is in the session folder');
    // The snapshot panel (its own tests check what it shows) renders something from the pickle.
    const snap = await vsc.webviewFrame(name.trim());
    await snap.locator('body').filter({ hasText: /\d+(\.\d+)? (B|KiB|MiB|GiB)/ }).waitFor({ timeout: 30_000 });
    await vsc.screenshot('live-5-snapshot');
  });
});

test('Stop Workload ends the run with Ctrl-C; the panel says finished', async () => {
  await step('stop', async () => {
    await vsc.runCommand('GPU Memory: Stop Workload');
    panel = await vsc.webviewFrame('GPU Memory — Live');
    await panel.locator('#run-state', { hasText: 'finished' }).waitFor({ timeout: 20_000 });
    assert.match(await panel.locator('.track-label').first().textContent(), /\(exited\)$/);
    assert.equal(await panel.locator('#btn-empty-cache').getAttribute('disabled'), '');
    const terminal = vsc.page.locator('.terminal-wrapper, .xterm', { hasText: 'the workload exited with code 130' }).first();
    await terminal.waitFor({ timeout: 10_000 }).catch(() => {}); // xterm may render to canvas: best effort
    await vsc.screenshot('live-6-stopped');
  });
});

test('an OOM in a second run: the notification names the line, the request and the verdict; Go to Line goes there', async (t) => {
  await step('oom', async () => {
    const oomCapture = path.join(tmp, 'standin-oom.gpumem');
    execFileSync('python3', [path.join(REPLAY, 'make_standin.py'), oomCapture, '--oom', '--steps', '4', '--step-ms', '200']);
    const [oom] = JSON.parse(execFileSync('python3', [path.join(REPLAY, 'expected_lines.py'), oomCapture], { encoding: 'utf8' })).ooms;
    const verdict = oom.reserved - oom.allocated >= oom.requested ? 'fragmentation' : 'shortage';
    const want = `CUDA out of memory at ${path.basename(oom.file)}:${oom.line} on cuda:${oom.device}: requested ${formatBytes(oom.requested)} — ${verdict}`;
    // A second launch with another command: the settings file changes under the running VS Code.
    const settingsFile = path.join(vsc.workspaceDir, '.vscode/settings.json');
    const settings = JSON.parse(fs.readFileSync(settingsFile, 'utf8'));
    settings['gpuMemoryLens.launchCommand'] = `\${python} ${REPLAY}/replay.py ${oomCapture} --speed 4 --hold 0`;
    fs.writeFileSync(settingsFile, JSON.stringify(settings, null, 2));
    await vsc.page.waitForTimeout(1500); // let VS Code read the changed settings
    await vsc.openFile(STANDIN_SAMPLE);
    await vsc.runCommand('GPU Memory: Run Python File with Memory Tracking');
    const note = await vsc.waitForNotification('CUDA out of memory', { timeout: 30_000 });
    t.diagnostic(note);
    assert.ok(note.includes(want), `"${note}" should include "${want}"`);
    await vsc.screenshot('live-7-oom');
    const toast = vsc.page.locator('.notifications-toasts .notification-list-item', { hasText: 'CUDA out of memory' }).first();
    await toast.locator('.monaco-button', { hasText: 'Go to Line' }).click();
    await vsc.page.locator('.statusbar-item', { hasText: new RegExp(`^Ln ${oom.line}, Col 1$`) }).first().waitFor({ timeout: 10_000 });
    // The panel follows the newest session (two session folders now).
    const dirs = fs.readdirSync(path.join(vsc.workspaceDir, '.gpumem'), { withFileTypes: true }).filter((d) => d.isDirectory()).map((d) => d.name).sort();
    assert.equal(dirs.length, 2);
    panel = await vsc.webviewFrame('GPU Memory — Live');
    await panel.locator('#run-name', { hasText: dirs[1] }).waitFor({ timeout: 10_000 });
    await panel.locator('#run-state', { hasText: 'finished' }).waitFor({ timeout: 10_000 });
    await vsc.screenshot('live-8-second-session');
  });
});

test('the OOM notification\'s Open Advice opens the capture on "What to do", with what gpumem advise says', async (t) => {
  await step('oom-advice', async () => {
    // A third run of the OOM workload (the settings still name it); this time the user asks for advice.
    await vsc.openFile(STANDIN_SAMPLE);
    await vsc.runCommand('GPU Memory: Run Python File with Memory Tracking');
    await vsc.waitForNotification('CUDA out of memory', { timeout: 30_000 });
    const toast = vsc.page.locator('.notifications-toasts .notification-list-item', { hasText: 'CUDA out of memory' }).first();
    await toast.locator('.monaco-button', { hasText: 'Open Advice' }).click();
    const dirs = fs.readdirSync(path.join(vsc.workspaceDir, '.gpumem'), { withFileTypes: true }).filter((d) => d.isDirectory()).map((d) => d.name).sort();
    assert.equal(dirs.length, 3);
    const sessionDir = path.join(vsc.workspaceDir, '.gpumem', dirs[2]);
    const capture = fs.readdirSync(sessionDir).find((f) => f.endsWith('.gpumem'));
    assert.ok(capture, `a capture in ${sessionDir}`);
    // What the command line says about the same file (dist/cli.js: the same core, another way in)
    const cli = JSON.parse(execFileSync(process.execPath, [path.join(ROOT, 'dist/cli.js'), 'advise', path.join(sessionDir, capture), '--json'], { encoding: 'utf8' }));
    t.diagnostic(`advice: ${cli.items.map((i) => i.kind).join(', ') || 'none'}`);
    const frame = await vsc.webviewFrame(capture);
    // the panel opened on "What to do" and computed it without a click
    await frame.locator('[data-testid=tab-advice][aria-selected=true]').waitFor({ timeout: 30_000 });
    await frame.locator('[data-testid=advice-item-0], [data-testid=advice-none]').first().waitFor({ timeout: 60_000 });
    const titles = (await frame.locator('.advice-item h3').allTextContents()).map((s) => s.trim());
    assert.deepEqual(titles, cli.items.map((i, k) => `${k + 1}. ${i.title}`));
    assert.deepEqual((await frame.locator('[data-testid=advice-not-offered] li').allTextContents()).map((s) => s.trim()), cli.notOffered);
    await vsc.screenshot('live-9-oom-advice');
  });
});
