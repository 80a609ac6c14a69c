// The snapshot webview's HTML, as a pure function so the extension and the Chromium tests serve the same page.
//
// Note [Webview CSP]: default-src 'none'; scripts only with this page's nonce; styles, fonts and images only
// from the webview's own resource origin (dist/webview, media/). The toolkit styles its components through
// constructable stylesheets, which style-src does not govern, so no 'unsafe-inline'; it also inserts one
// empty <style> element (design-token root) that it fills through the CSSOM, allowed by the hash of the
// empty string. img-src adds data: for canvas.toDataURL previews. Nothing remote can load.
export interface PageAssets {
  /** webview.cspSource */
  cspSource: string;
  nonce: string;
  cssUri: string;
  toolkitUri: string;
  scriptUri: string;
  title: string;
}

const EMPTY_STYLE_HASH = 'sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=';

export function snapshotPageHtml(a: PageAssets): string {
  const csp = [
    `default-src 'none'`,
    `img-src ${a.cspSource} data:`,
    `style-src ${a.cspSource} '${EMPTY_STYLE_HASH}'`,
    `font-src ${a.cspSource}`,
    `script-src 'nonce-${a.nonce}'`,
  ].join('; ');
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link rel="stylesheet" href="${escapeHtml(a.cssUri)}">
<title>${escapeHtml(a.title)}</title>
</head>
<body>
<div id="app" data-title="${escapeHtml(a.title)}"></div>
<script type="module" nonce="${a.nonce}" src="${escapeHtml(a.toolkitUri)}"></script>
<script nonce="${a.nonce}" src="${escapeHtml(a.scriptUri)}"></script>
</body>
</html>`;
}

export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] as string);
}
