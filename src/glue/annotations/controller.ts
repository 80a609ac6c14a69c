// End-of-line memory annotations in Python editors: a fixed set of decoration types (one per colour
// tier, plus the overview-ruler mark), created once and given many ranges; recomputed at most twice a
// second while a capture grows. No gutter icons: they would hide breakpoints.
import * as vscode from 'vscode';
import type { Model } from '../../core/model/types';
import { lineCategories } from '../../core/categories';
import { computeAnnotations, hoverMarkdown, matchDocument, OPEN_FRAME_COMMAND, type AnnotationTier, type LineAnnotation } from '../../core/annotations';
import { Throttle } from '../throttle';

/** A model whose line statistics feed the annotations, with how to name it in hovers. */
export interface AnnotationSource {
  model: Model;
  /** "rank 1" for multi-process sessions, "" otherwise */
  where: string;
}

interface Shown extends LineAnnotation {
  hover: string;
}

const TIERS: readonly AnnotationTier[] = ['high', 'medium', 'low'];

export class AnnotationController implements vscode.Disposable {
  private readonly tierTypes = new Map<AnnotationTier, vscode.TextEditorDecorationType>();
  private readonly rulerType: vscode.TextEditorDecorationType;
  private readonly disposables: vscode.Disposable[] = [];
  private readonly throttle = new Throttle(500, () => this.recompute());
  private readonly reopened = new Set<AnnotationSource>();
  /** frame file path → annotations of that file */
  private byFile = new Map<string, Shown[]>();
  private enabled: boolean;

  constructor(private readonly liveSources: () => AnnotationSource[]) {
    for (const tier of TIERS) {
      this.tierTypes.set(
        tier,
        vscode.window.createTextEditorDecorationType({
          after: { color: new vscode.ThemeColor(`gpuMemoryLens.annotation.${tier}`), margin: '0 0 0 2.5em', fontStyle: 'italic' },
          rangeBehavior: vscode.DecorationRangeBehavior.ClosedClosed,
        }),
      );
    }
    this.rulerType = vscode.window.createTextEditorDecorationType({
      overviewRulerColor: new vscode.ThemeColor('gpuMemoryLens.overviewRuler'),
      overviewRulerLane: vscode.OverviewRulerLane.Right,
    });
    this.enabled = vscode.workspace.getConfiguration('gpuMemoryLens').get<boolean>('annotations.enabled', true);
    this.disposables.push(
      vscode.window.onDidChangeVisibleTextEditors(() => this.paintAll()),
      vscode.workspace.onDidChangeConfiguration((e) => {
        if (e.affectsConfiguration('gpuMemoryLens.annotations')) {
          this.enabled = vscode.workspace.getConfiguration('gpuMemoryLens').get<boolean>('annotations.enabled', true);
          this.refreshNow();
        }
      }),
    );
  }

  /** Throttled recompute: call on every change of a live capture. */
  refresh(): void {
    this.throttle.trigger();
  }

  refreshNow(): void {
    this.recompute();
  }

  /**
   * Annotate from a capture or snapshot opened later (the snapshot panel calls this for the model it shows).
   * Dispose the result when the model closes.
   */
  showModel(model: Model, where = ''): vscode.Disposable {
    const source: AnnotationSource = { model, where };
    this.reopened.add(source);
    this.refreshNow();
    return new vscode.Disposable(() => {
      this.reopened.delete(source);
      this.refreshNow();
    });
  }

  toggle(): boolean {
    // Note [Toggle is per window]: the command flips the annotations of this window only; the setting
    // gpuMemoryLens.annotations.enabled is the default a window starts with (writing it here would fight a
    // workspace-level value and leave the command apparently broken).
    this.enabled = !this.enabled;
    this.refreshNow();
    return this.enabled;
  }

  private recompute(): void {
    const minBytes = vscode.workspace.getConfiguration('gpuMemoryLens').get<number>('annotations.minBytes', 1 << 20);
    const best = new Map<string, Shown>();
    const sources = [...this.liveSources(), ...this.reopened];
    for (const { model, where } of this.enabled ? sources : []) {
      for (const device of safe(() => model.devices(), [])) {
        const peakBytes = safe(() => model.current(device).peakAllocatedBytes, 0);
        const stats = safe(() => model.lineStats(device), []);
        const multi = where || model.devices().length > 1 ? [where, `cuda:${device}`].filter(Boolean).join(' · ') : '';
        // the line's bytes at the peak by category (one pass per device and refresh, like lineStats)
        const peakCats = safe(() => model.categories(device, [], true).peak, null);
        for (const a of computeAnnotations(stats, { peakBytes, minBytes })) {
          // Note [One annotation per line]: ranks of a DDP job run the same lines; the heaviest
          // (process, device) speaks for the line and the hover names which one it is.
          const key = `${a.file}\u0000${a.line}`;
          const prev = best.get(key);
          if (prev && prev.bytes >= a.bytes) continue;
          const categories = lineCategories(peakCats, a.file, a.line);
          best.set(key, { ...a, hover: hoverMarkdown(a.stat, { peakBytes, where: multi, stack: (id) => model.stack(id), categories }) });
        }
      }
    }
    this.byFile = new Map();
    for (const a of best.values()) {
      const list = this.byFile.get(a.file) ?? [];
      list.push(a);
      this.byFile.set(a.file, list);
    }
    this.paintAll();
  }

  private paintAll(): void {
    for (const editor of vscode.window.visibleTextEditors) this.paint(editor);
  }

  private paint(editor: vscode.TextEditor): void {
    const doc = editor.document;
    const file = doc.uri.scheme === 'file' ? matchDocument(doc.uri.fsPath, this.byFile.keys()) : undefined;
    const shown = file ? (this.byFile.get(file) ?? []) : [];
    const perTier = new Map<AnnotationTier, vscode.DecorationOptions[]>(TIERS.map((t) => [t, []]));
    const ruler: vscode.DecorationOptions[] = [];
    for (const a of shown) {
      if (a.line < 1 || a.line > doc.lineCount) continue; // the file changed since the capture
      const textLine = doc.lineAt(a.line - 1);
      // The whole line's text is the hover target (an end-of-line zero-width range is hard to hit).
      const range = new vscode.Range(a.line - 1, textLine.firstNonWhitespaceCharacterIndex, a.line - 1, textLine.range.end.character);
      const hover = new vscode.MarkdownString(a.hover);
      hover.isTrusted = { enabledCommands: [OPEN_FRAME_COMMAND] };
      perTier.get(a.tier)!.push({ range, hoverMessage: hover, renderOptions: { after: { contentText: a.text } } });
      if (a.heavy) ruler.push({ range });
    }
    for (const [tier, type] of this.tierTypes) editor.setDecorations(type, perTier.get(tier)!);
    editor.setDecorations(this.rulerType, ruler);
  }

  dispose(): void {
    this.throttle.dispose();
    for (const t of this.tierTypes.values()) t.dispose();
    this.rulerType.dispose();
    for (const d of this.disposables) d.dispose();
  }
}

/** A model's reader may throw on a damaged capture; one bad capture must not blank the others. */
function safe<T>(f: () => T, fallback: T): T {
  try {
    return f();
  } catch {
    return fallback;
  }
}
