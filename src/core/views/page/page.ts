// The one page builder for every webview panel (live, snapshot): the strict CSP with this load's nonce, the
// toolkit, the panel's stylesheets and bundle, all from the extension's own files. A pure function (no
// vscode import), so the extension (src/glue/webview/page.ts), the Chromium tests and the benchmarks serve
// exactly the same page.
//
// Note [Webview CSP]: default-src 'none'; scripts only with this page's nonce; styles, fonts and images
// only from the webview's own resource origin (dist/webview, media/). Nothing remote can load: the CSP
// names no http(s) source, and every URL in the page comes from `resource` (asWebviewUri in the extension).
// The toolkit (FAST) styles its components through constructable stylesheets, which style-src does not
// govern, so there is no 'unsafe-inline'. It also creates <style> elements: the one it probes
// :focus-visible support with carries the nonce it reads from <meta property="csp-nonce"> (hence
// 'nonce-…' in style-src), and the empty design-token root it fills through the CSSOM is allowed by the
// hash of the empty string. img-src adds data: for canvas.toDataURL previews. The live and snapshot pages
// used to carry one half of this recipe each; one recipe now serves both.
import { escapeHtml } from '../../base/protocol/escape';

/** path segments of the toolkit bundle in the extension (copied from node_modules by the build) */
export const TOOLKIT_SCRIPT = ['dist', 'webview', 'toolkit.min.js'] as const;
/** the folders a panel page loads from: the webview's localResourceRoots */
export const WEBVIEW_RESOURCE_ROOTS = [['dist', 'webview'], ['media']] as const;

const EMPTY_STYLE_HASH = 'sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=';

export interface PageOptions {
  /** webview.cspSource: the origin the webview serves the extension's files from */
  cspSource: string;
  /** fresh per load (src/glue/webview/page.ts); base64 or base64url characters only */
  nonce: string;
  /** URI of a file in the extension, by path segments (asWebviewUri in the extension) */
  resource: (...pathSegments: string[]) => string;
  /** the document title (text; escaped here) */
  title: string;
  /** stylesheets, by path segments, in order */
  styles: readonly (readonly string[])[];
  /** the panel's bundle, by path segments; loaded after the toolkit */
  script: readonly string[];
  /** the body's markup: trusted static markup; escape any data in it with escapeHtml */
  body: string;
}

/** What a panel's page function needs from the webview that shows it (src/glue/webview/page.ts pageContext). */
export type PageContext = Pick<PageOptions, 'cspSource' | 'nonce' | 'resource'>;

/** The Content-Security-Policy of every panel page (Note [Webview CSP]). */
export function webviewCsp(cspSource: string, nonce: string): string {
  checkNonce(nonce);
  // VS Code's cspSource is a source list ("'self' https://*.vscode-cdn.net"); a ';' would start a directive.
  const src = cspSource.trim();
  if (src === '' || /[;,\n]/.test(src)) throw new Error(`webview page: cspSource ${JSON.stringify(cspSource)} is not a CSP source list`);
  return [
    "default-src 'none'",
    `script-src 'nonce-${nonce}'`,
    `style-src ${src} 'nonce-${nonce}' '${EMPTY_STYLE_HASH}'`,
    `img-src ${src} data:`,
    `font-src ${src}`,
  ].join('; ');
}

function checkNonce(nonce: string): void {
  // A nonce goes inside quotes in the CSP and in attributes: only characters that need no escaping there.
  if (!/^[A-Za-z0-9+/_-]{8,}={0,2}$/.test(nonce)) throw new Error('webview page: the nonce must be at least 8 base64 characters');
}

export function webviewPage(o: PageOptions): string {
  const n = o.nonce;
  const res = (p: readonly string[]) => escapeHtml(o.resource(...p));
  const styles = o.styles.map((p) => `<link rel="stylesheet" href="${res(p)}" nonce="${n}">`).join('\n');
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${escapeHtml(webviewCsp(o.cspSource, n))}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<!-- The toolkit (FAST) puts this nonce on the <style> it creates to probe :focus-visible support. -->
<meta property="csp-nonce" content="${n}">
${styles}
<title>${escapeHtml(o.title)}</title>
</head>
<body>
${o.body}
<script nonce="${n}" type="module" src="${res(TOOLKIT_SCRIPT)}"></script>
<script nonce="${n}" src="${res(o.script)}"></script>
</body>
</html>`;
}
