// Note [Narrow panels]: every tab of both panels must read at 420 px (with the editor beside it a
// panel is about 500 px wide). "Reads" is checked two ways, both from the page itself:
//   - the document does not scroll sideways: documentElement.scrollWidth ≤ clientWidth (clientWidth leaves out a
//     vertical scrollbar, so this is the width the user actually sees);
//   - no element that is shown, nor its content, reaches past the page's right edge (or before its left edge), open
//     shadow roots included (the toolkit's tab strip and data grid draw inside theirs). An element clipped by an
//     ancestor's overflow, or scrolled inside its own box, still counts: hidden text is what the issue is about.
// Used by the webview layer (a page) and by E2E (the webview's content frame).

/**
 * Runs in the page: {scrollWidth, clientWidth, count, causes: [{selector, left, right, width}], causeCount}; `count`
 * elements (or their content) are past the edge, `causes` (at most 12, furthest out first) are where that starts.
 */
function measure() {
  const doc = document.documentElement;
  const pageWidth = doc.clientWidth;
  const name = (el) => {
    let s = el.localName;
    if (el.id) s += `#${el.id}`;
    const testid = el.getAttribute('data-testid');
    if (testid) s += `[data-testid=${testid}]`;
    const cls = typeof el.className === 'string' ? el.className.trim().split(/\s+/).filter(Boolean).slice(0, 2) : [];
    if (cls.length) s += `.${cls.join('.')}`;
    return s;
  };
  const parentOf = (e) => e.parentElement ?? (e.getRootNode() instanceof ShadowRoot ? e.getRootNode().host : null);
  const path = (el) => {
    const parts = [];
    for (let e = el; e && parts.length < 4; e = parentOf(e)) parts.unshift(name(e));
    return parts.join(' > ');
  };
  const boxOver = new Map(); // the element's box reaches past an edge
  const contentOver = new Map(); // its box does not, but its content does (text that cannot wrap, a scroller)
  const visit = (root) => {
    for (const el of root.querySelectorAll('*')) {
      if (el.shadowRoot) visit(el.shadowRoot);
      const r = el.getBoundingClientRect();
      if (r.width === 0 && r.height === 0) continue; // not shown (display:none, an empty slot)
      const left = Math.round(r.left + window.scrollX);
      const right = Math.round(r.right + window.scrollX);
      const contentRight = Math.round(r.left + window.scrollX + el.scrollWidth);
      if (right > pageWidth || left < 0) boxOver.set(el, { selector: path(el), left, right, width: Math.round(r.width) });
      else if (contentRight > pageWidth) contentOver.set(el, { selector: `${path(el)} (its content)`, left, right: contentRight, width: el.scrollWidth });
    }
  };
  visit(document);
  // The causes, not every ancestor they stretch: a box past the edge whose parent's box is not, and content past
  // the edge that is none of its children's.
  const children = (el) => [...el.children, ...(el.shadowRoot?.children ?? [])];
  const causes = [
    ...[...boxOver].filter(([el]) => !boxOver.has(parentOf(el))),
    ...[...contentOver].filter(([el]) => !children(el).some((c) => boxOver.has(c) || contentOver.has(c))),
  ].map(([, o]) => o);
  causes.sort((a, b) => b.right - a.right || a.left - b.left);
  return { scrollWidth: doc.scrollWidth, clientWidth: pageWidth, causes: causes.slice(0, 12), causeCount: causes.length, count: boxOver.size + contentOver.size };
}

/** Measures `target`: a playwright Page or Frame, or a FrameLocator (E2E's webviewFrame). */
export function overflowOf(target) {
  return (typeof target.evaluate === 'function' ? target : target.locator(':root')).evaluate(measure);
}

/** A failure message naming what is too wide, or '' when nothing is. */
export function overflowProblem(what, m) {
  const scrolls = m.scrollWidth > m.clientWidth;
  if (!scrolls && m.count === 0) return '';
  const lines = m.causes.map((o) => `  ${o.selector}: ${o.left}…${o.right} px (width ${o.width}, ${o.right > m.clientWidth ? `${o.right - m.clientWidth} px past the right edge` : `${-o.left} px before the left edge`})`);
  return `${what} (page ${m.clientWidth} px): ${scrolls ? `the page scrolls sideways by ${m.scrollWidth - m.clientWidth} px; ` : ''}` +
    `${m.count} element(s) past the edge, ${m.causeCount} where it starts (not the ancestors it widens):\n${lines.join('\n')}`;
}
