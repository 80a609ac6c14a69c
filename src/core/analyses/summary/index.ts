// Summary glue shared by the CLI and the extension: open a file, compute the summary plus who, when
// and how complete, render it.
import path from 'node:path';
import { openModel } from '../../base/model/open';
import type { AllocatorState } from '../../base/model/types';
import { summaryDocument, type SummaryDocument } from './document';
import { isIntegrityProblem } from './integrity';
import { summaryReport } from './report';
import { categoriesJson, categoriesText, type CategoriesJson } from './categories';
import { stepsText, stepsWithCategories, type StepsJson } from './steps';
import { timeBaseOf } from '../steps/timebase';
import { addWhatIf, whatIfText } from './whatIf';
import { addReplayCheck, replayCheckText } from './replayCheck';
import { addBackwardPeak, backwardPeakText } from './backward';
import { snapshotSection, snapshotSectionText, type SnapshotSectionJson } from './snapshotSection';

export { summaryReport } from './report';
export { summaryDocument, type SummaryDevice, type SummaryDocument } from './document';

export interface FileSummary {
  /**
   * `steps`: only devices where steps were found; `categories`: every device (Note [Categories]); `snapshot`: pools,
   * host memory, settings, metadata, annotations, unknown history and unknown keys (Note [Snapshot section])
   */
  summary: SummaryDocument & { steps?: StepsJson[]; categories: CategoriesJson[]; snapshot: SnapshotSectionJson };
  text: string;
  problems: string[];
}

export function summarizeFile(file: string, topLines = 10): FileSummary {
  const model = openModel(file);
  try {
    const time = timeBaseOf(model);
    const summary = summaryDocument(model, time);
    addWhatIf(model, summary);
    addReplayCheck(model, summary);
    addBackwardPeak(model, summary, time);
    const states = new Map<number, AllocatorState>();
    for (const d of model.devices()) states.set(d, model.stateAt(d, Infinity));
    const problems = model
      .problems()
      .filter((p) => !isIntegrityProblem(p))
      .map((p) => `${p.message} (at byte ${p.offset})`);
    const withCategories = stepsWithCategories(model, time.steps);
    const categories = withCategories.map((s) => categoriesJson(model, s.json.device, s.view));
    const steps = withCategories.map((s) => s.json).filter((s) => s.steps.length > 0);
    const snapshot = snapshotSection(model, undefined, states);
    const more = [...snapshotSectionText(snapshot), ...categoriesText(categories), ...stepsText(steps)];
    // the backward peak right below the top lines it refines (Note [Backward peak in the summary])
    const backward = backwardPeakText(summary, topLines);
    const text =
      summaryReport({ fileName: path.basename(file), summary, states, problems, topLines }) +
      (backward.length ? '\n' + backward.join('\n') : '') +
      whatIfText(summary) +
      replayCheckText(summary) +
      (more.length ? '\n' + more.join('\n') : '');
    return { summary: steps.length ? { ...summary, steps, categories, snapshot } : { ...summary, categories, snapshot }, text, problems };
  } finally {
    model.close();
  }
}
