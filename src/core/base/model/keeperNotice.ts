// A leak keeper's notice as the model reads it (Note [Leak keeper] in src/core/analyses/steps/keeper.ts): the
// bootstrap writes one notice, a sentence then a line `gpumem-keeper {json}` (Note [Leak keeper search] in
// native/python/gpumem/_keeper.py); the model's markers() splits the line off, so every view that lists notices
// shows the sentence, and keepers() reads the JSON back from the marker's detail.
import type { Marker } from './types';

export const KEEPER_PREFIX = 'gpumem-keeper ';

/** A notice marker's text: the sentence and the keeper's JSON split apart (the JSON goes into detail.keeper). */
export function splitKeeperNotice(m: Marker): Marker {
  if (m.kind !== 'notice') return m;
  const at = m.label.indexOf('\n' + KEEPER_PREFIX);
  if (at < 0) return m;
  return { ...m, label: m.label.slice(0, at), detail: { ...(m.detail ?? {}), keeper: m.label.slice(at + 1 + KEEPER_PREFIX.length) } };
}
