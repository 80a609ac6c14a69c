// The snapshot panel's side of the message contract: typed send and persisted state, over the shared
// webview/common/api.ts (one acquireVsCodeApi() per page); host messages are checked in main.ts.
import type { SitesBackwardGrouping, SnapshotTab, SnapshotWebviewMessage } from '../../src/core/base/protocol/snapshot';
import { panelApi } from '../common/api';

/** What survives the panel being hidden (retainContextWhenHidden is off) or VS Code restarting. */
export interface PanelState {
  tab: SnapshotTab;
  device: number;
  /** visible timeline window; absent = whole trace */
  window?: { v0: number; v1: number };
  /** the moment the segment map shows (µs), absent = end of trace */
  momentUs?: number;
  sitesSort: { key: string; descending: boolean };
  /** Top sites: backward allocations on the forward line (the default) or the backward() caller's line */
  sitesBackward: SitesBackwardGrouping;
  compare: { a: string; b: string };
}

const DEFAULT_STATE: PanelState = {
  tab: 'summary',
  device: 0,
  sitesSort: { key: 'selfBytesAtPeak', descending: true },
  sitesBackward: 'forward',
  compare: { a: 'peak', b: 'end' },
};

const api = panelApi<SnapshotWebviewMessage, PanelState>();

export function send(message: SnapshotWebviewMessage): void {
  api.send(message);
}

let state: PanelState = { ...DEFAULT_STATE, ...(api.savedState() ?? {}) };

export function getState(): PanelState {
  return state;
}

export function updateState(patch: Partial<PanelState>): void {
  state = { ...state, ...patch };
  api.saveState(state);
}

let nextId = 1;
export function newRequestId(): number {
  return nextId++;
}
