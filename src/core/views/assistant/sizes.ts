// Note [Sizes twice]: every size in an answer is given in bytes and in binary units (Note [Tool contract] in
// ./tools.ts). Answers are built with `*_bytes` fields only; this one pass adds, right after each, the same name
// without `_bytes` holding formatBytes' text ("peak_allocated_bytes": 1610612736, "peak_allocated": "1.50 GiB"),
// so no answer can forget a unit and the rule is stated once. A field named `bytes` gets `size` beside it.
import { formatBytes } from '../../base/units/bytes';

function humanKey(key: string): string | undefined {
  if (key === 'bytes') return 'size';
  return key.endsWith('_bytes') ? key.slice(0, -'_bytes'.length) : undefined;
}

export function withSizes(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withSizes);
  if (typeof value !== 'object' || value === null) return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    out[k] = withSizes(v);
    const h = humanKey(k);
    if (h !== undefined && typeof v === 'number' && !(h in value)) out[h] = formatBytes(v);
  }
  return out;
}
