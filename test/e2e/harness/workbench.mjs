// Drives the VS Code workbench in Debian's Chromium with playwright-core, through what a user sees:
// the command palette, editors, notifications, decorations, webview panels.
import fs from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { CHROMIUM, OUTPUT } from './paths.mjs';

const nbsp = (s) => (s ?? '').replace(/\u00a0/g, ' ');

export async function openWorkbench(url, { profileDir, log = () => {} } = {}) {
  if (!fs.existsSync(CHROMIUM)) throw new Error(`Chromium not found at ${CHROMIUM} — run \`bash .dev/setup-code-server.sh\` (apt: chromium)`);
  // Fresh profile; cookie_controls_mode 0 allows third-party cookies, which webview service workers need
  // when webviews live on another origin.
  fs.mkdirSync(path.join(profileDir, 'Default'), { recursive: true });
  fs.writeFileSync(path.join(profileDir, 'Default/Preferences'), JSON.stringify({ profile: { cookie_controls_mode: 0 } }));
  const context = await chromium.launchPersistentContext(profileDir, {
    executablePath: CHROMIUM,
    viewport: { width: 1400, height: 900 },
    args: [
      '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      ...(process.env.CHROME_EXTRA_ARGS || '').split(' ').filter(Boolean),
    ],
  });
  const page = context.pages()[0] ?? (await context.newPage());
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('console', (m) => m.type() === 'error' && errors.push(m.text()));
  await page.goto(url);
  await page.waitForSelector('.monaco-workbench', { timeout: 60_000 });
  // The explorer is populated once the remote file system and the folder are up.
  await page.waitForSelector('.explorer-folders-view .monaco-list-row', { timeout: 60_000 });
  log('workbench ready');
  return new Workbench(context, page, errors);
}

export class Workbench {
  constructor(context, page, consoleErrors) {
    this.context = context;
    this.page = page;
    this.consoleErrors = consoleErrors;
  }

  /**
   * Closes modal dialogs (an error such as "command … not found" is one): while one is open the palette and
   * the editor take no input, so one failed step would fail every later test of the same session.
   */
  async dismissDialogs() {
    const dialog = this.page.locator('.monaco-dialog-box');
    for (let i = 0; i < 3 && (await dialog.count()) > 0 && (await dialog.first().isVisible()); i++) {
      await this.page.keyboard.press('Escape');
      await this.page.waitForTimeout(100);
    }
  }

  /** Opens the palette (F1) and types `>query`; returns the input locator. */
  async openPalette(query) {
    const { page } = this;
    await this.dismissDialogs();
    await page.keyboard.press('F1');
    const input = page.locator('.quick-input-widget .quick-input-box input');
    await input.waitFor({ state: 'visible', timeout: 10_000 });
    await input.fill('>' + query);
    return input;
  }

  /** Labels of the palette rows for `query` (e.g. every "GPU Memory:" command), with the same retry as runCommand. */
  async paletteEntries(query, { expectAtLeast = 1, tries = 6 } = {}) {
    const { page } = this;
    let labels = [];
    for (let i = 1; i <= tries; i++) {
      await this.openPalette(query);
      await page.waitForTimeout(300);
      labels = await page.locator('.quick-input-list .monaco-list-row').evaluateAll((rows) => rows.map((r) => r.getAttribute('aria-label') ?? ''));
      await page.keyboard.press('Escape');
      if (labels.length >= expectAtLeast) break;
      await page.waitForTimeout(1000);
    }
    return labels.map(nbsp);
  }

  /**
   * Runs one command by its palette title ("GPU Memory: Show Live Panel").
   * Retries: the palette's list is computed when it opens, so an F1 pressed before the extension's
   * contributions are registered never shows the command, even later.
   */
  async runCommand(title, { tries = 6 } = {}) {
    const { page } = this;
    for (let i = 1; i <= tries; i++) {
      await this.openPalette(title);
      const row = page.locator('.quick-input-list .monaco-list-row').filter({ has: page.locator(`.label-name`, { hasText: title.split(': ').pop() }) });
      const exact = page.locator(`.quick-input-list .monaco-list-row[aria-label="${title.replace(/"/g, '\\"')}"]`);
      const target = (await exact.count()) ? exact.first() : row.first();
      try {
        await target.waitFor({ state: 'visible', timeout: 5000 });
        await target.click();
        return;
      } catch (err) {
        await page.keyboard.press('Escape');
        if (i === tries) throw new Error(`command "${title}" not found in the command palette after ${tries} tries: ${err.message}`);
        await page.waitForTimeout(1000);
      }
    }
  }

