// Proves the webview harness: the toolkit's components render in Debian Chromium, a click reaches
// acquireVsCodeApi().postMessage, a message sent into the page reaches its listener, state round-trips,
// and a strict CSP like the panels' is honoured.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { openWebview } from './harness/index.mjs';

const page = (origin) => `<!doctype html>
<html><head>
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src ${origin} 'nonce-test'; style-src ${origin} 'unsafe-inline';">
<script type="module" src="${origin}/toolkit.min.js"></script>
</head><body>
<vscode-button id="go">Capture</vscode-button>
<p id="out">waiting</p>
<script nonce="test">
  const vscode = acquireVsCodeApi();
  let clicks = (vscode.getState() || { clicks: 0 }).clicks;
  document.getElementById('go').addEventListener('click', () => {
    clicks++;
    vscode.setState({ clicks });
    vscode.postMessage({ type: 'clicked', clicks });
  });
  window.addEventListener('message', (e) => { document.getElementById('out').textContent = e.data.text; });
  vscode.postMessage({ type: 'ready' });
</script>
<script>window.inlineWithoutNonceRan = true;</script>
</body></html>`;

let wv;
before(async () => {
  wv = await openWebview({
    html: page,
    files: { '/toolkit.min.js': 'node_modules/@vscode/webview-ui-toolkit/dist/toolkit.min.js' },
    state: { clicks: 41 },
  });
});
after(() => wv?.close());

test('the page announces itself through the stubbed API', async () => {
  assert.deepEqual(await wv.waitForMessage((m) => m.type === 'ready'), { type: 'ready' });
});

test('a toolkit button renders as a custom element and its click is posted', async () => {
  const button = wv.page.locator('vscode-button#go');
  // Defined by toolkit.min.js: an upgraded element has a shadow root with a real <button>.
  await wv.page.waitForFunction(() => customElements.get('vscode-button') !== undefined);
  assert.equal(await button.evaluate((el) => el.shadowRoot?.querySelector('button') !== null), true);
  await button.click();
  // The restored state said 41 clicks, so the first click here is the 42nd.
  assert.deepEqual(await wv.waitForMessage((m) => m.type === 'clicked'), { type: 'clicked', clicks: 42 });
  assert.deepEqual(await wv.state(), { clicks: 42 });
  await wv.screenshot('harness-toolkit-button');
});

test('a message sent into the page reaches its listener', async () => {
  await wv.send({ text: 'hello from the extension' });
  assert.equal(await wv.page.locator('#out').textContent(), 'hello from the extension');
});

test('the CSP blocks a script without the nonce', async () => {
  assert.equal(await wv.page.evaluate(() => window.inlineWithoutNonceRan), undefined);
  assert.ok(wv.errors.some((e) => /Content Security Policy/.test(e)), `expected a CSP violation, got: ${wv.errors.join(' | ')}`);
});
