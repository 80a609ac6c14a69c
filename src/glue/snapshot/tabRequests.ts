// Opening a snapshot panel on a given tab from elsewhere in the extension (the OOM notification's "Open
// Advice" opens the capture on "What to do"). Panels open asynchronously (custom editors), so the wish is
// kept per file until that file's page says it is ready; a panel already open on the file is told at once.
import type * as vscode from 'vscode';
import type { SnapshotHostMessage, SnapshotTab } from '../../core/base/protocol/snapshot';

const pending = new Map<string, SnapshotTab>();
const open = new Map<string, Set<(m: SnapshotHostMessage) => void>>();

/** Ask the next (or every open) panel of `uri` to show `tab`. */
export function requestTab(uri: vscode.Uri, tab: SnapshotTab): void {
  const posts = open.get(uri.toString());
  if (posts?.size) for (const post of posts) post({ type: 'showTab', tab });
  else pending.set(uri.toString(), tab);
}

/** A panel of `uri` whose page is ready: the tab asked for it, once. */
export function takeTabRequest(uri: vscode.Uri): SnapshotTab | undefined {
  const tab = pending.get(uri.toString());
  pending.delete(uri.toString());
  return tab;
}

/** Registers an open panel's post function; dispose when the panel closes. */
export function registerPanel(uri: vscode.Uri, post: (m: SnapshotHostMessage) => void): vscode.Disposable {
  const key = uri.toString();
  const set = open.get(key) ?? new Set();
  set.add(post);
  open.set(key, set);
  return {
    dispose: () => {
      set.delete(post);
      if (!set.size) open.delete(key);
    },
  };
}

const rangeFirst = new Set<string>();

/** Note [Range-first open]: the next document opened on `uri` shows its overview and asks for a window first. */
export function requestRangeFirst(uri: vscode.Uri): void {
  rangeFirst.add(uri.toString());
}

/** Whether range-first was asked for `uri` (once). */
export function takeRangeFirstRequest(uri: vscode.Uri): boolean {
  return rangeFirst.delete(uri.toString());
}
