// `gpumem replay`'s text and JSON. Times are seconds since the device's first traced event. A policy whose replay
// is not modelled (Note [Settings of the data]) has no figure in either: its row says so and why.
import { formatBytes } from '../../base/units/bytes';
import type { ReplayResult } from '../../base/model/whatIf';
import { POLICY_LABELS } from '../../base/model/whatIf';
import type { ReplaySet } from './index';
import { replayCheckSentence, type ReplayCheck } from './check';

const seconds = (tUs: number, t0Us: number): string => `${((tUs - t0Us) / 1e6).toFixed(3)} s`;

/** How many empty_cache() markers the text lists per policy (the JSON has all). */
const MARKERS_SHOWN = 5;

const SETTINGS_SOURCE_WORDS: Record<string, string> = {
  'capture-header': "the capture's header (PyTorch's allocator_settings of the run)",
  'pickle-settings': "the snapshot's allocator_settings",
  given: '--alloc-conf',
};

export function ratioText(r: ReplayResult): string {
  return r.modelled && Number.isFinite(r.ratio) && r.ratio > 0 ? `×${r.ratio.toFixed(3)}` : '—';
}

export function oomText(r: ReplayResult, t0Us: number): string {
  if (!r.modelled) return '—';
  if (r.capacityBytes === null) return 'not checked';
  return r.oom ? `yes, at ${seconds(r.oom.tUs, t0Us)}` : 'no';
}

/** The settings line of the pytorch policies, when any of them was replayed. */
function settingsLine(set: ReplaySet): string | undefined {
  const r = set.results.find((x) => x.settingsSource !== '');
  if (!r) return undefined;
  if (r.settingsSource === 'defaults') return "PyTorch's allocator settings: PyTorch's defaults (the data does not record the run's)";
  return `PyTorch's allocator settings: ${r.allocConf || "PyTorch's defaults"} (from ${SETTINGS_SOURCE_WORDS[r.settingsSource] ?? r.settingsSource})`;
}

export function replayText(fileName: string, set: ReplaySet, check?: ReplayCheck): string {
  if (set.none) return `Replay of ${fileName}, device ${set.device}: none, as ${set.none}.`;
  const out: string[] = [];
  const cap = set.capacity.bytes === undefined ? `capacity ${set.capacity.source}` : `capacity ${formatBytes(set.capacity.bytes)} (${set.capacity.source})`;
  out.push(`Replay of ${fileName}, device ${set.device}, on the simulated device: ${cap}`);
  const settings = settingsLine(set);
  if (settings) out.push(settings);
  if (check) out.push(`Self-check: ${replayCheckSentence(check)}`);
  out.push('');
  out.push(`${'policy'.padEnd(38)}${'peak reserved'.padStart(14)}${'peak alloc.'.padStart(13)}${'ratio'.padStart(9)}  OOM at capacity`);
  for (const r of set.results) {
    const own = check?.policy === r.policy ? ' (ran)' : '';
    if (!r.modelled) {
      out.push(`${(POLICY_LABELS[r.policy] + own).padEnd(38)}${'not modelled: no figure (below)'.padStart(36)}`);
      continue;
    }
    out.push(
      `${(POLICY_LABELS[r.policy] + own).padEnd(38)}${formatBytes(r.peakReservedBytes).padStart(14)}${formatBytes(r.peakAllocatedBytes).padStart(13)}${ratioText(r).padStart(9)}  ${oomText(r, set.t0Us)}`,
    );
  }
  for (const r of set.results) {
    const lines: string[] = [];
    if (!r.modelled) lines.push(`  not modelled, so not replayed: ${r.notModelled.join('; ')}`);
    // The engine's sentence names its own time and sizes; the table row above has the time on the panel's axis.
    if (r.oom) lines.push(`  out of memory (${r.oom.cause}): ${r.oom.sentence}`);
    const markers = r.emptyCacheAtMarkers.filter((m) => m.releasesBytes > 0);
    if (markers.length) {
      const top = [...markers].sort((a, b) => b.releasesBytes - a.releasesBytes || a.tUs - b.tUs).slice(0, MARKERS_SHOWN);
      lines.push(`  empty_cache() at markers would release (largest ${top.length} of ${markers.length}):`);
      for (const m of top.sort((a, b) => a.tUs - b.tUs)) lines.push(`    ${formatBytes(m.releasesBytes).padStart(10)} at ${seconds(m.tUs, set.t0Us)} "${m.name}"`);
    } else if (r.emptyCacheAtMarkers.length) {
      lines.push(`  empty_cache() at any of the ${r.emptyCacheAtMarkers.length} markers would release nothing`);
    }
    if (lines.length) out.push('', `${POLICY_LABELS[r.policy]}:`, ...lines);
  }
  return out.join('\n');
}

export function replayJson(file: string, set: ReplaySet, check?: ReplayCheck): object {
  return {
    file,
    device: set.device,
    capacity_bytes: set.capacity.bytes ?? null,
    capacity_source: set.capacity.source,
    ...(set.none ? { none: set.none } : {}),
    ...(check ? { replay_check: check } : {}),
    replays: set.results.map((r) => ({
      policy: r.policy,
      capacity_bytes: r.capacityBytes,
      modelled: r.modelled,
      not_modelled: r.notModelled,
      alloc_conf: r.allocConf,
      settings_source: r.settingsSource,
      peak_reserved_bytes: r.peakReservedBytes,
      peak_allocated_bytes: r.peakAllocatedBytes,
      ratio: r.ratio,
      peak_at_time_us: r.peakAtUs,
      peak_at_s: r.peakAtUs === null ? null : (r.peakAtUs - set.t0Us) / 1e6,
      empty_cache_at_markers: r.emptyCacheAtMarkers.map((m) => ({ time_us: m.tUs, name: m.name, releases_bytes: m.releasesBytes })),
      oom: r.oom && {
        time_us: r.oom.tUs,
        at_s: (r.oom.tUs - set.t0Us) / 1e6,
        requested_bytes: r.oom.requestedBytes,
        reserved_bytes: r.oom.reservedBytes,
        allocated_bytes: r.oom.allocatedBytes,
        cause: r.oom.cause,
        sentence: r.oom.sentence,
      },
    })),
  };
}
