// `gpumem summary --json`'s per-device `what_if`: what the allocator that made the data would do at the end
// of the capture (for a live capture: now), answered by its own policy on the simulated device
// (Note [What-if] in src/core/base/model/whatIf.ts). test/gpu/what_if_check.py reads exactly these keys and checks
// them against the real allocator: empty_cache() releases `empty_cache_releases_bytes`, and a request of
// `largest_without_growth_bytes` maps no new device memory.
import { formatBytes } from '../../base/units/bytes';
import type { Model, SnapshotSummary, SummaryWhatIf } from '../../base/model/types';
import { POLICY_LABELS, POLICY_SOURCE_WORDS, WhatIfUnavailable } from '../../base/model/whatIf';
import { whyNoWhatIf } from '../replay/unmodelled';

export function summaryWhatIf(model: Model, device: number): SummaryWhatIf | undefined {
  try {
    const w = model.whatIf(device, Infinity);
    return {
      policy: w.policy,
      policy_source: w.policySource,
      reserved_bytes: w.reservedBytes,
      empty_cache_releases_bytes: w.emptyCacheReleasesBytes,
      largest_without_growth_bytes: w.largestWithoutGrowthBytes,
    };
  } catch (err) {
    // A reader built before the engine: the summary simply has no what_if (never a guessed one).
    if (err instanceof WhatIfUnavailable) return undefined;
    throw err;
  }
}

/**
 * Adds `what_if` to every device of `summary` (the hook summarizeFile calls), or `what_if_none`, the line that says
 * why the engine cannot answer (Note [What the engine cannot answer] in ../replay/unmodelled.ts).
 */
export function addWhatIf(model: Model, summary: SnapshotSummary): void {
  for (const d of summary.devices) {
    const why = whyNoWhatIf(model, d.device);
    if (why) {
      d.what_if_none = why;
      continue;
    }
    const w = summaryWhatIf(model, d.device);
    if (w) d.what_if = w;
  }
}

/** The text report's lines for the same answers, one block per device that has them. */
export function whatIfText(summary: SnapshotSummary): string {
  const out: string[] = [];
  for (const d of summary.devices) {
    if (d.what_if_none) out.push(`What-if, device ${d.device}: none, as ${d.what_if_none}.`);
    const w = d.what_if;
    if (!w) continue;
    out.push(`What-if, device ${d.device}, at the end (${POLICY_LABELS[w.policy]} policy, from ${POLICY_SOURCE_WORDS[w.policy_source]}):`);
    out.push(`  empty_cache() would release ${formatBytes(w.empty_cache_releases_bytes)} of ${formatBytes(w.reserved_bytes)} reserved`);
    out.push(`  largest request served without reserving more: ${formatBytes(w.largest_without_growth_bytes)}`);
  }
  return out.length ? '\n' + out.join('\n') : '';
}
