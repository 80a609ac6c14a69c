// The text of `gpumem summary DIR…`: one row per rank, then what stands out.
import path from 'node:path';
import { formatBytes } from '../../base/units/bytes';
import type { RankTable } from './index';

export function rankTableText(t: RankTable): string {
  const out: string[] = [];
  out.push(`${t.ranks.length} capture${t.ranks.length === 1 ? '' : 's'}; median peak allocated ${formatBytes(t.median_peak_allocated_bytes)}`);
  out.push(
    ['rank'.padStart(5), 'host'.padEnd(12), 'device'.padEnd(24), 'peak alloc.'.padStart(11), 'peak reserved'.padStart(13), 'OOMs'.padStart(4), '', 'top line at the peak'].join(' '),
  );
  for (const r of t.ranks) {
    const rank = r.rank === null ? '?' : r.world_size ? `${r.rank}/${r.world_size}` : String(r.rank);
    const device = r.device === null ? '—' : `cuda:${r.device} ${r.device_name ?? ''}`.trim();
    const top = r.top_line ? `${path.basename(r.top_line.file)}:${r.top_line.line} (${formatBytes(r.top_line.bytes_at_peak)})` : '—';
    const flag = r.flag === 'high' ? '▲' : r.flag === 'low' ? '▼' : ' ';
    out.push(
      [rank.padStart(5), (r.host ?? '?').slice(0, 12).padEnd(12), device.slice(0, 24).padEnd(24), formatBytes(r.peak_allocated_bytes).padStart(11),
        formatBytes(r.peak_reserved_bytes).padStart(13), String(r.ooms).padStart(4), flag, top].join(' '),
    );
  }
  // Note [Rank flags] (index.ts): how far each flagged rank is from the reference, named as a rank when there are two.
  const ref = t.ranks.length === 2 ? `rank ${t.reference_rank ?? '?'}` : `the median rank's ${formatBytes(t.reference_peak_allocated_bytes)}`;
  for (const r of t.ranks.filter((x) => x.flag)) {
    const share = t.reference_peak_allocated_bytes > 0 ? `${Math.round((Math.abs(r.apart_bytes) / t.reference_peak_allocated_bytes) * 100)} %` : '∞ %';
    const high = r.flag === 'high';
    out.push(
      `${high ? '▲' : '▼'} rank ${r.rank ?? '?'} peaks at ${formatBytes(r.peak_allocated_bytes)}, ${formatBytes(Math.abs(r.apart_bytes))} (${share}) ` +
        `${high ? 'above' : 'below'} ${ref}` +
        (high ? ': it will run out of memory first.' : ': uneven sharding, or it did less work?') + ` (${r.file})`,
    );
  }
  const ooms = t.ranks.filter((r) => r.ooms > 0);
  if (ooms.length) out.push(`Out of memory on rank ${ooms.map((r) => r.rank ?? '?').join(', ')}: gpumem summary FILE shows each OOM with its line.`);
  for (const r of t.ranks) for (const p of r.problems) out.push(`note: ${r.file}: ${p}`);
  return out.join('\n');
}
