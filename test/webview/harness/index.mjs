// Webview harness: a panel's HTML + its browser bundle, served on 127.0.0.1 and opened in Debian's
// Chromium with a stubbed acquireVsCodeApi — the fast layer under the real-VS Code E2E tests.
//
//   const wv = await openWebview({
//     html: (origin) => snapshotHtml({ cspSource: origin, scriptUri: `${origin}/snapshot.js`, nonce: 'n' }),
//     files: { '/snapshot.js': 'dist/webview/snapshot.js', '/toolkit.min.js': 'dist/webview/toolkit.min.js' },
//     state: { …restored getState() value… },
//   });
//   await wv.send({ type: 'model', … });          // what the extension would post into the panel
//   const msg = await wv.waitForMessage((m) => m.type === 'ready');   // what the panel posted out
//   await wv.page.locator('vscode-button').click();
//   await wv.close();
//
// Note [Webview harness origin]: `html` may be a function of the server's origin, so real CSPs
// (`script-src ${webview.cspSource} 'nonce-…'`) and asWebviewUri-style URLs can be produced by the same
// code the extension uses, pointing at this server. Paths in `files` are relative to the repository root.
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';
export const OUTPUT = path.join(ROOT, '.test-output/webview');

const TYPES = { '.js': 'text/javascript', '.mjs': 'text/javascript', '.css': 'text/css', '.html': 'text/html', '.json': 'application/json', '.svg': 'image/svg+xml', '.png': 'image/png', '.map': 'application/json', '.pickle': 'application/octet-stream', '.ttf': 'font/ttf' };

// Mirrors the webview API surface a panel script may touch (acquireVsCodeApi can be called only once).
function stubVsCodeApi(initialState) {
  let state = initialState;
  let acquired = false;
  window.__posted = [];
  window.acquireVsCodeApi = () => {
    if (acquired) throw new Error('An instance of the VS Code API has already been acquired');
    acquired = true;
    return {
      postMessage: (m) => {
        // What crosses the boundary: plain data. VS Code carries typed arrays across (as their bytes); JSON
        // would turn a Uint8Array into an index → byte object, so the stub sends it as an array of bytes.
        window.__posted.push(JSON.parse(JSON.stringify(m, (_k, v) => (ArrayBuffer.isView(v) && !(v instanceof DataView) ? Array.from(v) : v))));
      },
      getState: () => state,
      setState: (s) => {
        state = s;
        window.__state = s;
        return s;
      },
    };
  };
}

/** A headless Chromium as the harness runs it. */
export function launchChromium() {
  if (!fs.existsSync(CHROMIUM)) throw new Error(`Chromium not found at ${CHROMIUM} — apt-get install chromium (see .dev/setup-code-server.sh)`);
  return chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run'] });
}

/**
 * @param {object} o
 * @param {import('playwright-core').Browser} [o.browser]  a running Chromium to open the page in (kept on close)
 * @param {string | ((origin: string) => string)} [o.html]  page HTML (or a function of the origin)
 * @param {string} [o.htmlFile]   alternatively, an HTML file (repo-relative or absolute)
 * @param {string} [o.bundle]     a script served at /<basename> and, if the HTML has no <script src> for it, appended
 * @param {Record<string,string>} [o.files]  URL path → file (repo-relative or absolute)
 * @param {unknown} [o.state]     what getState() returns at load (a restored panel)
 * @param {{width:number,height:number}} [o.viewport]
 * @param {'dark'|'light'} [o.theme]  sets VS Code's body class (vscode-dark / vscode-light)
 * @param {boolean} [o.isolated]  serve the page cross-origin isolated (COOP/COEP): Chromium then gives performance.now()
 *   and rAF timestamps at µs precision instead of 100 µs steps, so a benchmark's 60 fps frame intervals read as
 *   16.67 ms rather than 16.6/16.7/16.8 by rounding (test/bench/snapshot-panel/README.md)
 */
