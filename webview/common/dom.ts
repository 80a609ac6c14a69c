// Tiny DOM helpers shared by the panels: markup is built in code (no innerHTML with data, so no injection).
type Attrs = Record<string, string | number | boolean | undefined>;

export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs?: Attrs, ...children: (Node | string)[]): HTMLElementTagNameMap[K];
export function h(tag: string, attrs?: Attrs, ...children: (Node | string)[]): HTMLElement;
export function h(tag: string, attrs: Attrs = {}, ...children: (Node | string)[]): HTMLElement {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === false) continue;
    // Through the CSSOM: a style attribute is inline style, which the panel's CSP forbids.
    if (k === 'style') {
      el.style.cssText = String(v);
      continue;
    }
    el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children) el.append(c);
  return el;
}

export function clear(el: Element): void {
  while (el.firstChild) el.removeChild(el.firstChild);
}
