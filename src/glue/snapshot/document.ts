// One opened snapshot file (a PyTorch pickle or a .gpumem capture) shared by every panel showing it.
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { openModelAsync, openModelFirstView, openOverviewAsync, RANGE_FIRST_MIN_BYTES, type TimeWindow } from '../../core/base/model/open';
import type { Model, PickleOverview } from '../../core/base/model/types';

export class SnapshotDocument implements vscode.CustomDocument {
  private loaded: Promise<Model> | undefined;
  private model: Model | undefined;
  /** the editor annotations fed from this file while it is open */
  annotations: vscode.Disposable | undefined;
  /** Note [First view]: the whole run's overview, once read (big pickles, before the model) */
  overview: PickleOverview | undefined;
  private readonly overviewListeners = new Set<(o: PickleOverview) => Promise<void> | undefined | void>();

  /**
   * Calls `listener` when the overview is read (not if it already was: see `overview`); returns the unsubscribe.
   * The listener's promise, if any, says the overview is painted (Note [Full open after the first paint]).
   */
  onOverview(listener: (o: PickleOverview) => Promise<void> | undefined | void): () => void {
    this.overviewListeners.add(listener);
    return () => this.overviewListeners.delete(listener);
  }

  /**
   * @param rangeFirstRequested Note [Range-first open]: the user asked to pick a window before loading (the
   *   "Open Snapshot by Time Range…" command); files of RANGE_FIRST_MIN_BYTES and more open so by default
   */
  constructor(
    readonly uri: vscode.Uri,
    private readonly scratch: vscode.Uri,
    readonly rangeFirstRequested = false,
  ) {}

  private firstStep: Promise<RangeFirst | undefined> | undefined;
  /** the window the model holds, once a range was loaded (Note [Range-first open]) */
  window: TimeWindow | undefined;

  /**
   * Note [Range-first open]: whether this file opens by range (a pickle of RANGE_FIRST_MIN_BYTES or more, or one the
   * user asked to open so): then the overview is read alone and the model waits for `load(window)`. Undefined:
   * the file opens whole (a capture, a smaller pickle, or one whose overview cannot be read).
   */
  rangeFirst(): Promise<RangeFirst | undefined> {
    this.firstStep ??= (async () => {
      if (this.loaded || uriIsCapture(this.uri)) return undefined;
      let fileBytes = 0;
      try {
        fileBytes = (await vscode.workspace.fs.stat(this.uri)).size;
      } catch {
        return undefined; // load() says what is wrong with the file
      }
      const bySize = fileBytes >= RANGE_FIRST_MIN_BYTES;
      if (!bySize && !this.rangeFirstRequested) return undefined;
      const overview = await openOverviewAsync(await this.localPath());
      if (!overview?.devices.length) return undefined;
      this.overview = overview;
      return { overview, fileBytes, bySize };
    })();
    return this.firstStep;
  }

  private local: Promise<string> | undefined;
  private localPath(): Promise<string> {
    this.local ??= localFile(this.uri, this.scratch);
    return this.local;
  }

  /**
   * The model, read on first use, off the extension host's thread (callers show "loading" meanwhile). With a
   * window, that window of the file only (Note [Range-first open]); the first call decides for every panel.
   */
  load(window?: TimeWindow): Promise<Model> {
    const overviewRead = (o: PickleOverview) => {
      this.overview = o;
      // Note [Full open after the first paint]: the full open starts once one panel painted the overview (none
      // listening: at once).
      const painted = [...this.overviewListeners].map((listener) => listener(o)).filter((p): p is Promise<void> => !!p);
      return painted.length ? Promise.race(painted) : undefined;
    };
    if (!this.loaded && window) this.window = { ...window };
    this.loaded ??= (
      window
        ? this.localPath().then((file) => openModelAsync(file, true, window))
        : // the overview already on screen (a range-first panel where the user chose the whole file): not read again
          this.localPath().then((file) => (this.overview ? openModelAsync(file, true) : openModelFirstView(file, overviewRead)))
    ).then((m) => {
      // Closed while the worker was still reading: nobody will use (or close) this model.
      if (this.disposed) m.close();
      else this.model = m;
      return m;
    });
    return this.loaded;
  }

  private disposed = false;

  dispose(): void {
    this.disposed = true;
    this.annotations?.dispose();
    this.annotations = undefined;
    this.model?.close();
    this.model = undefined;
  }
}

export interface RangeFirst {
  overview: PickleOverview;
  fileBytes: number;
  /** chosen because of the size (false: the user asked) */
  bySize: boolean;
}

const uriIsCapture = (uri: vscode.Uri) => /\.gpumem$/i.test(uri.path);

/**
 * Opens `uri` as a Model. The reader needs a local path: files from other schemes (a remote workspace's
 * virtual file system) are copied into extension storage first.
 */
export async function loadModel(uri: vscode.Uri, scratch: vscode.Uri, onOverview?: (o: PickleOverview) => void): Promise<Model> {
  const file = await localFile(uri, scratch);
  // The reader parses on a worker thread: the extension host keeps answering (and the page keeps painting).
  // A big pickle's overview comes first (Note [First view] in src/glue/snapshot/panelHost.ts).
  return await (onOverview ? openModelFirstView(file, onOverview) : openModelAsync(file));
}

/** A local path the reader can open: files from other schemes are copied into extension storage first. */
async function localFile(uri: vscode.Uri, scratch: vscode.Uri): Promise<string> {
  let file = uri.fsPath;
  if (uri.scheme !== 'file') {
    const bytes = await vscode.workspace.fs.readFile(uri);
    const dir = vscode.Uri.joinPath(scratch, 'opened');
    await vscode.workspace.fs.createDirectory(dir);
    const local = vscode.Uri.joinPath(dir, path.posix.basename(uri.path));
    await vscode.workspace.fs.writeFile(local, bytes);
    file = local.fsPath;
  } else if (!fs.existsSync(file)) {
    throw new Error(`${file} does not exist.`);
  }
  return file;
}
