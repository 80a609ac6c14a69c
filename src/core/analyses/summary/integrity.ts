// Whether the file holds the whole run: how the capture ended and what it lost (FORMAT.md REC_END, REC_LOST).
// Note [Never silent]: a capture without its REC_END, a writer that stopped, or lost events are always
// said — in the summary text, `--json` and the snapshot panel's banner — with when, counted from the time
// origin (Note [Time origin]).
import type { Model, ReadProblem } from '../../base/model/types';
import type { TimeBase } from '../steps/timebase';
import { formatSeconds, jsonSeconds } from '../steps/timebase';
import { budgetOf, budgetSentence, type BudgetInfo } from './budget';

export type EndKind = 'clean' | 'early' | 'writer-failure' | 'stopped';

/** `integrity` of `gpumem summary --json`. */
export interface Integrity {
  ended: EndKind;
  /** events the recorder dropped (Σ REC_LOST counts) */
  lostEvents: number;
  /** seconds since the origin of the first loss; null when nothing was lost */
  lostFromS: number | null;
  /** the writer's message when it stopped (reason 1), else null */
  message: string | null;
  /** where the capture ends (its REC_END, or the last record read), seconds since the origin */
  endS: number | null;
  /** the workload's exit code from REC_END (−1 unknown); null without REC_END */
  exitCode: number | null;
  /** one sentence per fact a user must know, empty for a clean, complete capture */
  sentences: string[];
  /** a budgeted capture's compacted ranges (Note [Capture budget]); absent when everything is in full detail */
  budget?: BudgetInfo;
}

// The writer flushes at least every 50 ms (FORMAT.md §3 "Freshness"): what a kill can cost.
const FLUSH_MS = 50;

export function integrityOf(model: Model, time: TimeBase): Integrity {
  const info = model.fileInfo();
  const problems = model.problems();
  const sentences: string[] = [];
  const lostFromS = info.firstLostUs === null ? null : jsonSeconds(time.seconds(info.firstLostUs));
  let ended: EndKind = 'clean';
  let message: string | null = null;
  let endS: number | null = info.lastUs === null ? null : jsonSeconds(time.seconds(info.lastUs));
  const exitCode = info.end ? info.end.exitCode : null;
  if (model.format === 'gpumem-capture') {
    if (!info.end) {
      ended = 'early';
      const cut = problems.some((p: ReadProblem) => p.kind === 'incomplete') ? ' Its last record was cut off mid-write.' : '';
      const at = endS === null ? 'before its first record' : `at ${formatSeconds(endS)}`;
      sentences.push(
        `The capture ends early ${at}: the process died or was killed (or is still running); the events of its last ${FLUSH_MS} ms (the writer's flush interval) may be missing.${cut}`,
      );
    } else {
      endS = jsonSeconds(time.seconds(info.end.tUs));
      if (info.end.reason === 1) {
        ended = 'writer-failure';
        message = info.end.message || 'the writer could not write (no reason recorded)';
        sentences.push(`The capture stopped at ${formatSeconds(endS)}: ${message}. The workload went on; nothing after that moment was recorded.`);
      } else if (info.end.reason === 2) {
        ended = 'stopped';
        message = info.end.message || null;
        sentences.push(`The capture was stopped at ${formatSeconds(endS)}${message ? `: ${message}` : ' by the user'}; nothing after that moment was recorded.`);
      } else if (info.end.reason !== 0) {
        // A newer writer's reason: say that it ended, and what it said.
        ended = 'stopped';
        message = info.end.message || null;
        sentences.push(`The capture ended at ${formatSeconds(endS)} for a reason this version does not know (${info.end.reason})${message ? `: ${message}` : ''}.`);
      }
    }
  }
  if (info.lostEvents > 0 && lostFromS !== null) {
    sentences.push(
      `${info.lostEvents.toLocaleString('en-US')} event${info.lostEvents === 1 ? '' : 's'} lost from ${formatSeconds(lostFromS)}: the recorder's buffer bound was hit, so figures after that moment undercount.`,
    );
  }
  const budget = budgetOf(info, (us) => time.seconds(us));
  if (budget) sentences.push(budgetSentence(budget));
  return { ended, lostEvents: info.lostEvents, lostFromS, message, endS, exitCode, sentences, ...(budget ? { budget } : {}) };
}

/** Problems the integrity sentences already say (lost events, a cut-off last record). */
export function isIntegrityProblem(p: ReadProblem): boolean {
  return p.kind === 'lost' || p.kind === 'incomplete';
}
