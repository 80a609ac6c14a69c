// Compare: what grew and what shrank, by line, between two moments of this file or against another file.
import { formatBytes, formatBytesDelta } from '../../src/core/base/units/bytes';
import type { DiffRow, DiffView } from '../../src/core/base/protocol/snapshot';
import { END_OF_TRACE } from '../../src/core/base/protocol/snapshot';
import { getState, newRequestId, send, updateState } from './api';
import { clear, h } from './dom';
import { renderGrid, type Column } from './grid';

export interface CompareHost {
  device(): number;
  range(): { t0Us: number; t1Us: number };
  peakUs(): number | undefined;
  momentUs(): number | undefined;
}

const MOMENTS: [string, string][] = [
  ['start', 'Start of the trace'],
  ['peak', 'Peak allocated'],
  ['moment', 'Selected moment (timeline / segment map)'],
  ['end', 'End of the trace'],
];

const COLUMNS: Column<DiffRow>[] = [
  { key: 'site', title: 'Line', text: (r) => `${r.displayFile}:${r.line}`, sortValue: (r) => `${r.displayFile}:${String(r.line).padStart(8, '0')}` },
  { key: 'beforeBytes', title: 'A', text: (r) => formatBytes(r.beforeBytes), sortValue: (r) => r.beforeBytes, numeric: true },
  { key: 'afterBytes', title: 'B', text: (r) => formatBytes(r.afterBytes), sortValue: (r) => r.afterBytes, numeric: true },
  { key: 'deltaBytes', title: 'Change', text: (r) => formatBytesDelta(r.deltaBytes), sortValue: (r) => r.deltaBytes, numeric: true },
];

export class ComparePanel {
  private pending = 0;
  private readonly result: HTMLElement;
  private sort = { key: 'deltaBytes', descending: true };

  constructor(
    root: HTMLElement,
    private readonly host: CompareHost,
  ) {
    clear(root);
    const dropdown = (which: 'a' | 'b') => {
      const dd = h('vscode-dropdown', { 'data-testid': `compare-${which}` });
      for (const [value, label] of MOMENTS) dd.append(h('vscode-option', { value, selected: getState().compare[which] === value }, label));
      dd.addEventListener('change', () => updateState({ compare: { ...getState().compare, [which]: (dd as unknown as { value: string }).value } }));
      return dd;
    };
    const run = h('vscode-button', { 'data-testid': 'compare-moments' }, 'Compare moments');
    run.addEventListener('click', () => this.compareMoments());
    const other = h('vscode-button', { appearance: 'secondary', 'data-testid': 'compare-file' }, 'Compare with another snapshot…');
    other.addEventListener('click', () => {
      this.pending = newRequestId();
      this.busy('Choose a snapshot to compare with…');
      send({ type: 'compareFile', requestId: this.pending, device: this.host.device() });
    });
    this.result = h('div', { 'data-testid': 'compare-result' });
    root.append(
      h('p', { class: 'muted' }, 'Bytes live by source line at two moments (leaks across iterations), or at the end of this file and of another (before/after an optimisation).'),
      h('div', { class: 'toolbar' }, h('label', {}, 'A'), dropdown('a'), h('label', {}, 'B'), dropdown('b'), run, other),
      this.result,
    );
  }

  private momentUs(key: string): number {
    const { t0Us } = this.host.range();
    if (key === 'start') return t0Us;
    if (key === 'peak') return this.host.peakUs() ?? END_OF_TRACE;
    if (key === 'moment') return this.host.momentUs() ?? END_OF_TRACE;
    return END_OF_TRACE;
  }

  private compareMoments(): void {
    const { a, b } = getState().compare;
    this.pending = newRequestId();
    this.busy('Comparing…');
    send({ type: 'compareMoments', requestId: this.pending, device: this.host.device(), aUs: this.momentUs(a), bUs: this.momentUs(b) });
  }

  private busy(text: string): void {
    clear(this.result);
    this.result.append(h('p', { class: 'muted' }, text));
  }

  failed(requestId: number, message: string): boolean {
    if (requestId !== this.pending) return false;
    clear(this.result);
    this.result.append(h('p', { class: 'error' }, message));
    return true;
  }

  onDiff(view: DiffView): void {
    if (view.requestId !== this.pending) return;
    clear(this.result);
    const grid = h('div');
    this.result.append(
      h(
        'p',
        { 'data-testid': 'compare-headline' },
        `A = ${view.beforeLabel}, B = ${view.afterLabel}: grew ${formatBytes(view.grewBytes)}, shrank ${formatBytes(view.shrankBytes)} across ${view.rows.length} lines.`,
      ),
      grid,
    );
    const draw = () =>
      renderGrid(grid, view.rows, {
        columns: COLUMNS,
        sort: this.sort,
        onSort: (s) => {
          this.sort = s;
          draw();
        },
        onActivate: (r) => {
        // `<no user frame>` and other pseudo-files have no line to open.
        if (!r.file.startsWith('<')) send({ type: 'goToSource', file: r.file, line: r.line });
      },
        rowTitle: (r) => `${r.file}:${r.line}`,
        testId: 'compare-grid',
      });
    draw();
  }
}
