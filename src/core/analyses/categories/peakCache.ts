// Note [Hover categories while growing]: the hover's bytes by category at the peak cost one pass over the whole
// trace (Note [Categories]); the annotations recompute every 500 ms while a capture grows. The categories at the
// peak change only when the peak moves (a new, higher peak) or when a later tag recategorises
// memory live at it (tags come at optimizer steps). So they are recomputed when the peak (its time and bytes)
// changed, and otherwise at most every `maxAgeMs` (default 5 s): a grown capture pays one pass per new peak, not
// two per second.
import type { CategoryMoment, Model } from '../../base/model/types';

interface Entry {
  key: string;
  at: number;
  peak: CategoryMoment | null;
}

export class PeakCategoriesCache {
  private readonly entries = new WeakMap<Model, Map<number, Entry>>();
  /** passes over the trace made so far (for tests) */
  computed = 0;

  constructor(
    private readonly maxAgeMs = 5000,
    private readonly now: () => number = Date.now,
  ) {}

  /** The categories (with lines) at the device's peak, recomputed only as the note says. */
  get(model: Model, device: number): CategoryMoment | null {
    const cur = model.current(device);
    // a new peak is a higher one: the peak's bytes name it
    const key = String(cur.peakAllocatedBytes);
    let perDevice = this.entries.get(model);
    if (!perDevice) this.entries.set(model, (perDevice = new Map()));
    const e = perDevice.get(device);
    const t = this.now();
    if (e && e.key === key && t - e.at < this.maxAgeMs) return e.peak;
    this.computed++;
    const peak = model.categories(device, [], true).peak;
    perDevice.set(device, { key, at: t, peak });
    return peak;
  }
}
