// Memory annotations in Python editors: the end-of-line text and, at the start of the line, a heat bar
// (the pseudo-gutter). A fixed set of decoration types (one per colour tier for the text, one per heat-bar
// kind, the spacer, the overview-ruler mark), created once and given many ranges; recomputed at most twice
// a second while a capture grows. No gutter icons: the glyph margin stays free for breakpoints.
import * as vscode from 'vscode';
import type { Model } from '../../core/base/model/types';
import { lineCategories } from '../../core/analyses/categories';
import { PeakCategoriesCache } from '../../core/analyses/categories/peakCache';
import {
  annotationStyle,
  computeAnnotations,
  HEAT_BAR_KINDS,
  heatBarFor,
  heatBarKey,
  hoverMarkdown,
  matchDocument,
  OPEN_FRAME_COMMAND,
  type AnnotationStyle,
  type AnnotationTier,
  type LineAnnotation,
} from '../../core/views/annotations';
import { Throttle } from '../throttle';
import { BAR_TYPES_OPTIONS, SPACER_OPTIONS } from './heatBarStyle';

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

function readStyle(): AnnotationStyle {
  return annotationStyle(vscode.workspace.getConfiguration('gpuMemoryLens').get<unknown>('annotations.style', 'both'));
}

export class AnnotationController implements vscode.Disposable {
  private readonly tierTypes = new Map<AnnotationTier, vscode.TextEditorDecorationType>();
  /** one per heat-bar kind (HEAT_BAR_KINDS), by heatBarKey */
  private readonly barTypes = new Map<string, vscode.TextEditorDecorationType>();
  private readonly spacerType: vscode.TextEditorDecorationType;
  private readonly rulerType: vscode.TextEditorDecorationType;
  private readonly disposables: vscode.Disposable[] = [];
  private readonly throttle = new Throttle(500, () => this.recompute());
  /** Note [Hover categories while growing] */
  private readonly peakCategories = new PeakCategoriesCache();
  /** lays the spacer on every line again after edits added or removed lines (Note [Pseudo-gutter]) */
  private readonly spacerThrottle = new Throttle(100, () => this.paintSpacers());
  private readonly reopened = new Set<AnnotationSource>();
  /** frame file path → annotations of that file */
  private byFile = new Map<string, Shown[]>();
  /** documents (uri strings) whose editors show bars, hence the spacer */
  private barDocs = new Set<string>();
  private enabled: boolean;
  private style: AnnotationStyle;

