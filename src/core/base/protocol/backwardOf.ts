// How an allocation made by the backward of a forward op is named wherever its stack is shown: the editor's hover,
// the snapshot panel's stacks, the summary and the assistant (Note [Linked backward stacks] in
// src/core/base/model/types.ts). Pure helpers, shared by src/ and webview/.
import type { BackwardOf } from '../model/types';

/** What the snapshot panel receives of a stack's BackwardOf: the reader's fields, unchanged. */
export type BackwardOfView = BackwardOf;

/** The files of the synthetic frames a linked backward stack carries between its forward and backward() parts. */
export const BACKWARD_FRAME_FILE = '<backward>';
export const MODULE_FRAME_FILE = '<module>';

/** A frame the recorder added to say what ran (the autograd node, the module path), not a line of source. */
export function isSyntheticFrame(frame: { file: string }): boolean {
  return frame.file === BACKWARD_FRAME_FILE || frame.file === MODULE_FRAME_FILE;
}

/**
 * The forward line the backward belongs to: the forward part's innermost user frame, else its innermost frame (a
 * forward op called from library code only); null when the reader knows neither.
 */
export function backwardOfSite(b: BackwardOf): { file: string; line: number } | null {
  const at = b.line ?? b.op;
  return at ? { file: at.file, line: at.line } : null;
}

/** What follows the site: the node, the module path when known, and "recomputed" under activation checkpointing. */
export function backwardOfDetails(b: BackwardOf): string[] {
  return [b.node, b.module, b.recomputed ? 'recomputed' : ''].filter((s) => s !== '');
}

/** "backward of model.py:7 · ConvolutionBackward0 · layer1.0.conv1 · recomputed"; `show` shortens the path. */
export function backwardOfText(b: BackwardOf, show: (file: string) => string = (f) => f): string {
  const site = backwardOfSite(b);
  return [site ? `backward of ${show(site.file)}:${site.line}` : 'backward of a forward op', ...backwardOfDetails(b)].join(' · ');
}
