// The leak keeper: the line that keeps a leak's memory alive, as the workload found it.
//
// The bootstrap writes it as one notice (Note [Leak keeper search] in native/python/gpumem/_keeper.py): a sentence,
// then a line `gpumem-keeper {json}`. The model splits that line off (splitKeeperNotice in
// src/core/base/model/keeperNotice.ts, called by open.ts's markers()),
// so every view that lists notices shows the sentence, and keepers() reads the JSON back from the marker's detail.
// attachKeepers() ties each keeper to the finding it explains by address (Note [Leak keeper]).
import type { Marker, Model } from '../../base/model/types';
import { userFrame } from '../../base/model/frames';
import type { LeakFinding } from './leaks';

export interface Keeper {
  /** the notice's time (the step end the search confirmed the keeper at) */
  timeUs: number;
  device: number;
  /** the bootstrap's count of step ends when it confirmed */
  step: number;
  /** 'end': read again at the process's exit, its figures are the end's (Note [Keeper at the end] in _keeper.py) */
  at: 'step' | 'end';
  /** the keeping line: history.append(…) (how 'stores'), else the assignment of the name (how 'assigns'); 0 when unknown */
  file: string;
  line: number;
  how: 'stores' | 'assigns' | '';
  /** the source of that line, trimmed */
  code: string;
  /** the name that holds the tensors: "history", "self.log", a module global; '' when unnamed */
  container: string;
  containerType: string;
  /** the function (or "<module>") whose frame names the container */
  scope: string;
  /** kept tensors with autograd graphs that outlived a step end */
  tensors: number;
  /** bytes of their storages and of what their graphs still save (each storage once) */
  bytes: number;
  /** false when the graph walk stopped at its bound: bytes are a lower bound */
  complete: boolean;
  /** base addresses of the storages held (kept tensors and what their graphs save), largest first: all of them up to the bootstrap's MAX_ADDRS */
  addrs: number[];
}

function num(v: unknown, fallback = 0): number {
  return typeof v === 'number' && Number.isFinite(v) ? v : fallback;
}

function str(v: unknown): string {
  return typeof v === 'string' ? v : '';
}

/** The keeper a marker carries, or undefined (not a keeper notice, or JSON this reader cannot use). */
export function keeperOf(m: Marker): Keeper | undefined {
  const raw = m.detail?.keeper;
  if (typeof raw !== 'string') return undefined;
  let j: Record<string, unknown>;
  try {
    j = JSON.parse(raw) as Record<string, unknown>;
  } catch {
    return undefined;
  }
  if (!j || typeof j !== 'object' || num(j.v) < 1) return undefined;
  const how = str(j.how);
  return {
    timeUs: m.timeUs,
    device: num(j.device, m.device),
    step: num(j.step),
    at: j.at === 'end' ? 'end' : 'step',
    file: str(j.file),
    line: num(j.line),
    how: how === 'stores' || how === 'assigns' ? how : '',
    code: str(j.code),
    container: str(j.container),
    containerType: str(j.container_type),
    scope: str(j.scope),
    tensors: num(j.tensors),
    bytes: num(j.bytes),
    complete: j.complete !== false,
    addrs: Array.isArray(j.addrs) ? j.addrs.filter((a): a is number => typeof a === 'number') : [],
  };
}

/** The keepers found for `device` (notices are process-wide: every device's markers are read, each keeper once). */
export function keepers(model: Model, device: number): Keeper[] {
  const seen = new Set<string>();
  const out: Keeper[] = [];
  for (const d of model.devices()) {
    for (const m of model.markers(d)) {
      const k = keeperOf(m);
      if (!k || k.device !== device) continue;
      const key = `${m.timeUs} ${m.detail?.keeper}`;
      if (seen.has(key)) continue;
      seen.add(key);
      out.push(k);
    }
  }
  return out.sort((a, b) => a.timeUs - b.timeUs);
}

export interface KeptLeak extends LeakFinding {
  keeper?: Keeper;
  /** how the keeper was tied to this finding: the line that allocated its blocks, or (none matched) the largest finding */
  keeperMatch?: 'address' | 'largest';
}

// Note [Leak keeper]: a finding names the line that *allocated* the growing memory (for history.append(loss): the
// forward line that made the loss); the keeper names the line that *keeps* it (the append), found in the workload
// (Note [Leak keeper search]). A keeper is tied to a finding by address: the allocator state at the keeper's notice
// holds the blocks at its addresses, and the innermost user frame of each block's stack is the line that allocated
// it (DESIGN §3); a finding on that line gets the keeper. The notice lists every storage the kept tensors and their
// graphs hold (Note [Keeper graph walk]), so a retained graph's keeper is named on each forward line whose saved
// activations it keeps, not only on the line of the kept tensor itself. When no address lands on a finding's line (the blocks'
// stacks are unknown, or the kept tensors are small next to what their graphs save), the latest keeper goes to the
// largest finding, marked 'largest' so views can say "probably". The state is computed once per keeper and model.
const matches = new WeakMap<Model, Map<string, string[]>>();

function allocatingLines(model: Model, k: Keeper): string[] {
  let cache = matches.get(model);
  if (!cache) matches.set(model, (cache = new Map()));
  const key = `${k.device} ${k.timeUs} ${k.addrs.join(',')}`;
  const hit = cache.get(key);
  if (hit) return hit;
  const lines: string[] = [];
  if (k.addrs.length) {
    // every held address (up to the bootstrap's MAX_ADDRS, Note [Keeper graph walk]), each looked up by binary search
    const blocks = model
      .stateAt(k.device, k.timeUs)
      .segments.flatMap((s) => s.blocks)
      .filter((b) => b.state !== 'inactive')
      .sort((a, b) => a.address - b.address);
    const seen = new Set<string>();
    for (const a of k.addrs) {
      let lo = 0;
      let hi = blocks.length - 1;
      while (lo < hi) {
        const mid = (lo + hi + 1) >> 1;
        if (blocks[mid].address <= a) lo = mid;
        else hi = mid - 1;
      }
      const b = blocks[lo];
      const f = b && a >= b.address && a < b.address + b.size && b.stackId ? userFrame(model.stack(b.stackId)?.frames ?? []) : undefined;
      const at = f && `${f.file}:${f.line}`;
      if (at && !seen.has(at)) {
        seen.add(at);
        lines.push(at);
      }
    }
  }
  cache.set(key, lines);
  return lines;
}

/** The findings with the keeper each one has (if any); findings keep their order. */
export function attachKeepers(model: Model, device: number, leaks: readonly LeakFinding[]): KeptLeak[] {
  const out: KeptLeak[] = leaks.map((l) => ({ ...l }));
  const ks = leaks.length ? keepers(model, device) : [];
  if (!ks.length) return out;
  let unmatched: Keeper | undefined;
  for (const k of ks) {
    const lines = new Set(allocatingLines(model, k));
    let hit = false;
    for (const l of out) {
      if (lines.has(`${l.file}:${l.line}`)) {
        l.keeper = k; // a later keeper of the same line replaces an earlier one
        l.keeperMatch = 'address';
        hit = true;
      }
    }
    if (!hit) unmatched = k;
  }
  const largest = out.reduce<KeptLeak | undefined>((a, b) => (!a || b.growthPerStepBytes > a.growthPerStepBytes ? b : a), undefined);
  if (unmatched && largest && !largest.keeper) {
    largest.keeper = unmatched;
    largest.keeperMatch = 'largest';
  }
  return out;
}
