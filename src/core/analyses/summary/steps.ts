// The steps part of `gpumem summary`: per-step figures and leak findings, in text and in --json.
import { categoryView, dominantCategory, lineCategories, lineKeptBytes, type CategoryView } from '../categories';
import { CATEGORIES, CATEGORY_HEADERS, shownCategories } from '../../base/protocol/categories';
import { formatBytes } from '../../base/units/bytes';
import type { Category, CategoryBytes, Model } from '../../base/model/types';
import { stepReport, type KeptLeak, type StepReport, type Steps } from '../steps';

export interface StepsJson {
  device: number;
  source: StepReport['steps']['source'];
  steps: {
    step: number;
    end_us: number;
    peak_allocated_bytes: number;
    allocated_at_end_bytes: number;
    reserved_at_end_bytes: number;
    /** bytes per category at the step end (Note [Categories]) */
    categories?: CategoryBytes;
  }[];
  leaks: {
    file: string;
    line: number;
    growth_per_step_bytes: number;
    from_step: number;
    to_step: number;
    growing_steps: number;
    bytes_at_last_end: number;
    /** what most of the line's bytes at the last step end are */
    category?: Category;
    /** of its bytes at the last step end, activations a container keeps past their backward (Note [Categories] 4) */
    kept_bytes?: number;
    /** the line that keeps the memory alive, as the workload found it (Note [Leak keeper]) */
    keeper?: KeeperJson;
  }[];
}

export interface KeeperJson {
  file: string;
  line: number;
  /** 'stores': a history.append(…)-like line; 'assigns': the line that assigns the name; '' unknown */
  how: string;
  code: string;
  container: string;
  container_type: string;
  scope: string;
  tensors: number;
  bytes: number;
  /** false: the graph walk hit its bound, bytes are a lower bound */
  complete: boolean;
  /** the workload's step count when it confirmed the keeper, and the time of its notice */
  step: number;
  time_us: number;
  /** 'step': the figures are of that step end; 'end': read again at the process's exit (Note [Keeper at the end]) */
  at: 'step' | 'end';
  /** 'address': the kept blocks were allocated on the finding's line; 'largest': none was, given to the largest finding */
  match: 'address' | 'largest';
}

function keeperJson(l: KeptLeak): KeeperJson | undefined {
  const k = l.keeper;
  if (!k) return undefined;
  return {
    file: k.file,
    line: k.line,
    how: k.how,
    code: k.code,
    container: k.container,
    container_type: k.containerType,
    scope: k.scope,
    tensors: k.tensors,
    bytes: k.bytes,
    complete: k.complete,
    step: k.step,
    time_us: k.timeUs,
    at: k.at,
    match: l.keeperMatch ?? 'address',
  };
}

export interface StepsWithCategories {
  json: StepsJson;
  view: CategoryView;
}

export function stepsWithCategories(model: Model, steps: Steps): StepsWithCategories[] {
  return model.devices().map((device) => {
    const r = stepReport(model, device, steps);
    const view = categoryView(model, device, r.steps);
    return { json: toJson(device, r, view), view };
  });
}

export function toJson(device: number, r: StepReport, view: CategoryView): StepsJson {
  const moments = view.report.moments;
  const lastEnd = moments[moments.length - 1];
  return {
    device,
    source: r.steps.source,
    steps: r.table.steps.map((s, i) => ({
      step: r.steps.steps[i].index,
      end_us: s.endUs,
      peak_allocated_bytes: s.peakAllocatedBytes,
      allocated_at_end_bytes: s.allocatedAtEndBytes,
      reserved_at_end_bytes: s.reservedAtEndBytes,
      categories: moments[i]?.bytes,
    })),
    leaks: r.leaks.map((l) => ({
      file: l.file,
      line: l.line,
      growth_per_step_bytes: l.growthPerStepBytes,
      from_step: l.fromStep,
      to_step: l.toStep,
      growing_steps: l.growingSteps,
      bytes_at_last_end: l.bytesAtLastEnd,
      category: dominantCategory(lineCategories(lastEnd, l.file, l.line)),
      ...(lineKeptBytes(lastEnd, l.file, l.line) ? { kept_bytes: lineKeptBytes(lastEnd, l.file, l.line) } : {}),
      ...(l.keeper ? { keeper: keeperJson(l) } : {}),
    })),
  };
}

// Step-end columns: what stays between steps (activations and temporaries are normally 0 there).
const CATEGORY_COLUMNS: [Category, string][] = CATEGORIES.map((c) => [c, CATEGORY_HEADERS[c]]);

const CATEGORY_TEXT: Record<Category, string> = {
  parameter: 'parameters',
  buffer: 'module buffers',
  gradient: 'gradients',
  optimizer_state: 'optimizer state',
  activation: 'activations',
  kv_cache: 'KV cache',
  temporary: 'temporaries',
  other: 'not parameters, gradients, optimizer state or activations',
  block_overhead: 'block overhead (rounding, unsplit remainders)',
};

