// Summary glue shared by the CLI and the extension: open a file, compute issue #4's summary, render it.
import path from 'node:path';
import { openModel } from '../model/open';
import type { AllocatorState, SnapshotSummary } from '../model/types';
import { summaryReport } from './report';
import { categoriesJson, categoriesText, type CategoriesJson } from './categories';
import { stepsText, stepsWithCategories, type StepsJson } from './steps';

export { summaryReport } from './report';

export interface FileSummary {
  summary: SnapshotSummary & { steps: StepsJson[]; categories: CategoriesJson[] };
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
    const withCategories = stepsWithCategories(model);
    const steps = withCategories.map((s) => s.json);
    const categories = withCategories.map((s) => categoriesJson(model, s.json.device, s.view));
    const more = [...categoriesText(categories), ...stepsText(steps)];
    const text = summaryReport({ fileName: path.basename(file), summary, states, problems, topLines }) + (more.length ? '\n' + more.join('\n') : '');
    return { summary: { ...summary, steps, categories }, text, problems };
  } finally {
    model.close();
  }
}
