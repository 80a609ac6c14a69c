// Messages from a webview reach a panel host only through here: each is checked against the panel's
// protocol (Note [Message schemas] in src/core/base/protocol/schema.ts), and one that fails is dropped with its
// reason logged (the extension host's log), never half-handled.
import type * as vscode from 'vscode';
import type { Protocol } from '../../core/base/protocol/schema';

export type DropLog = (line: string) => void;

const defaultLog: DropLog = (line) => console.warn(line);

export function receiveMessages<M extends { type: string }>(
  webview: Pick<vscode.Webview, 'onDidReceiveMessage'>,
  protocol: Protocol<M>,
  handle: (message: M) => unknown,
  log: DropLog = defaultLog,
): vscode.Disposable {
  return webview.onDidReceiveMessage((raw: unknown) => {
    const checked = protocol.check(raw);
    if (!checked.ok) {
      log(`GPU Memory Lens: dropped a message: ${checked.reason}`);
      return;
    }
    void handle(checked.message);
  });
}