/** A leak line whose bytes are activations a container keeps (Note [Categories] 4). */
const KEPT_TEXT = 'saved activations kept past their backward';

export const SOURCE_TEXT: Record<StepsJson['source'], string> = {
  numbered: 'your numbered step markers',
  user: 'your gpumem.step() / "step" marks',
  optimizer: 'optimizer.step() after backward()',
  backward: 'backward() ends (no optimizer steps seen)',
  none: '',
};

/** Text lines (no frame); at most `maxRows` step rows: the first, the last, and the step with the top peak. */
export function stepsText(all: readonly StepsJson[], maxRows = 12): string[] {
  const out: string[] = [];
  for (const s of all) {
    if (s.source === 'none' || s.steps.length === 0) continue;
    out.push(`Steps on device ${s.device}: ${s.steps.length}, found from ${SOURCE_TEXT[s.source]}`);
    // buffers, the KV cache and block overhead get a column where some step has them (a training run has no KV cache)
    const columns = new Set(shownCategories(s.steps.map((r) => r.categories)));
    const cats = s.steps.every((r) => r.categories) ? CATEGORY_COLUMNS.filter(([c]) => columns.has(c)) : [];
    out.push(
      `  ${'step'.padStart(6)} ${'peak allocated'.padStart(15)} ${'allocated at end'.padStart(17)} ${'reserved at end'.padStart(16)}` +
        cats.map(([, h]) => ` ${h.padStart(10)}`).join(''),
    );
    const top = s.steps.reduce((a, b) => (b.peak_allocated_bytes > a.peak_allocated_bytes ? b : a));
    const shown = new Set<number>();
    const half = Math.max(1, Math.floor((maxRows - 1) / 2));
    s.steps.forEach((r, i) => {
      if (i < half || i >= s.steps.length - half || r === top) shown.add(i);
    });
    let last = -1;
    for (const i of [...shown].sort((a, b) => a - b)) {
      if (last >= 0 && i > last + 1) out.push(`  ${'…'.padStart(6)}`);
      const r = s.steps[i];
      const mark = r === top ? '  ← highest peak' : '';
      const catCells = cats.map(([c]) => ` ${formatBytes(r.categories?.[c] ?? 0).padStart(10)}`).join('');
      out.push(`  ${String(r.step).padStart(6)} ${formatBytes(r.peak_allocated_bytes).padStart(15)} ${formatBytes(r.allocated_at_end_bytes).padStart(17)} ${formatBytes(r.reserved_at_end_bytes).padStart(16)}${catCells}${mark}`);
      last = i;
    }
    if (s.leaks.length === 0) {
      out.push(`  No leak: no line's memory at step end grew for 3 steps in a row.`);
    }
    for (const l of s.leaks) out.push(`  Leak: ${leakSentence(l)}`);
  }
  return out;
}

/**
 * One leak finding in words (the summary's line; the panels' finding), `file` (and the keeper's `keeperFile`) as the
 * caller wants it shown.
 */
export function leakSentence(l: StepsJson['leaks'][number], file = l.file, keeperFile = l.keeper?.file ?? ''): string {
  return (
    `${file}:${l.line} keeps ${formatBytes(l.growth_per_step_bytes)} more at each step end ` +
    `(steps ${l.from_step}–${l.to_step}, ${formatBytes(l.bytes_at_last_end)} at the last step end` +
    `${l.category ? `, ${l.category === 'activation' && l.kept_bytes ? KEPT_TEXT : CATEGORY_TEXT[l.category]}` : ''})` +
    (l.keeper ? `; ${keeperSentence(l.keeper, keeperFile)}` : '')
  );
}

/** "kept alive by history (a list: 4 tensors with autograd graphs, 2.0 KiB at step 5), stored at train.py:42: history.append(loss)" */
export function keeperSentence(k: KeeperJson, file = k.file): string {
  const when = k.at === 'end' ? `at the end, after step ${k.step}` : `at step ${k.step}`;
  const what = `${k.tensors} tensor${k.tensors === 1 ? '' : 's'} with autograd graphs, ${k.complete ? '' : 'at least '}${formatBytes(k.bytes)} ${when}`;
  const name = k.container ? `${k.container} (a ${k.container_type}: ${what})` : `a ${k.container_type} (${what})`;
  const where = k.line ? `, ${k.how === 'assigns' ? 'assigned' : 'stored'} at ${file}:${k.line}${k.code ? `: ${k.code}` : ''}` : '';
  return `${k.match === 'largest' ? 'probably ' : ''}kept alive by ${name}${where}`;
}