  /**
   * Types `fullPath` into code-server's open/save file dialog (a quick input) and accepts it.
   * Note [File dialog input]: the dialog fills in its own starting value (the folder, or the suggested
   * file) a moment after it shows; on a slow machine that lands after a quick `fill` and overwrites it, and
   * Enter then only opens the folder (the CI flake where "Open Snapshot…" opened no tab). So: wait for the
   * dialog's own value, replace it until the replacement stays, press Enter, and check the dialog closed;
   * if it did not (the value was replaced after all), do it again. `starting`: what the dialog's own value
   * looks like once it has landed (a save dialog's suggested file name).
   */
  async acceptFileDialog(fullPath, { starting = (v) => v.length > 0, tries = 3, timeout = 15_000 } = {}) {
    const { page } = this;
    const widget = page.locator('.quick-input-widget');
    const input = page.locator('.quick-input-widget .quick-input-box input');
    const until = async (ok, ms, what) => {
      const deadline = Date.now() + ms;
      while (!(await ok())) {
        if (Date.now() > deadline) throw new Error(`file dialog: ${what} within ${ms} ms (it shows "${await input.inputValue().catch(() => '?')}")`);
        await page.waitForTimeout(100);
      }
    };
    await input.waitFor({ state: 'visible', timeout });
    await until(async () => starting(await input.inputValue()), timeout, 'no starting value');
    for (let i = 1; ; i++) {
      await until(async () => {
        await input.fill(fullPath);
        await page.waitForTimeout(250);
        return (await input.inputValue()) === fullPath;
      }, timeout, `"${fullPath}" did not stay typed`);
      await input.press('Enter');
      try {
        await widget.waitFor({ state: 'hidden', timeout: 8_000 });
        return;
      } catch (err) {
        if (i === tries) throw new Error(`file dialog: still open after Enter on "${fullPath}", ${tries} tries (it shows "${await input.inputValue().catch(() => '?')}")`);
      }
    }
  }

  /** Opens a workspace file from the Explorer (by its name in the tree) and waits for its text. */
  async openFile(name) {
    const { page } = this;
    await this.dismissDialogs();
    const parts = name.split('/');
    for (const [i, part] of parts.entries()) {
      const row = page.locator('.explorer-folders-view .monaco-list-row', { has: page.locator('.label-name', { hasText: new RegExp(`^${escapeRe(part)}$`) }) }).first();
      await row.waitFor({ state: 'visible', timeout: 20_000 });
      if (i < parts.length - 1) {
        if ((await row.getAttribute('aria-expanded')) !== 'true') await row.click();
      } else {
        await row.dblclick();
      }
    }
    await page.locator(`.tabs-container .tab[aria-label*="${parts.at(-1)}"]`).first().waitFor({ timeout: 20_000 });
    await page.waitForFunction(() => (document.querySelector('.editor-instance .monaco-editor .view-lines')?.textContent ?? '').length > 0, null, { timeout: 20_000 });
  }

  /** Waits until an editor shows a decoration whose `after` text contains `substr`; returns {after, line}. */
  async waitForDecorationText(substr, { timeout = 20_000 } = {}) {
    const handle = await this.page.waitForFunction(
      (needle) => {
        // `after` decoration text is a CSS ::after pseudo-element, invisible to textContent.
        for (const el of document.querySelectorAll('.monaco-editor .view-lines span')) {
          const c = getComputedStyle(el, '::after').content;
          if (c && c !== 'none' && c.includes(needle)) {
            return { after: JSON.parse(c.startsWith('"') ? c : JSON.stringify(c)), line: (el.closest('.view-line')?.textContent ?? '').replace(/\u00a0/g, ' ') };
          }
        }
        return null;
      },
      substr,
      { timeout },
    );
    return handle.jsonValue();
  }

