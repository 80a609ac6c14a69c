// One opened snapshot file (a PyTorch pickle or a .gpumem capture) shared by every panel showing it.
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { openModelAsync, openModelFirstView } from '../../core/base/model/open';
import type { Model, PickleOverview } from '../../core/base/model/types';

export class SnapshotDocument implements vscode.CustomDocument {
  private loaded: Promise<Model> | undefined;
  private model: Model | undefined;
  /** the editor annotations fed from this file while it is open */
  annotations: vscode.Disposable | undefined;
  /** Note [First view]: the whole run's overview, once read (big pickles, before the model) */
  overview: PickleOverview | undefined;
  private readonly overviewListeners = new Set<(o: PickleOverview) => void>();

  /** Calls `listener` when the overview is read (not if it already was: see `overview`); returns the unsubscribe. */
  onOverview(listener: (o: PickleOverview) => void): () => void {
    this.overviewListeners.add(listener);
    return () => this.overviewListeners.delete(listener);
  }

  constructor(
    readonly uri: vscode.Uri,
    private readonly scratch: vscode.Uri,
  ) {}

  /** The model, read on first use, off the extension host's thread (callers show "loading" meanwhile). */
  load(): Promise<Model> {
    const overviewRead = (o: PickleOverview) => {
      this.overview = o;
      for (const listener of [...this.overviewListeners]) listener(o);
    };
    this.loaded ??= loadModel(this.uri, this.scratch, overviewRead).then((m) => {
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

/**
 * Opens `uri` as a Model. The reader needs a local path: files from other schemes (a remote workspace's
 * virtual file system) are copied into extension storage first.
 */
export async function loadModel(uri: vscode.Uri, scratch: vscode.Uri, onOverview?: (o: PickleOverview) => void): Promise<Model> {
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
  // The reader parses on a worker thread: the extension host keeps answering (and the page keeps painting).
  // A big pickle's overview comes first (Note [First view] in src/glue/snapshot/panelHost.ts).
  return await (onOverview ? openModelFirstView(file, onOverview) : openModelAsync(file));
}
