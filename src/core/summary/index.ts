// Summary glue shared by the CLI and the extension: open a file, compute issue #4's summary, render it.
import path from 'node:path';
import { openModel } from '../model/open';
import type { AllocatorState, SnapshotSummary } from '../model/types';
import { summaryReport } from './report';
import { addWhatIf, whatIfText } from './whatIf';

export { summaryReport } from './report';

export interface FileSummary {
  summary: SnapshotSummary;
  text: string;
  problems: string[];
}

export function summarizeFile(file: string, topLines = 10): FileSummary {
  const model = openModel(file);
  try {
    const summary = model.summary();
    addWhatIf(model, summary);
    const states = new Map<number, AllocatorState>();
    for (const d of model.devices()) states.set(d, model.stateAt(d, Infinity));
    const problems = model.problems().map((p) => `${p.message} (at byte ${p.offset})`);
    const text = summaryReport({ fileName: path.basename(file), summary, states, problems, topLines }) + whatIfText(summary);
    return { summary, text, problems };
  } finally {
    model.close();
  }
}
