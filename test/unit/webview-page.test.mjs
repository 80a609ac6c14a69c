// The one page builder every panel uses (src/core/views/page/page.ts, Note [Webview CSP]): GIVEN a panel's
// resources, THEN its CSP allows scripts only with this load's nonce, names no source but the webview's own
// origin (no http(s) host, nothing remote), and every interpolated value is escaped.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { webviewCsp, webviewPage } from '../../src/core/views/page/page.ts';
import { escapeHtml } from '../../src/core/base/protocol/escape.ts';
import { snapshotPageHtml } from '../../src/core/views/snapshot/page.ts';
import { liveHtmlTemplate } from '../../src/glue/live/template.ts';

// What VS Code 1.100's webview.cspSource is: a source list, not one origin.
const CSP_SOURCE = "'self' https://*.vscode-cdn.net";
const NONCE = 'bm9uY2Utb2YtdGhpcy1sb2Fk';
const resource = (...p) => `https://file+.vscode-resource.vscode-cdn.net/ext/${p.join('/')}`;

/** The page's CSP meta, entity-decoded, as { directive: [sources] }. */
function cspOf(html) {
  const m = html.match(/<meta http-equiv="Content-Security-Policy" content="([^"]*)">/);
  assert.ok(m, 'the page has a CSP meta tag');
  const text = m[1].replace(/&#39;/g, "'").replace(/&quot;/g, '"').replace(/&lt;/g, '<').replace(/&amp;/g, '&');
  return Object.fromEntries(text.split(';').map((d) => d.trim().split(/\s+/)).map(([name, ...sources]) => [name, sources]));
}

const pages = {
  live: liveHtmlTemplate({ cspSource: CSP_SOURCE, nonce: NONCE, resource }),
  snapshot: snapshotPageHtml({ cspSource: CSP_SOURCE, nonce: NONCE, resource, title: 'train.pickle' }),
};

for (const [name, html] of Object.entries(pages)) {
  test(`${name} page: scripts need this load's nonce; no source but the webview's own origin`, () => {
    const csp = cspOf(html);
    assert.deepEqual(csp['default-src'], ["'none'"]);
    assert.deepEqual(csp['script-src'], [`'nonce-${NONCE}'`]);
    const own = CSP_SOURCE.split(' ');
    for (const [directive, sources] of Object.entries(csp)) {
      for (const s of sources) {
        const allowed = own.includes(s) || s === "'none'" || s === `'nonce-${NONCE}'` || /^'sha256-[A-Za-z0-9+/=]+'$/.test(s) || (s === 'data:' && directive === 'img-src');
        assert.ok(allowed, `${directive} allows ${s}`);
        assert.ok(!/unsafe/.test(s), `${directive} has ${s}`);
      }
    }
    // Every script and stylesheet carries the nonce and comes from the extension's files.
    const scripts = [...html.matchAll(/<script\b([^>]*)>/g)].map((m) => m[1]);
    assert.equal(scripts.length, 2, 'the toolkit and the panel bundle');
    for (const attrs of scripts) {
      assert.match(attrs, new RegExp(`nonce="${NONCE}"`));
      assert.match(attrs, /src="https:\/\/file\+\.vscode-resource\.vscode-cdn\.net\/ext\/dist\/webview\/[a-z.]+\.js"/);
    }
    assert.match(scripts[0], /toolkit\.min\.js/);
    assert.match(scripts[1], new RegExp(`${name}\\.js`));
    for (const m of html.matchAll(/<link\b([^>]*)>/g)) assert.match(m[1], /href="https:\/\/file\+\.vscode-resource\.vscode-cdn\.net\/ext\/(media|dist\/webview)\/[\w.]+\.css"/);
    // The toolkit finds the nonce for the <style> it creates here.
    assert.match(html, new RegExp(`<meta property="csp-nonce" content="${NONCE}">`));
    // No inline script or style: every <script> has a src, there is no <style> and no style attribute.
    const markup = html.replace(/<!--[\s\S]*?-->/g, '');
    assert.ok(!/<style\b/.test(markup), 'no <style> element');
    assert.ok(!/\sstyle="/.test(markup), 'no style attribute');
    assert.ok(!/\son[a-z]+="/.test(markup), 'no inline event handler');
  });
}

test('the snapshot page escapes its title (a file name is data)', () => {
  const html = snapshotPageHtml({ cspSource: CSP_SOURCE, nonce: NONCE, resource, title: 'a"><script>alert(1)</script>.pickle' });
  assert.ok(!html.includes('<script>alert(1)'), 'no injected element');
  assert.match(html, /<title>a&quot;&gt;&lt;script&gt;alert\(1\)&lt;\/script&gt;\.pickle<\/title>/);
  assert.match(html, /data-title="a&quot;&gt;&lt;script&gt;alert\(1\)&lt;\/script&gt;\.pickle"/);
  assert.equal([...html.matchAll(/<script\b/g)].length, 2);
});

test('resource URIs are escaped in attributes', () => {
  const html = webviewPage({ cspSource: CSP_SOURCE, nonce: NONCE, resource: (...p) => `https://x/${p.join('/')}?a=1&b="2"`, title: 't', styles: [['media', 'x.css']], script: ['dist', 'webview', 'x.js'], body: '' });
  assert.match(html, /href="https:\/\/x\/media\/x\.css\?a=1&amp;b=&quot;2&quot;"/);
  assert.match(html, /src="https:\/\/x\/dist\/webview\/x\.js\?a=1&amp;b=&quot;2&quot;"/);
});

test('a nonce or cspSource that could break out of the policy is refused with a reason', () => {
  assert.throws(() => webviewCsp(CSP_SOURCE, "abc' 'unsafe-inline"), /the nonce must be at least 8 base64 characters/);
  assert.throws(() => webviewCsp(CSP_SOURCE, 'short'), /the nonce must be at least 8 base64 characters/);
  assert.throws(() => webviewCsp("'self'; script-src *", NONCE), /is not a CSP source list/);
  assert.throws(() => webviewCsp('', NONCE), /is not a CSP source list/);
  // what crypto.randomBytes(18).toString('base64') gives (src/glue/webview/page.ts)
  assert.match(webviewCsp(CSP_SOURCE, 'q83vEjRWeJq83vEjRWeJq83v'), /script-src 'nonce-q83vEjRWeJq83vEjRWeJq83v'/);
});

test('escapeHtml: the five characters that matter in text and quoted attributes', () => {
  assert.equal(escapeHtml(`<a href="x" title='y'>&amp;</a>`), '&lt;a href=&quot;x&quot; title=&#39;y&#39;&gt;&amp;amp;&lt;/a&gt;');
  assert.equal(escapeHtml('plain/path_1.py:42'), 'plain/path_1.py:42');
});
