// Connects one snapshot webview to its document's Model: forwards queries to OpenedCapture and handles
// what needs the editor (go to source, pickers, saving files, opening dropped files).
import * as path from 'node:path';
import * as vscode from 'vscode';
import type { Model, PickleOverview } from '../../core/base/model/types';
import type { TimeWindow } from '../../core/base/model/open';
import { END_OF_TRACE, snapshotWebviewMessages, type SnapshotHostMessage, type SnapshotWebviewMessage } from '../../core/base/protocol/snapshot';
import { OpenedCapture } from '../../core/views/snapshot/openedCapture';
import { resolveFrameFile } from '../annotations/openFrame';
import { receiveMessages } from '../webview/receive';
import { loadModel, type SnapshotDocument } from './document';
import { snapshotHtml, webviewOptions } from './html';
import { registerPanel, takeTabRequest } from './tabRequests';

/** What the panel host needs from the rest of the extension. */
export interface PanelHostDeps {
  extensionUri: vscode.Uri;
  /** where dropped and remote files are copied before reading */
  scratch: vscode.Uri;
  /** feed an opened model to the editor annotations (the live part's AnnotationController.showModel) */
  showModelAnnotations?: (model: Model, where: string) => vscode.Disposable;
  /** open another file in its own snapshot editor (drag-and-drop) */
  openFile: (uri: vscode.Uri) => Thenable<unknown>;
}

export class SnapshotPanelHost implements vscode.Disposable {
  private session: OpenedCapture | undefined;
  private readonly disposables: vscode.Disposable[] = [];

  constructor(
    private readonly panel: vscode.WebviewPanel,
    private readonly doc: SnapshotDocument,
    private readonly deps: PanelHostDeps,
  ) {
    const fileName = path.posix.basename(doc.uri.path);
    panel.webview.options = webviewOptions(deps.extensionUri);
    panel.webview.html = snapshotHtml(panel.webview, deps.extensionUri, fileName);
    this.disposables.push(
      receiveMessages(panel.webview, snapshotWebviewMessages, (msg) => this.onMessage(msg)),
      panel.onDidDispose(() => this.dispose()),
      registerPanel(doc.uri, (m) => this.post([m])),
    );
    // Start reading now, while the page loads (the read runs on a worker thread); the first message
    // from the page then finds the model ready or nearly so. Failures are reported by ensureCapture.
    // A file opened by range (Note [Range-first open]) reads its overview only, and waits for the user's window.
    void doc
      .rangeFirst()
      .then((r) => (r ? undefined : doc.load()))
      .catch(() => undefined);
  }

  private post(messages: SnapshotHostMessage[]): void {
    for (const m of messages) void this.panel.webview.postMessage(m);
  }

  private captureReady: Promise<OpenedCapture | undefined> | undefined;
  private failure: SnapshotHostMessage | undefined;
  /** Note [Range-first open]: the window picker on screen, and who waits for the user's answer */
  private choosing: SnapshotHostMessage | undefined;
  private pickRange: ((window: TimeWindow | undefined) => void) | undefined;
  /** Note [Full open after the first paint]: resolves the overview's paint (the page's `overviewPainted`) */
  private overviewPainted: (() => void) | undefined;

  /** One session per panel, created once however many messages arrive while the file is being read. */
  private ensureCapture(): Promise<OpenedCapture | undefined> {
    this.captureReady ??= this.openCapture();
    return this.captureReady;
  }

  private async openCapture(): Promise<OpenedCapture | undefined> {
    const fileName = path.posix.basename(this.doc.uri.path);
    this.post([{ type: 'loading', fileName }]);
    // Note [First view]: a big pickle is read twice on the worker thread: first a pass that yields allocated and
    // reserved over the whole run (native/addon/src/overview.cpp, a fraction of the open), then the full model.
    // The page paints the overview as its first timeline and replaces it in place on `opened`, so the first
    // paint does not wait for the whole open. Small files skip the first pass (openModelFirstView).
    // Note [Full open after the first paint] (src/core/base/model/open.ts): resolved when the page says the overview
    // is painted, which starts the full open.
    const showOverview = (o: PickleOverview): Promise<void> | undefined => {
      if (this.session) return undefined;
      const painted = new Promise<void>((resolve) => (this.overviewPainted = resolve));
      this.post([{ type: 'overview', view: { fileName, devices: o.devices } }]);
      return painted;
    };
    let stopOverview = () => {};
    try {
      // Note [Range-first open]: a pickle too big to hold whole (or one the user asked to open so) shows its
      // overview with a window picker; the model is read once the user picks: that window only, or everything.
      const range = await this.doc.rangeFirst();
      let window: TimeWindow | undefined;
      if (range && !this.doc.window) {
        this.choosing = { type: 'chooseRange', view: { fileName, devices: range.overview.devices, fileBytes: range.fileBytes, bySize: range.bySize } };
        this.post([this.choosing]);
        window = await new Promise<TimeWindow | undefined>((resolve) => (this.pickRange = resolve));
        this.choosing = undefined;
        this.post([{ type: 'loading', fileName: window ? `${fileName} (the chosen range)` : fileName }]);
      } else {
        if (this.doc.overview) showOverview(this.doc.overview);
        stopOverview = this.doc.onOverview(showOverview);
      }
      const model = await this.doc.load(window);
      stopOverview();
      // A window's times read as in the full open: seconds since the file's first event (the overview's).
      const originUs = this.doc.window && this.doc.overview ? Math.min(...this.doc.overview.devices.map((d) => d.rangeT0Us)) : undefined;
      const session = new OpenedCapture(model, { fileName, displayPath, window: this.doc.window, originUs });
      // Note [First answers]: computed on a worker thread, so answering the page does not stall the extension host.
      await session.prepare().catch(() => undefined);
      this.session = session;
      // Once per document: several panels (split editors) on one file annotate its lines once.
      if (this.deps.showModelAnnotations && !this.doc.annotations) this.doc.annotations = this.deps.showModelAnnotations(model, fileName);
      if (model.format === 'gpumem-capture' && !model.ended()) this.followGrowth(this.session);
      return this.session;
    } catch (err) {
      stopOverview();
      this.failure = { type: 'loadFailed', fileName, message: loadFailure(fileName, err) };
      this.post([this.failure]);
      return undefined;
    }
  }

