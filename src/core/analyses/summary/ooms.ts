// Every OOM of a file, with the line that asked, the request, the device's memory and the verdict: the one
// list the summary text, `--json` and the snapshot panel show (captures: REC_OOM; pickles: the
// device_traces entries with action 'oom').
import type { Model } from '../../base/model/types';
import type { OomRow } from '../../base/protocol/snapshot';
import { verdictOf } from '../verdicts/verdictOf';
import type { TimeBase } from '../steps/timebase';
import { jsonSeconds } from '../steps/timebase';

export type { OomRow };

export function oomRows(model: Model, time: TimeBase): OomRow[] {
  return model
    .ooms()
    .slice()
    .sort((a, b) => a.timeUs - b.timeUs || a.device - b.device)
    .map((o) => {
      const v = verdictOf(o, model.stateAt(o.device, o.timeUs));
      return {
        t_s: jsonSeconds(time.seconds(o.timeUs)),
        step: time.stepAt(o.timeUs) ?? null,
        time_us: o.timeUs,
        device: o.device,
        requested_bytes: o.requestedBytes,
        device_free_bytes: o.deviceFreeBytes,
        device_total_bytes: o.deviceTotalBytes,
        file: o.file,
        line: o.line,
        verdict: v.verdict,
        sentence: v.sentence,
      };
    });
}

/** "train.py:29" style location; the whole path is kept (the reader decides how to shorten it). */
export function oomWhere(row: Pick<OomRow, 'file' | 'line'>): string {
  return row.line > 0 ? `${row.file}:${row.line}` : row.file;
}
