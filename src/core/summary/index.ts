// Summary glue shared by the CLI and the extension: open a file, compute issue #4's summary, render it.
import path from 'node:path';
import { openModel } from '../model/open';
import type { AllocatorState, SnapshotSummary } from '../model/types';
import { summaryReport } from './report';
import { stepsJson, stepsText, type StepsJson } from './steps';

export { summaryReport } from './report';

export interface FileSummary {
  /** `steps`: only devices where steps were found; absent when none were (issue #4's document stays as it was) */
  summary: SnapshotSummary & { steps?: StepsJson[] };
  text: string;
  problems: string[];
}

export function summarizeFile(file: string, topLines = 10): FileSummary {
  const model = openModel(file);
  try {
    const summary = model.summary();
    const states = new Map<number, AllocatorState>();
    for (const d of model.devices()) states.set(d, model.stateAt(d, Infinity));
    const problems = model.problems().map((p) => `${p.message} (at byte ${p.offset})`);
    const steps = stepsJson(model).filter((s) => s.steps.length > 0);
    const stepLines = stepsText(steps);
    const text = summaryReport({ fileName: path.basename(file), summary, states, problems, topLines }) + (stepLines.length ? '\n' + stepLines.join('\n') : '');
    return { summary: steps.length ? { ...summary, steps } : summary, text, problems };
  } finally {
    model.close();
  }
}
