// The webview side of the message contract: one acquireVsCodeApi() per page, typed send, persisted state.
import type { SnapshotTab, SnapshotWebviewMessage } from '../../src/core/protocol/snapshot';

interface VsCodeApi {
  postMessage(message: unknown): void;
  getState(): unknown;
  setState(state: unknown): void;
}
declare function acquireVsCodeApi(): VsCodeApi;

/** What survives the panel being hidden (retainContextWhenHidden is off) or VS Code restarting. */
export interface PanelState {
  tab: SnapshotTab;
  device: number;
  /** visible timeline window; absent = whole trace */
  window?: { v0: number; v1: number };
  /** the moment the segment map shows (µs), absent = end of trace */
  momentUs?: number;
  sitesSort: { key: string; descending: boolean };
  compare: { a: string; b: string };
}

const DEFAULT_STATE: PanelState = {
  tab: 'summary',
  device: 0,
  sitesSort: { key: 'selfBytesAtPeak', descending: true },
  compare: { a: 'peak', b: 'end' },
};

const api = acquireVsCodeApi();

export function send(message: SnapshotWebviewMessage): void {
  api.postMessage(message);
}

let state: PanelState = { ...DEFAULT_STATE, ...((api.getState() as Partial<PanelState> | undefined) ?? {}) };

export function getState(): PanelState {
  return state;
}

export function updateState(patch: Partial<PanelState>): void {
  state = { ...state, ...patch };
  api.setState(state);
}

let nextId = 1;
export function newRequestId(): number {
  return nextId++;
}