  /**
   * The content frame of a webview panel (two iframes deep: iframe.webview → #active-frame).
   * `titleOrSelector`: the panel's tab title (its tab is clicked, so its webview is the visible one), or
   * a CSS selector for the outer iframe. With a title, the iframe is the one shown in that tab's editor group.
   */
  async webviewFrame(titleOrSelector, { timeout = 30_000 } = {}) {
    const { page } = this;
    let outer;
    if (/^[.#[]|iframe/.test(titleOrSelector)) {
      outer = page.locator(titleOrSelector);
    } else {
      const tab = page.locator('.tabs-container .tab', { has: page.locator('.label-name', { hasText: titleOrSelector }) }).first();
      await tab.waitFor({ state: 'visible', timeout });
      await tab.click();
      outer = await this.webviewInGroupOf(tab, timeout);
    }
    await outer.first().waitFor({ state: 'attached', timeout });
    return outer.first().contentFrame().locator('#active-frame').contentFrame();
  }

  /**
   * The outer iframe of the webview shown in the editor group that holds `tab`. Webview iframes are not
   * inside their group's DOM (VS Code overlays them), and with the live panel open beside a snapshot two
   * are visible at once, so "the first visible one" could be the other panel's: pick the one whose centre
   * lies in this group's box, and name it by its unique src so later lookups cannot drift to another.
   */
  async webviewInGroupOf(tab, timeout) {
    const group = tab.locator('xpath=ancestor::div[contains(concat(" ", normalize-space(@class), " "), " editor-group-container ")][1]');
    const deadline = Date.now() + timeout;
    let last = null;
    for (;;) {
      const box = await group.boundingBox();
      const src = box && await this.page.evaluate((b) => {
        for (const f of document.querySelectorAll('iframe.webview.ready')) {
          const r = f.getBoundingClientRect();
          if (!r.width || !r.height || getComputedStyle(f).visibility === 'hidden') continue;
          const cx = r.left + r.width / 2, cy = r.top + r.height / 2;
          if (cx >= b.x && cx <= b.x + b.width && cy >= b.y && cy <= b.y + b.height) return f.getAttribute('src');
        }
        return null;
      }, box);
      // the same one twice, 250 ms apart: just after a tab click the group's previous webview may still show
      if (src && src === last) return this.page.locator(`iframe.webview.ready[src="${src.replace(/["\\]/g, '\\$&')}"]`);
      last = src;
      if (Date.now() > deadline) throw new Error(`no visible webview in the editor group of tab "${await tab.textContent()}" within ${timeout} ms`);
      await this.page.waitForTimeout(250);
    }
  }

  /** Waits for a notification toast containing `substr`; returns its full text. */
  async waitForNotification(substr, { timeout = 20_000 } = {}) {
    const toast = this.page.locator('.notifications-toasts .notification-list-item-message', { hasText: substr }).first();
    try {
      await toast.waitFor({ state: 'visible', timeout });
    } catch {
      throw new Error(`no notification containing "${substr}" within ${timeout} ms; on screen: ${JSON.stringify(await this.visibleMessages())}`);
    }
    return nbsp(await toast.textContent());
  }

  /** Texts of the notification toasts and modal dialogs on screen (an error such as "command … not found" is a dialog). */
  async visibleMessages() {
    return this.page.evaluate(() =>
      [...document.querySelectorAll('.notifications-toasts .notification-list-item-message, .monaco-dialog-box .dialog-message-text, .monaco-dialog-box .dialog-message-detail')]
        .map((e) => (e.textContent ?? '').replace(/\u00a0/g, ' ').trim())
        .filter(Boolean),
    );
  }

  /** PNG of the whole workbench into .test-output/e2e/<name>.png; returns the path. */
  async screenshot(name) {
    fs.mkdirSync(OUTPUT, { recursive: true });
    const file = path.join(OUTPUT, `${name.replace(/[^\w.-]+/g, '-')}.png`);
    await this.page.waitForTimeout(300); // let toasts and panels finish animating
    await this.page.screenshot({ path: file });
    return file;
  }

  async close() {
    await this.context.close();
  }
}

function escapeRe(s) {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
