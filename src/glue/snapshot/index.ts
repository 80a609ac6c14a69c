// Entry point of the snapshot feature: the Open Snapshot… command and the two custom editors
// (*.gpumem captures, *.pickle PyTorch snapshots). The composition root (src/extension.ts) calls
// registerSnapshotFeatures once from activate(); everything created here is pushed on context.subscriptions.
import * as vscode from 'vscode';
import type { Model } from '../../core/base/model/types';
import { SnapshotDocument } from './document';
import { SnapshotPanelHost } from './panelHost';
import { maybeAskPickleDefault } from './pickleDefault';
import { openRanksPanel } from './ranksPanel';
import { requestRangeFirst, takeRangeFirstRequest } from './tabRequests';

export const CAPTURE_EDITOR = 'gpuMemoryLens.captureEditor';
export const SNAPSHOT_EDITOR = 'gpuMemoryLens.snapshotEditor';

export interface SnapshotFeatureOptions {
  /** AnnotationController.showModel: annotate source lines from an opened snapshot while it is open */
  showModelAnnotations?: (model: Model, where: string) => vscode.Disposable;
}

export function registerSnapshotFeatures(context: vscode.ExtensionContext, options: SnapshotFeatureOptions = {}): void {
  const openFile = (uri: vscode.Uri) => vscode.commands.executeCommand('vscode.openWith', uri, viewTypeFor(uri));
  const provider = new SnapshotEditorProvider({
    extensionUri: context.extensionUri,
    scratch: context.globalStorageUri,
    showModelAnnotations: options.showModelAnnotations,
    openFile,
  });
  // Note [No retained context]: retainContextWhenHidden stays false (it keeps a whole renderer alive per
  // hidden tab); the webview restores its tab, window and selection from getState() when shown again.
  const editorOptions = { webviewOptions: { retainContextWhenHidden: false }, supportsMultipleEditorsPerDocument: true };
  context.subscriptions.push(
    vscode.window.registerCustomEditorProvider(CAPTURE_EDITOR, provider, editorOptions),
    vscode.window.registerCustomEditorProvider(SNAPSHOT_EDITOR, provider, editorOptions),
    vscode.commands.registerCommand('gpuMemoryLens.openSnapshot', async (uri?: unknown) => {
      const target = await fileOrAsk(uri, {
        openLabel: 'Open Snapshot',
        title: 'Open a PyTorch memory snapshot or a GPU Memory Lens capture',
        filters: { 'Memory snapshots': ['pickle', 'gpumem'] },
      });
      if (!target) return;
      await openFile(target);
      if (viewTypeFor(target) === SNAPSHOT_EDITOR) void maybeAskPickleDefault(context);
    }),
    // Note [Range-first open]: a pickle's overview first, then only the time window the user selects on it.
    vscode.commands.registerCommand('gpuMemoryLens.openSnapshotRange', async (uri?: unknown) => {
      const target = await fileOrAsk(uri, {
        openLabel: 'Choose Range',
        title: 'Open a time window of a PyTorch memory snapshot (its overview first, then the window you select)',
        filters: { 'PyTorch memory snapshots': ['pickle'] },
      });
      if (!target) return;
      requestRangeFirst(target);
      await vscode.commands.executeCommand('vscode.openWith', target, SNAPSHOT_EDITOR);
    }),
    // A session folder (or several: a multi-node job's folders) with one capture per rank, side by side.
    vscode.commands.registerCommand('gpuMemoryLens.openRanks', async (uri?: unknown, selected?: unknown) => {
      const picked = Array.isArray(selected) && selected.every((u) => u instanceof vscode.Uri) ? (selected as vscode.Uri[]) : uri instanceof vscode.Uri ? [uri] : undefined;
      const folders =
        picked ??
        (await vscode.window.showOpenDialog({
          canSelectFiles: false,
          canSelectFolders: true,
          canSelectMany: true,
          openLabel: 'Open Ranks',
          title: 'Open the session folder(s) of a multi-rank run (one capture per rank)',
        }));
      if (folders?.length) openRanksPanel(context.extensionUri, folders, openFile);
    }),
  );
}

export function viewTypeFor(uri: vscode.Uri): string {
  return uri.path.toLowerCase().endsWith('.gpumem') ? CAPTURE_EDITOR : SNAPSHOT_EDITOR;
}

class SnapshotEditorProvider implements vscode.CustomReadonlyEditorProvider<SnapshotDocument> {
  constructor(private readonly deps: ConstructorParameters<typeof SnapshotPanelHost>[2]) {}

  openCustomDocument(uri: vscode.Uri): SnapshotDocument {
    return new SnapshotDocument(uri, this.deps.scratch, takeRangeFirstRequest(uri));
  }

  resolveCustomEditor(document: SnapshotDocument, panel: vscode.WebviewPanel): void {
    // The host disposes itself with the panel.
    new SnapshotPanelHost(panel, document, this.deps);
  }
}

/** The file a command was given (the explorer's or the editor's Uri), else one the user picks. */
async function fileOrAsk(uri: unknown, dialog: vscode.OpenDialogOptions): Promise<vscode.Uri | undefined> {
  if (uri instanceof vscode.Uri) return uri;
  return (await vscode.window.showOpenDialog({ ...dialog, canSelectMany: false }))?.[0];
}
