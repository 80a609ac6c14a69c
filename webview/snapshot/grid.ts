// A sortable vscode-data-grid built from rows we own (so each row carries its file:line for "go to source").
import { clear, h } from './dom';
import { stackWhenTooWide } from './fit';

export interface Column<R> {
  key: string;
  title: string;
  /** cell text */
  text: (row: R) => string;
  /** sort value; absent = not sortable */
  sortValue?: (row: R) => number | string;
  numeric?: boolean;
  /** a colour swatch before the cell text (CSS colour), e.g. the timeline owner of a sites row */
  swatch?: (row: R) => string | undefined;
}

export interface GridOptions<R> {
  columns: Column<R>[];
  sort: { key: string; descending: boolean };
  onSort: (sort: { key: string; descending: boolean }) => void;
  onActivate: (row: R) => void;
  rowTitle?: (row: R) => string;
  limit?: number;
  testId: string;
}

export function renderGrid<R>(root: HTMLElement, rows: readonly R[], o: GridOptions<R>): void {
  clear(root);
  const col = o.columns.find((c) => c.key === o.sort.key && c.sortValue) ?? o.columns.find((c) => c.sortValue);
  const sorted = [...rows];
  if (col?.sortValue) {
    const sv = col.sortValue;
    const dir = o.sort.descending ? -1 : 1;
    sorted.sort((a, b) => {
      const x = sv(a);
      const y = sv(b);
      return dir * (typeof x === 'number' && typeof y === 'number' ? x - y : String(x).localeCompare(String(y)));
    });
  }
  const limit = o.limit ?? 500;
  // Floors wide enough for a header word ("allocated") so narrow panels wrap headers between words,
  // never inside one.
  const template = o.columns.map((c) => (c.numeric ? 'minmax(10ch, 1fr)' : 'minmax(18ch, 3fr)')).join(' ');
  const grid = h('vscode-data-grid', { 'data-testid': o.testId, 'grid-template-columns': template, 'aria-label': o.testId });
  // Rows we create ourselves do not inherit the grid's template; give each the same one.
  const header = h('vscode-data-grid-row', { 'row-type': 'header', 'grid-template-columns': template });
  o.columns.forEach((c, i) => {
    const arrow = col && c.key === col.key ? (o.sort.descending ? ' ▼' : ' ▲') : '';
    const cell = h('vscode-data-grid-cell', { 'cell-type': 'columnheader', 'grid-column': i + 1, 'data-key': c.key, class: c.sortValue ? 'sortable' : '' }, c.title + arrow);
    if (c.sortValue) {
      const activate = () => o.onSort({ key: c.key, descending: col && c.key === col.key ? !o.sort.descending : true });
      cell.addEventListener('click', activate);
      cell.addEventListener('keydown', (e) => {
        if (e.key === 'Enter' || e.key === ' ') activate();
      });
    }
    header.append(cell);
  });
  grid.append(header);
  sorted.slice(0, limit).forEach((r, idx) => {
    const row = h('vscode-data-grid-row', { 'data-index': idx, title: o.rowTitle?.(r) ?? '', class: 'clickable', 'grid-template-columns': template });
    o.columns.forEach((c, i) => {
      // data-label: the column's title, shown before the value when the grid is stacked (Note [Stacked tables])
      const cell = h('vscode-data-grid-cell', { 'grid-column': i + 1, class: c.numeric ? 'num' : '', 'data-label': i > 0 ? c.title : undefined });
      const colour = c.swatch?.(r);
      if (colour) {
        const sw = h('span', { class: 'swatch', 'data-swatch': colour });
        sw.style.background = colour; // CSSOM, not a style attribute (CSP)
        cell.append(sw, ' ');
      }
      cell.append(c.text(r));
      row.append(cell);
    });
    row.addEventListener('click', () => o.onActivate(r));
    row.addEventListener('keydown', (e) => {
      if (e.key === 'Enter') o.onActivate(r);
    });
    grid.append(row);
  });
  root.append(grid);
  stackWhenTooWide(grid);
  if (sorted.length > limit) root.append(h('p', { class: 'muted' }, `Showing ${limit} of ${sorted.length} rows.`));
  if (sorted.length === 0) root.append(h('p', { class: 'muted' }, 'No rows.'));
}
