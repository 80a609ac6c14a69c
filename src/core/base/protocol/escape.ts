// HTML escaping for text and attribute values, the one copy, used by the page builders (src/core/views/page/page.ts,
// src/core/views/snapshot/page.ts) for the panels' HTML shells. The panels themselves never write markup as a
// string: they build their DOM with `h()` (webview/common/dom.ts), so the webviews need no escaper.
export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] as string);
}