export async function openWebview(o) {
  const abs = (p) => (path.isAbsolute(p) ? p : path.join(ROOT, p));
  const files = new Map(Object.entries(o.files ?? {}).map(([u, f]) => [u, abs(f)]));
  if (o.bundle) files.set('/' + path.basename(o.bundle), abs(o.bundle));
  for (const f of files.values()) if (!fs.existsSync(f)) throw new Error(`openWebview: ${f} does not exist (built? \`npm run build\`)`);

  let html = '';
  const server = http.createServer((req, res) => {
    const url = new URL(req.url, 'http://x');
    const isolation = o.isolated ? { 'cross-origin-opener-policy': 'same-origin', 'cross-origin-embedder-policy': 'require-corp' } : {};
    if (url.pathname === '/' || url.pathname === '/index.html') {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', ...isolation });
      return res.end(html);
    }
    const file = files.get(url.pathname);
    if (!file) {
      res.writeHead(404);
      return res.end(`not served by the webview harness: ${url.pathname}`);
    }
    res.writeHead(200, { 'content-type': TYPES[path.extname(file)] ?? 'application/octet-stream', ...isolation });
    fs.createReadStream(file).pipe(res);
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const origin = `http://127.0.0.1:${server.address().port}`;

  html = typeof o.html === 'function' ? o.html(origin) : (o.html ?? fs.readFileSync(abs(o.htmlFile), 'utf8'));
  if (o.bundle && !html.includes(path.basename(o.bundle))) {
    const tag = `<script src="/${path.basename(o.bundle)}"></script>`;
    html = html.includes('</body>') ? html.replace('</body>', `${tag}</body>`) : html + tag;
  }

  // o.browser: a Chromium already running (a benchmark timing the panel, not Chromium's start, as in VS Code
  // where the webview process runs before a panel opens); it stays open on close().
  const browser = o.browser ?? (await launchChromium());
  const context = await browser.newContext({ viewport: o.viewport ?? { width: 1200, height: 800 } });
  const page = await context.newPage();
  const errors = [];
  const warnings = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(m.text());
    if (m.type() === 'warning') warnings.push(m.text());
  });
  await page.addInitScript(stubVsCodeApi, o.state);
  if (o.theme) {
    await page.addInitScript((cls) => document.addEventListener('DOMContentLoaded', () => document.body.classList.add(cls)), `vscode-${o.theme}`);
  }
  await page.goto(origin + '/');

  return {
    page,
    origin,
    /** Page errors and console.error lines so far (a CSP violation shows up here). */
    errors,
    /** console.warn lines so far (a host message the page dropped is logged here with its reason). */
    warnings,
    /** Messages the page posted with acquireVsCodeApi().postMessage, in order. */
    posted: () => page.evaluate(() => window.__posted),
    /** Waits for a posted message matching `predicate` (a Node-side function over the message). */
    async waitForMessage(predicate, { timeout = 10_000 } = {}) {
      const t0 = Date.now();
      for (;;) {
        const msgs = await page.evaluate(() => window.__posted);
        const hit = msgs.find(predicate);
        if (hit) return hit;
        if (Date.now() - t0 > timeout) throw new Error(`no posted message matched within ${timeout} ms; posted: ${JSON.stringify(msgs).slice(0, 500)}`);
        await page.waitForTimeout(25);
      }
    },
    /**
     * Delivers a message to the page as the extension's webview.postMessage would (a window 'message' event). The
     * message crosses as JSON text, as VS Code's does (webview messages are JSON-serialised: Note [JSON-safe numbers]
     * in src/core/base/protocol/snapshot.ts), parsed in the page: handing the object to page.evaluate made Playwright
     * rebuild it value by value on the page's thread, 60–110 ms for a 10 M-event timeline or markers answer (0.3–0.5
     * MB), long tasks that VS Code's page does not have and that showed as missed frames in the pan/zoom benchmark.
     */
    send: (message) => page.evaluate((text) => window.dispatchEvent(new MessageEvent('message', { data: JSON.parse(text) })), JSON.stringify(message)),
    /** The last value the page passed to setState. */
    state: () => page.evaluate(() => window.__state),
    /** PNG of the viewport into .test-output/webview/<name>.png; `fullPage`: the whole page, scrolled parts too. */
    async screenshot(name, { fullPage = false } = {}) {
      fs.mkdirSync(OUTPUT, { recursive: true });
      const file = path.join(OUTPUT, `${name.replace(/[^\w.-]+/g, '-')}.png`);
      await page.screenshot({ path: file, fullPage });
      return file;
    },
    async close() {
      if (o.browser) await context.close();
      else await browser.close();
      await new Promise((r) => server.close(r));
    },
  };
}
