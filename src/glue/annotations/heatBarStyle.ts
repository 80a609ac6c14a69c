// How the heat bar (src/core/views/annotations/heatBar.ts) is drawn: decoration render options, one per bar kind,
// plus the spacer that makes room for it.
//
// Note [Pseudo-gutter]: VS Code gives extensions no gutter column of their own, and a gutter icon takes the
// glyph margin, where breakpoints are set. So, like austin-vscode's pseudo-gutter, the bar is a `before`
// decoration at the start of the line, in two layers:
// - the spacer: an empty `before` GUTTER_CH wide on *every* line of a document that shows bars, so all
//   lines move right by the same amount and the indentation of Python code still lines up;
// - the bar: an empty `before` on annotated lines, positioned absolutely inside the line (`.view-line` is
//   absolutely positioned in the editor), so it draws over the spacer's room and takes none of its own.
// Layering (rather than giving annotated lines a bar-plus-margin *instead of* the spacer) keeps the two
// independent: after an edit the spacer is simply laid on every line again, while the bars and the text
// keep following their lines as VS Code moves decorations with the text. The order in which VS Code puts
// two `before`s at one position does not matter either. The public API has no `position` property, so
// it goes through `textDecoration`, whose value VS Code writes into the rule as is (austin-vscode relies
// on the same); sizes are in ch/em, so the bar follows the editor's font.
import * as vscode from 'vscode';
import { BAR_LEFT_CH, BAR_STEP_CH, GUTTER_CH, HEAT_BAR_KINDS, heatBarKey, type HeatBar } from '../../core/views/annotations';

const BAR_HEIGHT_EM = 0.4;
/** the hollow bar (nothing live at the peak) is an outline two steps wide, enough to read as hollow */
const HOLLOW_STEPS = 2;

/** a length in ch, without binary-fraction noise (0.3 × 3 is 0.8999999999999999) */
const ch = (n: number): string => `${Number(n.toFixed(3))}ch`;

function barOptions(bar: HeatBar): vscode.DecorationRenderOptions {
  const colour = new vscode.ThemeColor(`gpuMemoryLens.annotation.${bar.tier}`);
  const hollow = bar.steps === 0;
  const position = [
    'none',
    'position: absolute',
    `left: ${ch(BAR_LEFT_CH)}`,
    `top: calc(50% - ${BAR_HEIGHT_EM / 2}em)`,
    'box-sizing: border-box',
    'border-radius: 1px',
    'pointer-events: none',
  ].join('; ');
  return {
    before: {
      contentText: '',
      width: ch((hollow ? HOLLOW_STEPS : bar.steps) * BAR_STEP_CH),
      height: `${BAR_HEIGHT_EM}em`,
      ...(hollow ? { border: '1px solid', borderColor: colour } : { backgroundColor: colour }),
      textDecoration: position,
    },
  };
}

/** Render options of every bar kind, by heatBarKey. */
export const BAR_TYPES_OPTIONS: ReadonlyMap<string, vscode.DecorationRenderOptions> = new Map(HEAT_BAR_KINDS.map((bar) => [heatBarKey(bar), barOptions(bar)]));

export const SPACER_OPTIONS: vscode.DecorationRenderOptions = {
  before: { contentText: '', width: ch(GUTTER_CH) },
};
