// Top allocation sites: the Model's line statistics, the same numbers as the editor annotations. Allocations made
// during backward sit on the forward line whose op's backward made them, or, toggled, on the line that called
// backward() (Note [Sites by forward line] in src/core/base/protocol/snapshot.ts).
import { formatBytes } from '../../src/core/base/units/bytes';
import type { SiteRow, SitesBackwardGrouping } from '../../src/core/base/protocol/snapshot';
import { getState, send, updateState } from './api';
import { clear, h } from './dom';
import { ownerCss } from './palette';
import { renderGrid, type Column } from './grid';

const LINE: Column<SiteRow> = {
  key: 'site',
  title: 'Line',
  text: (r) => `${r.displayFile}:${r.line}`,
  sortValue: (r) => `${r.displayFile}:${String(r.line).padStart(8, '0')}`,
  // The timeline's colour for this line (Note [Owner colours]); ≥ 12 is "other lines".
  swatch: (r) => (r.ownerGroup >= 0 ? ownerCss(Math.min(r.ownerGroup, 12), 14) : undefined),
};
const SELF: Column<SiteRow> = { key: 'selfBytesAtPeak', title: 'At peak (self)', text: (r) => formatBytes(r.selfBytesAtPeak), sortValue: (r) => r.selfBytesAtPeak, numeric: true };
/** of the self bytes, those made during backward (the column is shown only when some line has any) */
const BACKWARD: Column<SiteRow> = {
  key: 'backwardBytesAtPeak',
  title: 'Of it, backward',
  text: (r) => (r.backwardBytesAtPeak > 0 ? formatBytes(r.backwardBytesAtPeak) : '—'),
  sortValue: (r) => r.backwardBytesAtPeak,
  numeric: true,
};
const REST: Column<SiteRow>[] = [
  { key: 'inclusiveBytesAtPeak', title: 'At peak (incl.)', text: (r) => formatBytes(r.inclusiveBytesAtPeak), sortValue: (r) => r.inclusiveBytesAtPeak, numeric: true },
  { key: 'totalAllocatedBytes', title: 'Total allocated', text: (r) => formatBytes(r.totalAllocatedBytes), sortValue: (r) => r.totalAllocatedBytes, numeric: true },
  { key: 'allocCount', title: 'Count', text: (r) => r.allocCount.toLocaleString('en-US'), sortValue: (r) => r.allocCount, numeric: true },
  { key: 'liveNowBytes', title: 'Live at end', text: (r) => formatBytes(r.liveNowBytes), sortValue: (r) => r.liveNowBytes, numeric: true },
];

const GROUPINGS: [SitesBackwardGrouping, string][] = [
  ['forward', 'on the forward line that caused them'],
  ['caller', 'on the line that called backward()'],
];

const BACKWARD_NOTE: Record<SitesBackwardGrouping, string> = {
  forward: "Backward: bytes the backward of this line's ops made (on the backward() line: what no forward op made), included in Self.",
  caller: 'Backward: bytes made during the backward() this line called, included in Self.',
};

/**
 * @param grouping where the rows put backward allocations; onGrouping asks the host for the other grouping
 */
export function renderSites(root: HTMLElement, rows: readonly SiteRow[], grouping: SitesBackwardGrouping, onGrouping: (g: SitesBackwardGrouping) => void): void {
  clear(root);
  const gridHost = h('div');
  // A run with no backward (a pickle, inference) has nothing to group: no toggle and no column.
  const withBackward = rows.some((r) => r.backwardBytesAtPeak > 0);
  const intro = h(
    'p',
    { class: 'muted' },
    `Self: bytes live at the peak whose innermost user frame is this line. Incl.: this line anywhere in the stack. ${withBackward ? `${BACKWARD_NOTE[grouping]} ` : ''}The swatch is the line's colour on the timeline. Click a row to open the line.`,
  );
  if (withBackward) root.append(groupingToolbar(grouping, onGrouping));
  root.append(intro, gridHost);
  const columns = [LINE, SELF, ...(withBackward ? [BACKWARD] : []), ...REST];
  const draw = () =>
    renderGrid(gridHost, rows, {
      columns,
      sort: getState().sitesSort,
      onSort: (sort) => {
        updateState({ sitesSort: sort });
        draw();
      },
      onActivate: (r) => {
        // `<no user frame>` and other pseudo-files have no line to open.
        if (!r.file.startsWith('<')) send({ type: 'goToSource', file: r.file, line: r.line });
      },
      rowTitle: (r) => `${r.file}:${r.line}\nClick or Enter: go to source${r.backwardBytesAtPeak > 0 ? `\n${formatBytes(r.backwardBytesAtPeak)} at peak made during backward` : ''}`,
      testId: 'sites-grid',
    });
  draw();
}

function groupingToolbar(grouping: SitesBackwardGrouping, onGrouping: (g: SitesBackwardGrouping) => void): HTMLElement {
  const dd = h('vscode-dropdown', { 'data-testid': 'sites-backward', 'aria-label': 'Backward allocations' });
  for (const [value, label] of GROUPINGS) dd.append(h('vscode-option', { value, selected: value === grouping }, label));
  dd.addEventListener('change', () => {
    const value = (dd as unknown as { value: string }).value;
    const next = GROUPINGS.find(([g]) => g === value)?.[0];
    if (next && next !== grouping) onGrouping(next);
  });
  return h('div', { class: 'toolbar' }, h('label', {}, 'Backward allocations'), dd);
}
