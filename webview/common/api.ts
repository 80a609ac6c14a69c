// The webview side of a panel's message contract, shared by every panel: the page's one
// acquireVsCodeApi(), a send typed by the panel's webview → host messages, persisted state, and a
// listener that checks each host message against the panel's protocol before the panel sees it
// (Note [Message schemas] in src/core/base/protocol/schema.ts).
import type { Protocol } from '../../src/core/base/protocol/schema';

interface VsCodeApi {
  postMessage(message: unknown): void;
  getState(): unknown;
  setState(state: unknown): void;
}
declare function acquireVsCodeApi(): VsCodeApi;

let acquired: VsCodeApi | undefined;
/** acquireVsCodeApi() may be called once per page: every module goes through this. */
function vscodeApi(): VsCodeApi {
  acquired ??= acquireVsCodeApi();
  return acquired;
}

export interface PanelApi<Out, State> {
  /** Posts a message to the extension host (typed by the panel's webview → host protocol). */
  send(message: Out): void;
  /** What the panel last saved (a restored panel), or undefined. */
  savedState(): Partial<State> | undefined;
  saveState(state: State): void;
}

export function panelApi<Out, State>(): PanelApi<Out, State> {
  const api = vscodeApi();
  return {
    send: (message) => api.postMessage(message),
    savedState: () => {
      const s = api.getState();
      return typeof s === 'object' && s !== null ? (s as Partial<State>) : undefined;
    },
    saveState: (state) => api.setState(state),
  };
}

/**
 * Delivers each host message that passes the protocol's check to `handle`; one that does not is dropped
 * and its reason logged to the webview's console (Help → Toggle Developer Tools).
 */
export function onHostMessage<M extends { type: string }>(protocol: Protocol<M>, handle: (message: M) => void): void {
  window.addEventListener('message', (event: MessageEvent) => {
    const checked = protocol.check(event.data);
    if (!checked.ok) {
      console.warn(`GPU Memory Lens: dropped a message: ${checked.reason}`);
      return;
    }
    handle(checked.message);
  });
}
