// What-if replay: the device's allocation stream replayed on a simulated device under each allocator policy,
// one row per policy. Computed on demand: the host replays the whole trace four times.
import { formatBytes } from '../../src/core/base/units/bytes';
import type { ReplayView } from '../../src/core/base/protocol/snapshot';
import { newRequestId, send } from './api';
import { clear, h } from './dom';
import { stackWhenTooWide } from './fit';

export interface ReplayHost {
  device(): number;
  range(): { t0Us: number; t1Us: number };
}

export class ReplayPanel {
  private pending = 0;
  private readonly result: HTMLElement;
  private readonly button: HTMLElement;

  constructor(
    root: HTMLElement,
    private readonly host: ReplayHost,
  ) {
    clear(root);
    this.button = h('vscode-button', { 'data-testid': 'replay-run' }, 'Replay under each policy');
    this.button.addEventListener('click', () => this.run());
    this.result = h('div', { 'data-testid': 'replay-result' });
    root.append(
      h(
        'p',
        { class: 'muted' },
        "Replays this trace's allocations and frees on a simulated device with each allocator policy: how much each would reserve at its peak, and whether the run would fit the device. The same as gpumem replay FILE on the command line.",
      ),
      h('div', { class: 'toolbar' }, this.button),
      this.result,
    );
  }

  /** A new device (or a grown capture) makes the shown table stale. */
  reset(): void {
    this.pending = 0;
    clear(this.result);
  }

  private run(): void {
    this.pending = newRequestId();
    clear(this.result);
    this.result.append(h('div', { class: 'loading' }, h('vscode-progress-ring'), h('span', {}, 'Replaying…')));
    send({ type: 'requestReplay', requestId: this.pending, device: this.host.device() });
  }

  failed(requestId: number, message: string): boolean {
    if (requestId !== this.pending || requestId === 0) return false;
    clear(this.result);
    this.result.append(h('p', { class: 'error', 'data-testid': 'replay-error' }, message));
    return true;
  }

  onData(view: ReplayView): void {
    if (view.requestId !== this.pending) return;
    clear(this.result);
    const { t0Us } = this.host.range();
    const at = (tUs: number) => `${((tUs - t0Us) / 1e6).toFixed(3)} s`;
    const cap = view.capacityBytes === null ? null : formatBytes(view.capacityBytes);
    this.result.append(
      h(
        'p',
        { 'data-testid': 'replay-capacity' },
        cap === null
          ? `The device's size is ${view.capacitySource}; the replay checks no out-of-memory (gpumem replay --capacity SIZE does).`
          : `Simulated device: ${cap} (from ${view.capacitySource}).`,
      ),
    );
    const table = h('table', { class: 'replay-table', 'data-testid': 'replay-table' });
    const head = h('tr', {});
    for (const title of ['Policy', 'Peak reserved', 'Peak reserved / allocated', cap === null ? 'Out of memory' : `Out of memory at ${cap}`, 'empty_cache() at a marker']) {
      head.append(h('th', { scope: 'col' }, title));
    }
    table.append(h('thead', {}, head));
    const body = h('tbody');
    for (const r of view.rows) {
      const own = r.policy === view.ownPolicy;
      const oom = cap === null ? 'not checked' : r.oom ? `yes, at ${at(r.oom.atUs)} (${r.oom.cause})` : 'no';
      const marker = r.bestMarkerReleaseBytes > 0 ? `up to ${formatBytes(r.bestMarkerReleaseBytes)}${r.bestMarkerName ? ` at "${r.bestMarkerName}"` : ''}` : 'nothing';
      body.append(
        h(
          'tr',
          { 'data-policy': r.policy, 'data-peak-reserved': r.peakReservedBytes, 'data-oom': r.oom ? r.oom.atUs : 'no', class: own ? 'own-policy' : undefined },
          h('th', { scope: 'row' }, r.label + (own ? ' (ran)' : '')),
          h('td', { class: 'num', title: `${r.peakReservedBytes.toLocaleString('en-US')} bytes, at ${at(r.peakAtUs)}` }, formatBytes(r.peakReservedBytes)),
          h('td', { class: 'num' }, Number.isFinite(r.ratio) && r.ratio > 0 ? `×${r.ratio.toFixed(3)}` : '—'),
          h('td', { title: r.oom?.sentence ?? '' }, oom),
          h('td', {}, marker),
        ),
      );
    }
    table.append(body);
    this.result.append(table);
    stackWhenTooWide(table);
    const ooms = view.rows.filter((r) => r.oom);
    for (const r of ooms) this.result.append(h('p', { class: 'muted', 'data-testid': `replay-oom-${r.policy}` }, `${r.label}: ${r.oom?.sentence ?? ''}`));
  }
}
