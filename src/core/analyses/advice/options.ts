// What `gpumem advise` is asked with, beyond the model and the device (./index.ts, ./training.ts).
import type { Model } from '../../base/model/types';

/** A second run of the same script at another batch size (`gpumem advise A B`), and the batches of both. */
export interface AdviseOptions {
  capacityBytes?: number;
  /** this file's name and batch (default: from its command line) */
  file?: string;
  batch?: number;
  other?: { model: Model; file: string; batch?: number };
}