  /**
   * Note [Growing captures]: a capture opened while its workload still runs keeps growing; every 2 s the
   * host reads what was appended (Model.poll reads only new bytes) and tells the page, which re-asks for
   * the views it shows. Polling stops when the capture's end record arrives or the panel closes.
   */
  private followGrowth(session: OpenedCapture): void {
    const timer = setInterval(() => {
      // In the message queue: never while a worker holds the model (Note [First answers]).
      this.queue = this.queue.then(() => {
        try {
          const added = session.poll();
          const ended = session.model.ended();
          if (added > 0 || ended) this.post([{ type: 'grew', info: session.opened(), ended }]);
          if (ended) clearInterval(timer);
        } catch {
          clearInterval(timer); // the file went away; what was read stays on screen
        }
      });
    }, 2000);
    this.disposables.push({ dispose: () => clearInterval(timer) });
  }

  /** Note [First answers]: the page's messages are answered one after the other (a worker may hold the model). */
  private queue: Promise<void> = Promise.resolve();

  private onMessage(msg: SnapshotWebviewMessage): void {
    // Note [Range-first open]: the user's window (or "everything") ends the wait in openCapture.
    if (msg.type === 'overviewPainted') {
      this.overviewPainted?.();
      this.overviewPainted = undefined;
      return;
    }
    if (msg.type === 'loadRange' || msg.type === 'loadWhole') {
      const pick = this.pickRange;
      this.pickRange = undefined;
      pick?.(msg.type === 'loadRange' ? { fromUs: msg.fromUs, toUs: msg.toUs } : undefined);
      return;
    }
    // A page shown again (state restored, no retained context) while the user is choosing: the picker again.
    if (msg.type === 'ready' && this.choosing) this.post([this.choosing]);
    this.queue = this.queue.then(() => this.answer(msg)).catch(() => undefined);
  }

  private async answer(msg: SnapshotWebviewMessage): Promise<void> {
    const session = await this.ensureCapture();
    if (!session) {
      // A page shown again after a failed read asks again: tell it again.
      if (msg.type === 'ready' && this.failure && this.captureReady) this.post([this.failure]);
      return;
    }
    if (msg.type === 'ready') {
      // Note [First answers]: `opened`, the summary and the sites one event-loop turn each, so no single block of
      // the host's loop is their sum; on a 13 M-event model each is tens of ms.
      this.post([{ type: 'opened', info: session.opened() }]);
      const first = session.model.devices()[0];
      if (first !== undefined) {
        const turn = () => new Promise((r) => setImmediate(r));
        await turn();
        const markers = session.timelineMarkers(first);
        await turn();
        this.post([session.summaryMessage(first, markers)]);
        await turn();
        this.post([session.sitesMessage(first)]);
      }
      const tab = takeTabRequest(this.doc.uri);
      if (tab) this.post([{ type: 'showTab', tab }]);
      return;
    }
    // Note [First answers]: a timeline question's native part on a worker thread first (40-70 ms each at 10 M events).
    if (msg.type === 'requestTimeline') await session.prepareTimeline(msg.device, msg.t0Us, msg.t1Us, msg.buckets, msg.maxSpans, msg.owner).catch(() => undefined);
    const answer = session.handle(msg);
    if (answer) {
      this.post(answer);
      return;
    }
    // Not in the queue: these wait for the user (file dialogs), and the page's other questions must not.
    void this.editorMessage(session, msg);
  }

  private async editorMessage(session: OpenedCapture, msg: SnapshotWebviewMessage): Promise<void> {
    try {
      await this.handleEditorMessage(session, msg);
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      const requestId = 'requestId' in msg ? msg.requestId : -1;
      this.post([{ type: 'requestFailed', requestId, message }]);
      void vscode.window.showErrorMessage(`GPU Memory Lens: ${message}`);
    }
  }

