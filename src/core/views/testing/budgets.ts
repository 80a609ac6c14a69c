// What the Testing view shows for GPU memory budgets (Note [Testing view] in src/glue/testing/controller.ts): the
// tests a Python file marks with @pytest.mark.gpu_memory, and each test's verdict from the pytest plugin's rows
// (pytest-<pid>.jsonl in the session folder, Note [pytest budgets] in native/python/gpumem/_pytest.py). Pure.
import { escapeMarkdown, openFrameUri } from '../annotations/hover';

/** A test of a file that carries the gpu_memory marker: its id inside the file (`test_x`, `TestA::test_x`), 1-based line of its `def`. */
export interface BudgetTest {
  name: string;
  line: number;
}

const DEF = /^(\s*)(?:async\s+)?def\s+(test\w*)\s*\(/;
const CLASS = /^(\s*)class\s+(Test\w*)\b/;
const MARK = /^\s*@pytest\.mark\.gpu_memory\b/;
const DECORATOR = /^\s*@/;

/**
 * The budgeted tests of a Python file, by a scan of its text (no Python runs: fast, and safe in Restricted Mode):
 * a `def test_…` with the marker among its decorators, or inside a `class Test…` that has it. Not seen: a marker
 * set through `pytestmark` or applied by a conftest hook (those tests still run from the file, just not one by one).
 */
export function findBudgetTests(text: string): BudgetTest[] {
  const out: BudgetTest[] = [];
  const lines = text.split(/\r?\n/);
  let marked = false; // the decorators seen since the last statement include the marker
  const scopes: { indent: number; name: string; marked: boolean; isClass: boolean }[] = []; // the enclosing classes and defs
  lines.forEach((line, i) => {
    if (!line.trim() || line.trimStart().startsWith('#')) return;
    const indent = line.length - line.trimStart().length;
    if (MARK.test(line)) {
      marked = true;
      return;
    }
    if (DECORATOR.test(line)) return;
    while (scopes.length && indent <= scopes[scopes.length - 1].indent) scopes.pop();
    const inClasses = scopes.every((c) => c.isClass); // a test is at module level or in classes only
    const outer = scopes[scopes.length - 1];
    const cls = CLASS.exec(line);
    const def = cls ? null : /^(\s*)(?:async\s+)?def\s+(\w+)\s*\(/.exec(line);
    if (cls) scopes.push({ indent, name: cls[2], marked: marked || !!outer?.marked, isClass: true });
    else if (def) {
      if (inClasses && DEF.test(line) && (marked || outer?.marked)) out.push({ name: [...scopes.map((c) => c.name), def[2]].join('::'), line: i + 1 });
      scopes.push({ indent, name: def[2], marked: false, isClass: false });
    }
    marked = false;
  });
  return out;
}

/**
 * One row of pytest-<pid>.jsonl, as the plugin writes it (Note [pytest budgets] in native/python/gpumem/_pytest.py).
 * A "done" row with allocated_before has the test's own peak in peak_allocated (above what was live at its start);
 * one without it was written before the peak became the test's own, and its peak_allocated is PyTorch's
 * max_memory_allocated(), what was live at the start included: it reads as that.
 */
export interface PytestRow {
  test: string;
  status: 'running' | 'done' | 'result';
  capture?: string | null;
  peak_allocated?: number;
  allocated_before?: number;
  max_memory_allocated?: number;
  peak_from?: 'capture' | 'counters';
  peak_reserved?: number;
  left_allocated?: number;
  lines?: [string, number, string, number][];
  when?: string;
  outcome?: 'passed' | 'failed' | 'skipped';
  message?: string;
}

/** The rows of a pytest-<pid>.jsonl file; a torn last line (the process died writing it) is skipped. */
export function parseRows(text: string): PytestRow[] {
  const out: PytestRow[] = [];
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    try {
      const row = JSON.parse(line) as PytestRow;
      if (row && typeof row.test === 'string' && typeof row.status === 'string') out.push(row);
    } catch {
      // a torn line
    }
  }
  return out;
}

export interface TestVerdict {
  nodeid: string;
  /** crashed: the process died in the test (a "running" row and no verdict) */
  outcome: 'passed' | 'failed' | 'skipped' | 'crashed';
  /** pytest's failure text (the budget's message or the test's traceback); '' when it passed */
  message: string;
  /** the test's own peak; PyTorch's max_memory_allocated() in a row that has no allocatedBefore */
  peakAllocated?: number;
  /** what was live when the test began (fixtures, earlier tests): not counted in its peak; absent from old rows */
  allocatedBefore?: number;
  leftAllocated?: number;
  capture?: string;
  /** the lines at the test's peak: file, 1-based line, function, bytes */
  lines: { file: string; line: number; fn: string; bytes: number }[];
}

/** One verdict per test the rows speak of, in the order they ran (the last run of a test wins). */
export function verdicts(rows: readonly PytestRow[]): TestVerdict[] {
  const byTest = new Map<string, TestVerdict>();
  for (const r of rows) {
    let v = byTest.get(r.test);
    if (!v || r.status === 'running') {
      v = { nodeid: r.test, outcome: 'crashed', message: '', lines: [] };
      byTest.delete(r.test);
      byTest.set(r.test, v);
    }
    if (r.capture) v.capture = r.capture;
    if (r.status === 'done') {
      v.peakAllocated = r.peak_allocated;
      v.allocatedBefore = r.allocated_before;
      v.leftAllocated = r.left_allocated;
      v.lines = (r.lines ?? []).map(([file, line, fn, bytes]) => ({ file, line, fn, bytes }));
    } else if (r.status === 'result' && r.outcome) {
      v.outcome = r.outcome;
      v.message = r.message ?? '';
    }
  }
  return [...byTest.values()];
}

/**
 * Which verdict is a test's: the row's node id is relative to pytest's rootdir, the test's file to the workspace
 * folder, so the row's file part must be a path suffix of the test's file (on a `/` boundary) and the rest equal,
 * parameters aside (`test_x[2]` is a run of `test_x`).
 */
export function isRunOf(nodeid: string, file: string, name: string): boolean {
  const at = nodeid.indexOf('::');
  if (at < 0) return false;
  const rowFile = nodeid.slice(0, at);
  const rest = nodeid.slice(at + 2).replace(/\[.*\]$/, '');
  const f = file.split('\\').join('/');
  return rest === name && (f === rowFile || f.endsWith('/' + rowFile));
}

/** Binary units as the plugin writes them (_meter.fmt): 512 B, 1.50 KiB, 12.3 MiB, 488 KiB. */
export function fmtBytes(n: number): string {
  const sign = n < 0 ? '-' : '';
  let v = Math.abs(Math.trunc(n));
  if (v < 1024) return `${sign}${v} B`;
  for (const unit of ['KiB', 'MiB', 'GiB', 'TiB']) {
    v /= 1024;
    if (v < 1024 || unit === 'TiB') return `${sign}${fixed(v, v < 10 ? 2 : v < 100 ? 1 : 0)} ${unit}`;
  }
  return `${sign}${v}`;
}

/** Python's "%.Nf": an exact half rounds to even (488.5 → 488), where toFixed rounds it up. */
function fixed(v: number, digits: number): string {
  const scaled = v * 10 ** digits;
  const floor = Math.floor(scaled);
  if (scaled - floor === 0.5 && floor % 2 === 0) return (floor / 10 ** digits).toFixed(digits);
  return v.toFixed(digits);
}

/**
 * A test's figures in one line, for the run's output under the test (passed ones too): "test_budgets.py::test_x:
 * peak allocated 4.00 KiB above the 32.0 MiB live at its start, left allocated 0 B". Undefined when the test has no
 * figures (it crashed, or its setup failed); an old row has no live-at-start figure and says PyTorch's peak alone.
 */
export function verdictLine(v: TestVerdict): string | undefined {
  if (v.peakAllocated === undefined) return undefined;
  const peak =
    v.allocatedBefore === undefined
      ? `peak allocated ${fmtBytes(v.peakAllocated)}`
      : `peak allocated ${fmtBytes(v.peakAllocated)} above the ${fmtBytes(v.allocatedBefore)} live at its start`;
  return `${v.nodeid}: ${peak}, left allocated ${fmtBytes(v.leftAllocated ?? 0)}`;
}

/** The command behind "Open capture": a capture's path in, the snapshot panel out (gpuMemoryLens.openSnapshot with its Uri). */
export const OPEN_CAPTURE_COMMAND = 'gpuMemoryLens.openTestCapture';

/** A command URI that opens the capture at `path` (a string survives the link's JSON; a Uri would not stay one). */
export function openCaptureUri(path: string): string {
  return `command:${OPEN_CAPTURE_COMMAND}?${encodeURIComponent(JSON.stringify([path]))}`;
}

/**
 * The Markdown of a verdict's message in the Testing view: pytest's own text first (the budget, the lines, the
 * capture path, as the terminal shows it), then the lines at the peak as links to file:line, then "Open capture".
 * The glue trusts exactly two commands: the frame link and the capture link.
 *
 * @param show  how a line's file reads (relative to the workspace)
 */
export function verdictMarkdown(v: TestVerdict, show: (file: string) => string = (f) => f): string {
  const parts: string[] = [];
  const text = v.outcome === 'crashed' ? 'The test process died during this test (no verdict was written); what it allocated is in the capture.' : v.message;
  if (text) parts.push('```\n' + text.replace(/```/g, "'''") + '\n```');
  if (v.lines.length) {
    const head =
      v.allocatedBefore === undefined
        ? `Lines at the peak (${fmtBytes(v.peakAllocated ?? 0)} allocated):`
        : `Lines at the test's peak, its own allocations (${fmtBytes(v.peakAllocated ?? 0)} above the ${fmtBytes(v.allocatedBefore)} live at its start):`;
    parts.push(
      `${head}\n\n` +
        v.lines.map((l) => `- ${escapeMarkdown(fmtBytes(l.bytes))} [${escapeMarkdown(`${show(l.file)}:${l.line}`)}](${openFrameUri(l.file, l.line)})${l.fn ? ` in ${escapeMarkdown(l.fn)}` : ''}`).join('\n'),
    );
  }
  if (v.capture) parts.push(`[Open capture](${openCaptureUri(v.capture)})`);
  return parts.join('\n\n');
}
