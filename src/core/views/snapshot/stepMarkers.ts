// Steps numbered on the snapshot timeline: the step fact that ends each detected step (Note [Steps])
// is labelled with the step's number, "step 3 · optimizer.step"; a step whose end has no marker of its own
// (numbered user marks already say their number) gets one. Other facts (a backward() inside a step with
// gradient accumulation) keep their plain label, so the numbered ones are the iterations users count.
import type { MarkerView } from '../../base/protocol/snapshot';
import type { Steps } from '../../analyses/steps';

/** inPlace: the markers are the caller's own copies, labelled where they are (Note [Markers answer cost]). */
export function numberSteps(markers: readonly MarkerView[], steps: Steps, inPlace = false): MarkerView[] {
  if (!steps.steps.length) return [...markers];
  const out = inPlace ? (markers as MarkerView[]) : markers.map((m) => ({ ...m }));
  const byTime = new Map<number, MarkerView>();
  for (const m of out) if (m.kind === 'step' && !byTime.has(m.timeUs)) byTime.set(m.timeUs, m);
  const added: MarkerView[] = [];
  for (const s of steps.steps) {
    const m = byTime.get(s.endUs);
    if (m) m.label = `step ${s.index} · ${m.label}`;
    else added.push({ timeUs: s.endUs, kind: 'step', label: `step ${s.index}` });
  }
  // steps in time order are merged in one pass (as the stable sort of [...out, ...added]: out's first on a tie)
  return added.length ? mergeByTime(out, added) : out;
}

export function inTimeOrder(ms: readonly { timeUs: number }[]): boolean {
  for (let i = 1; i < ms.length; i++) if (!(ms[i - 1].timeUs <= ms[i].timeUs)) return false;
  return true;
}

/** a and b each in time order: the stable sort of [...a, ...b] by time (a's first on a tie), in one pass. */
export function mergeByTime<T extends { timeUs: number }>(a: readonly T[], b: readonly T[]): T[] {
  if (!inTimeOrder(a) || !inTimeOrder(b)) return [...a, ...b].sort((x, y) => x.timeUs - y.timeUs);
  const out: T[] = new Array(a.length + b.length);
  let i = 0;
  let j = 0;
  let k = 0;
  while (i < a.length && j < b.length) out[k++] = b[j].timeUs < a[i].timeUs ? b[j++] : a[i++];
  while (i < a.length) out[k++] = a[i++];
  while (j < b.length) out[k++] = b[j++];
  return out;
}