  private async handleEditorMessage(session: OpenedCapture, msg: SnapshotWebviewMessage): Promise<void> {
    switch (msg.type) {
      case 'goToSource':
        return revealSource(msg.file, msg.line);
      case 'compareFile': {
        const picked = await vscode.window.showOpenDialog({
          canSelectMany: false,
          openLabel: 'Compare',
          title: 'Compare with another snapshot',
          filters: { 'Memory snapshots': ['pickle', 'gpumem'] },
        });
        if (!picked?.[0]) {
          this.post([{ type: 'requestFailed', requestId: msg.requestId, message: 'No file chosen.' }]);
          return;
        }
        const other = await loadModel(picked[0], this.deps.scratch);
        try {
          const otherName = path.posix.basename(picked[0].path);
          const labels: [string, string] = [`${path.posix.basename(this.doc.uri.path)} at the end`, `${otherName} at the end`];
          this.post([{ type: 'diff', view: session.diff(msg.requestId, msg.device, END_OF_TRACE, END_OF_TRACE, labels, other) }]);
        } finally {
          other.close();
        }
        return;
      }
      case 'exportPickle': {
        const base = path.posix.basename(this.doc.uri.path).replace(/\.(pickle|gpumem)$/, '');
        const target = await vscode.window.showSaveDialog({
          defaultUri: vscode.Uri.joinPath(this.doc.uri, '..', `${base}-export.pickle`),
          filters: { 'PyTorch memory snapshot': ['pickle'] },
          title: `Export as PyTorch snapshot (state at ${session.momentLabel(msg.atUs)})`,
        });
        if (!target) return;
        session.model.exportPickle(target.fsPath, msg.atUs === END_OF_TRACE ? undefined : msg.atUs);
        this.post([{ type: 'notice', message: `Exported ${path.posix.basename(target.path)} (opens in pytorch.org/memory_viz).` }]);
        return;
      }
      case 'exportPng': {
        const target = await vscode.window.showSaveDialog({
          defaultUri: vscode.Uri.joinPath(this.doc.uri, '..', msg.suggestedName.replace(/[\\/]/g, '_')),
          filters: { 'PNG image': ['png'] },
        });
        if (!target) return;
        const bytes = Buffer.from(msg.dataUrl.slice('data:image/png;base64,'.length), 'base64');
        await vscode.workspace.fs.writeFile(target, bytes);
        this.post([{ type: 'notice', message: `Saved ${path.posix.basename(target.path)}.` }]);
        return;
      }
      case 'openDroppedUri': {
        const uri = vscode.Uri.parse(msg.uri, true);
        await this.openDropped(uri);
        return;
      }
      case 'openDroppedBytes': {
        const name = path.posix.basename(msg.name.replace(/\\/g, '/')) || 'dropped.pickle';
        const dir = vscode.Uri.joinPath(this.deps.scratch, 'dropped');
        await vscode.workspace.fs.createDirectory(dir);
        const target = vscode.Uri.joinPath(dir, name);
        await vscode.workspace.fs.writeFile(target, Uint8Array.from(msg.bytes));
        await this.openDropped(target);
        return;
      }
      default:
        return;
    }
  }

  private async openDropped(uri: vscode.Uri): Promise<void> {
    if (!/\.(pickle|gpumem)$/i.test(uri.path)) {
      throw new Error(`${path.posix.basename(uri.path)} is not a snapshot: drop a PyTorch .pickle snapshot or a .gpumem capture.`);
    }
    await this.deps.openFile(uri);
  }

  dispose(): void {
    while (this.disposables.length) this.disposables.pop()?.dispose();
  }
}

/** Shows file:line in an editor beside the panel; the file may have moved since the snapshot was taken. */
export async function revealSource(file: string, line: number): Promise<void> {
  const uri = await resolveFrameFile(file);
  if (!uri) {
    void vscode.window.showWarningMessage(
      `GPU Memory Lens: ${file} was not found here or in the workspace. Open the folder that contains ${path.basename(file)} to jump to its lines.`,
    );
    return;
  }
  const pos = new vscode.Position(Math.max(0, line - 1), 0);
  await vscode.window.showTextDocument(uri, { selection: new vscode.Range(pos, pos), viewColumn: vscode.ViewColumn.Beside, preview: true });
}

/** Workspace-relative path for display; the recorded path when the file is elsewhere. */
function displayPath(file: string): string {
  const rel = vscode.workspace.asRelativePath(file, false);
  return rel;
}

function loadFailure(fileName: string, err: unknown): string {
  // The reader's messages already say what the file is and how to make a snapshot; add how to view it anyway.
  const why = err instanceof Error ? err.message : String(err);
  return `${fileName}: ${why}${/\.pickle$/i.test(fileName) ? ' To open it as something else: Reopen Editor With… (in the editor tab menu).' : ''}`;
}
