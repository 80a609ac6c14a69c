// Note [Stacked tables]: a table (or data grid) too wide for its panel is shown as stacked cards, one per row,
// each cell as "column: value" (media/snapshot.css, `.stacked`). Part of Note [Narrow panels]: every tab reads at
// 420 px. Whether a table fits depends on its data (file paths, module names, how many categories), not on a
// fixed width, so no media query can say when to stack: the table itself is measured, laid out as a table,
// whenever its container's size changes, and stacked only when that is wider than the container.
const watched = new Map<Element, Set<HTMLElement>>(); // container → its tables
const fittedAt = new WeakMap<HTMLElement, number>(); // table → the container width it was last fitted to
// Stacking changes the container's height. Done inside the observer's callback, that is a change the observer must
// report within the same frame, and cannot ("ResizeObserver loop completed with undelivered notifications"), so
// fitting waits for the next frame; the height change it causes then finds the width unchanged and does nothing.
const observer = new ResizeObserver((entries) => {
  const containers = entries.map((e) => e.target as HTMLElement);
  requestAnimationFrame(() => containers.forEach(fitAll));
});

function fitAll(container: HTMLElement): void {
  const tables = watched.get(container) ?? new Set<HTMLElement>();
  for (const t of tables) if (!t.isConnected) tables.delete(t); // a tab redrawn: its old tables are gone
  if (!tables.size) {
    watched.delete(container);
    observer.unobserve(container);
  }
  const width = container.clientWidth;
  for (const t of tables) {
    if (fittedAt.get(t) === width) continue;
    fittedAt.set(t, width);
    fit(t, container);
  }
}

/** Watches `table` (already in its container): stacked while it is wider than the container. */
export function stackWhenTooWide(table: HTMLElement): void {
  const container = table.parentElement;
  if (!container) return;
  labelCells(table);
  const tables = watched.get(container) ?? new Set<HTMLElement>();
  watched.set(container, tables.add(table));
  observer.observe(container); // reports at once (or when its tab is first shown), then on each resize
}

function fit(table: HTMLElement, container: HTMLElement): void {
  table.classList.remove('stacked');
  const style = getComputedStyle(container);
  const room = container.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
  // A table grows to its content's width; a data grid keeps its box and its rows overflow it.
  const wide = table.offsetWidth > room + 0.5 || table.scrollWidth > table.clientWidth + 0.5;
  table.classList.toggle('stacked', room > 0 && wide);
}

/** Each body cell of a table with a header row gets its column's title, which a stacked card shows before it; a row
 * header (th scope=row) heads its card, unlabelled. */
function labelCells(table: HTMLElement): void {
  if (!(table instanceof HTMLTableElement) || !table.tHead?.rows[0]) return;
  const titles = [...table.tHead.rows[0].cells].map((c) => c.textContent?.trim() ?? '');
  for (const body of table.tBodies) {
    for (const row of body.rows) {
      [...row.cells].forEach((c, i) => {
        if (titles[i] && !c.dataset.label && !(c.localName === 'th' && c.scope === 'row')) c.dataset.label = titles[i];
      });
    }
  }
}