  /**
   * @param framePathOf  the frame path of a document that is not a file: a notebook cell's latest execution
   *   (Note [Cell files] in native/python/gpumem/_kernel.py), so the annotations show on the cell's lines
   * @param onShown  called when an editor shows at least one annotated line (Note [Walkthrough progress])
   */
  constructor(
    private readonly liveSources: () => AnnotationSource[],
    private readonly framePathOf: (doc: vscode.TextDocument) => string | undefined = () => undefined,
    private readonly onShown: () => void = () => {},
  ) {
    for (const tier of TIERS) {
      this.tierTypes.set(
        tier,
        vscode.window.createTextEditorDecorationType({
          after: { color: new vscode.ThemeColor(`gpuMemoryLens.annotation.${tier}`), margin: '0 0 0 2.5em', fontStyle: 'italic' },
          rangeBehavior: vscode.DecorationRangeBehavior.ClosedClosed,
        }),
      );
    }
    for (const bar of HEAT_BAR_KINDS) {
      const key = heatBarKey(bar);
      this.barTypes.set(key, vscode.window.createTextEditorDecorationType({ ...BAR_TYPES_OPTIONS.get(key)!, rangeBehavior: vscode.DecorationRangeBehavior.ClosedClosed }));
    }
    this.spacerType = vscode.window.createTextEditorDecorationType({ ...SPACER_OPTIONS, rangeBehavior: vscode.DecorationRangeBehavior.ClosedClosed });
    this.rulerType = vscode.window.createTextEditorDecorationType({
      overviewRulerColor: new vscode.ThemeColor('gpuMemoryLens.overviewRuler'),
      overviewRulerLane: vscode.OverviewRulerLane.Right,
    });
    this.enabled = vscode.workspace.getConfiguration('gpuMemoryLens').get<boolean>('annotations.enabled', true);
    this.style = readStyle();
    this.disposables.push(
      vscode.window.onDidChangeVisibleTextEditors(() => this.paintAll()),
      vscode.workspace.onDidChangeConfiguration((e) => {
        if (e.affectsConfiguration('gpuMemoryLens.annotations')) {
          this.enabled = vscode.workspace.getConfiguration('gpuMemoryLens').get<boolean>('annotations.enabled', true);
          this.style = readStyle();
          this.refreshNow();
        }
      }),
      vscode.workspace.onDidChangeTextDocument((e) => {
        const linesMoved = e.contentChanges.some((c) => c.range.start.line !== c.range.end.line || /[\r\n]/.test(c.text));
        if (linesMoved && this.barDocs.has(e.document.uri.toString())) this.spacerThrottle.trigger();
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
        // the line's bytes at the peak by category: one pass per new peak (Note [Hover categories while growing])
        const peakCats = safe(() => this.peakCategories.get(model, device), null);
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
    this.barDocs = new Set();
    for (const editor of vscode.window.visibleTextEditors) this.paint(editor);
  }

  private paint(editor: vscode.TextEditor): void {
    const doc = editor.document;
    const file = doc.uri.scheme === 'file' ? matchDocument(doc.uri.fsPath, this.byFile.keys()) : this.framePathOf(doc);
    const shown = file ? (this.byFile.get(file) ?? []) : [];
    const withText = this.style !== 'bar';
    const withBar = this.style !== 'text';
    const perTier = new Map<AnnotationTier, vscode.DecorationOptions[]>(TIERS.map((t) => [t, []]));
    const perBar = new Map<string, vscode.DecorationOptions[]>([...this.barTypes.keys()].map((k) => [k, []]));
    const ruler: vscode.DecorationOptions[] = [];
    for (const a of shown) {
      if (a.line < 1 || a.line > doc.lineCount) continue; // the file changed since the capture
      const textLine = doc.lineAt(a.line - 1);
      // The whole line's text is the hover target (an end-of-line zero-width range is hard to hit).
      const range = new vscode.Range(a.line - 1, textLine.firstNonWhitespaceCharacterIndex, a.line - 1, textLine.range.end.character);
      const hover = new vscode.MarkdownString(a.hover);
      hover.isTrusted = { enabledCommands: [OPEN_FRAME_COMMAND] };
      if (withText) perTier.get(a.tier)!.push({ range, hoverMessage: hover, renderOptions: { after: { contentText: a.text } } });
      if (withBar) {
        // The bar's `before` must sit at column 0, ahead of the indentation. It carries the hover only
        // when there is no text (one hover per line, not two copies of it).
        const start = textLine.range.start;
        perBar.get(heatBarKey(heatBarFor(a.shareOfPeak)))!.push(withText ? { range: new vscode.Range(start, start) } : { range: new vscode.Range(start, range.end), hoverMessage: hover });
      }
      if (a.heavy) ruler.push({ range });
    }
    const bars = withBar && [...perBar.values()].some((list) => list.length > 0);
    if (bars) this.barDocs.add(doc.uri.toString());
    for (const [tier, type] of this.tierTypes) editor.setDecorations(type, perTier.get(tier)!);
    for (const [key, type] of this.barTypes) editor.setDecorations(type, perBar.get(key)!);
    editor.setDecorations(this.spacerType, bars ? spacerRanges(doc) : []);
    editor.setDecorations(this.rulerType, ruler);
    if (shown.length > 0 && (withText || bars)) this.onShown();
  }

  private paintSpacers(): void {
    for (const editor of vscode.window.visibleTextEditors) {
      if (this.barDocs.has(editor.document.uri.toString())) editor.setDecorations(this.spacerType, spacerRanges(editor.document));
    }
  }

  dispose(): void {
    this.throttle.dispose();
    this.spacerThrottle.dispose();
    for (const t of [...this.tierTypes.values(), ...this.barTypes.values()]) t.dispose();
    this.spacerType.dispose();
    this.rulerType.dispose();
    for (const d of this.disposables) d.dispose();
  }
}

/** An empty range at the start of every line: where the spacer goes. */
function spacerRanges(doc: vscode.TextDocument): vscode.Range[] {
  const out: vscode.Range[] = new Array(doc.lineCount);
  for (let i = 0; i < doc.lineCount; i++) out[i] = new vscode.Range(i, 0, i, 0);
  return out;
}

/** A model's reader may throw on a damaged capture; one bad capture must not blank the others. */
function safe<T>(f: () => T, fallback: T): T {
  try {
    return f();
  } catch {
    return fallback;
  }
}
