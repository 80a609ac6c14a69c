// Steps numbered on the snapshot timeline (issue 17): the step fact that ends each detected step (Note [Steps])
// is labelled with the step's number, "step 3 · optimizer.step"; a step whose end has no marker of its own
// (numbered user marks already say their number) gets one. Other facts (a backward() inside a step with
// gradient accumulation) keep their plain label, so the numbered ones are the iterations users count.
import type { MarkerView } from '../../base/protocol/snapshot';
import type { Steps } from '../../analyses/steps';

export function numberSteps(markers: readonly MarkerView[], steps: Steps): MarkerView[] {
  if (!steps.steps.length) return [...markers];
  const out = markers.map((m) => ({ ...m }));
  const byTime = new Map<number, MarkerView>();
  for (const m of out) if (m.kind === 'step' && !byTime.has(m.timeUs)) byTime.set(m.timeUs, m);
  const added: MarkerView[] = [];
  for (const s of steps.steps) {
    const m = byTime.get(s.endUs);
    if (m) m.label = `step ${s.index} · ${m.label}`;
    else added.push({ timeUs: s.endUs, kind: 'step', label: `step ${s.index}` });
  }
  return added.length ? [...out, ...added].sort((a, b) => a.timeUs - b.timeUs) : out;
}
