// HTML escaping for text and attribute values, the one copy used by the page builder (src/core/views/page/page.ts)
// and the webviews (webview/common/escape.ts re-exports it). Panels build their DOM with textContent and
// `h()`; this is for the few places that write markup as a string.
export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] as string);
}
