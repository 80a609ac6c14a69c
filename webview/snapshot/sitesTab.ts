// Top allocation sites: the Model's line statistics, the same numbers as the editor annotations.
import { formatBytes } from '../../src/core/base/units/bytes';
import type { SiteRow } from '../../src/core/base/protocol/snapshot';
import { getState, send, updateState } from './api';
import { clear, h } from './dom';
import { ownerCss } from './palette';
import { renderGrid, type Column } from './grid';

const COLUMNS: Column<SiteRow>[] = [
  {
    key: 'site',
    title: 'Line',
    text: (r) => `${r.displayFile}:${r.line}`,
    sortValue: (r) => `${r.displayFile}:${String(r.line).padStart(8, '0')}`,
    // The timeline's colour for this line (Note [Owner colours]); ≥ 12 is "other lines".
    swatch: (r) => (r.ownerGroup >= 0 ? ownerCss(Math.min(r.ownerGroup, 12), 14) : undefined),
  },
  { key: 'selfBytesAtPeak', title: 'At peak (self)', text: (r) => formatBytes(r.selfBytesAtPeak), sortValue: (r) => r.selfBytesAtPeak, numeric: true },
  { key: 'inclusiveBytesAtPeak', title: 'At peak (incl.)', text: (r) => formatBytes(r.inclusiveBytesAtPeak), sortValue: (r) => r.inclusiveBytesAtPeak, numeric: true },
  { key: 'totalAllocatedBytes', title: 'Total allocated', text: (r) => formatBytes(r.totalAllocatedBytes), sortValue: (r) => r.totalAllocatedBytes, numeric: true },
  { key: 'allocCount', title: 'Count', text: (r) => r.allocCount.toLocaleString('en-US'), sortValue: (r) => r.allocCount, numeric: true },
  { key: 'liveNowBytes', title: 'Live at end', text: (r) => formatBytes(r.liveNowBytes), sortValue: (r) => r.liveNowBytes, numeric: true },
];

export function renderSites(root: HTMLElement, rows: readonly SiteRow[]): void {
  clear(root);
  const gridHost = h('div');
  root.append(
    h(
      'p',
      { class: 'muted' },
      'Self: bytes live at the peak whose innermost user frame is this line. Incl.: this line anywhere in the stack. The swatch is the line\'s colour on the timeline. Click a row to open the line.',
    ),
    gridHost,
  );
  const draw = () =>
    renderGrid(gridHost, rows, {
      columns: COLUMNS,
      sort: getState().sitesSort,
      onSort: (sort) => {
        updateState({ sitesSort: sort });
        draw();
      },
      onActivate: (r) => {
        // `<no user frame>` and other pseudo-files have no line to open.
        if (!r.file.startsWith('<')) send({ type: 'goToSource', file: r.file, line: r.line });
      },
      rowTitle: (r) =>
        `${r.file}:${r.line}\nClick or Enter: go to source${r.backwardBytesAtPeak > 0 ? `\n${formatBytes(r.backwardBytesAtPeak)} at peak from backward()` : ''}`,
      testId: 'sites-grid',
    });
  draw();
}
