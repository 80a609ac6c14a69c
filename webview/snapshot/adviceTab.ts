// "What to do": `gpumem advise` in the snapshot panel. Each item with its predicted peak, how
// sure it is, its evidence and what it assumes; then what was not offered and why. Computed on demand (the
// host replays the trace under every policy); the OOM notification's "Open Advice" opens this tab and runs it.
import type { AdviceItem, Predicted } from '../../src/core/base/protocol/advice';
import { formatBytes } from '../../src/core/base/units/bytes';
import type { AdviceView } from '../../src/core/base/protocol/snapshot';
import { newRequestId, send } from './api';
import { clear, h } from './dom';

export interface AdviceHost {
  device(): number;
}

function predictedText(p: Predicted | null): string[] {
  if (!p) return [];
  const out: string[] = [];
  if (p.peakAllocatedBytes !== undefined) out.push(`Predicted peak allocated ${formatBytes(p.peakAllocatedBytes)} (now ${formatBytes(p.currentPeakAllocatedBytes ?? 0)})`);
  if (p.peakReservedBytes !== undefined) out.push(`Predicted peak reserved ${formatBytes(p.peakReservedBytes)} (now ${formatBytes(p.currentPeakReservedBytes ?? 0)})`);
  return out;
}

function list(items: string[], testid: string): HTMLElement {
  const ul = h('ul', { 'data-testid': testid });
  for (const t of items) ul.append(h('li', {}, t));
  return ul;
}

export class AdvicePanel {
  private pending = 0;
  private shownFor: number | undefined;
  private readonly result: HTMLElement;

  constructor(
    root: HTMLElement,
    private readonly host: AdviceHost,
    private readonly openLine: (file: string, line: number) => void,
  ) {
    clear(root);
    const button = h('vscode-button', { 'data-testid': 'advice-run' }, 'Compute advice');
    button.addEventListener('click', () => this.run());
    this.result = h('div', { 'data-testid': 'advice-result' });
    root.append(
      h(
        'p',
        { class: 'muted' },
        "What to change, from this run's own numbers: each item with its predicted peak, how sure it is, its evidence and what it assumes. Nothing is advised that the data does not show. The same as gpumem advise FILE on the command line.",
      ),
      h('div', { class: 'toolbar' }, button),
      this.result,
    );
  }

  /** The tab was shown: compute once per device (advice replays the whole trace). */
  shown(): void {
    if (this.shownFor !== this.host.device() && this.pending === 0) this.run();
  }

  reset(): void {
    this.pending = 0;
    this.shownFor = undefined;
    clear(this.result);
  }

  private run(): void {
    this.pending = newRequestId();
    this.shownFor = this.host.device();
    clear(this.result);
    this.result.append(h('div', { class: 'loading' }, h('vscode-progress-ring'), h('span', {}, 'Computing advice…')));
    send({ type: 'requestAdvice', requestId: this.pending, device: this.host.device() });
  }

  failed(requestId: number, message: string): boolean {
    if (requestId !== this.pending || requestId === 0) return false;
    this.pending = 0;
    clear(this.result);
    this.result.append(h('p', { class: 'error', 'data-testid': 'advice-error' }, message));
    return true;
  }

  onData(view: AdviceView): void {
    if (view.requestId !== this.pending) return;
    this.pending = 0;
    clear(this.result);
    const a = view.advice;
    if (!a.items.length) this.result.append(h('p', { 'data-testid': 'advice-none' }, 'Nothing to advise that this data shows.'));
    a.items.forEach((item, i) => this.result.append(this.item(item, i)));
    if (a.notOffered.length) {
      this.result.append(h('h4', {}, 'Not offered'), list(a.notOffered, 'advice-not-offered'));
    }
  }

  private item(item: AdviceItem, i: number): HTMLElement {
    const box = h('section', { class: 'advice-item', 'data-testid': `advice-item-${i}`, 'data-kind': item.kind, 'data-confidence': item.confidence });
    box.append(
      h('h3', {}, `${i + 1}. ${item.title}`),
      h('p', {}, h('strong', {}, 'Do: '), item.action),
    );
    for (const line of predictedText(item.predicted)) box.append(h('p', { class: 'advice-predicted', 'data-testid': 'advice-predicted' }, line));
    box.append(h('p', { class: 'muted' }, `Confidence: ${item.confidence}`));
    if (item.apply?.file && item.apply.line) {
      const { file, line } = item.apply;
      const link = h('vscode-link', { 'data-testid': 'advice-line', href: '#' }, `Go to ${file.split(/[\\/]/).pop()}:${line}`);
      link.addEventListener('click', (e) => {
        e.preventDefault();
        this.openLine(file, line);
      });
      box.append(h('p', {}, link));
    }
    box.append(h('h4', {}, 'Evidence'), list(item.evidence, 'advice-evidence'), h('h4', {}, 'Assumes'), list(item.assumptions, 'advice-assumptions'));
    return box;
  }
}
