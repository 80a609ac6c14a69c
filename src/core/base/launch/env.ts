// The workload's environment: how the launcher tells the bootstrap (native/python/sitecustomize.py)
// where to write and how to record. Variable names are the contract in native/python/README.md.
import * as path from 'node:path';
import { checkValue, toEnv } from '../settings/parse';
import { SETTINGS, USER_ENV_SWITCHES } from '../settings/table';

export type SegmentStrategy = 'expandable' | 'fixed';
export type Backend = 'cuda' | 'sim';
/**
 * Which allocator tracks the run (Note [Choosing the mode] in native/python/gpumem/_mode.py): `lens` swaps
 * in ours, `pytorch` observes PyTorch's own, `auto` lets the bootstrap choose from the script and the
 * environment and say why in one line.
 */
export type AllocatorMode = 'auto' | 'lens' | 'pytorch';

/**
 * The recording settings, by their keys in the settings table (src/core/base/settings/table.ts: what each one
 * means, its default and bounds, Note [Settings table]).
 */
export interface RecordingSettings {
  segments: SegmentStrategy;
  trimOnGrowth: boolean;
  stacks: boolean;
  /** false: backward's allocations on the backward() line (Note [Backward on the forward line] in native/allocator/src/backward_links.h) */
  backwardLinks?: boolean;
  /** false: figures only, nothing recorded per allocation (Note [Figures only] in native/python/gpumem/_observe.py) */
  events?: boolean;
  /** record allocations for the first N optimizer steps only; 0 = every step (Note [Recorded steps] in _recorded_steps.py) */
  recordSteps?: number;
  /** ms; 0 = off */
  sampleMs: number;
  backend?: Backend;
  /** bytes; 0 = the simulator's default */
  simCapacity?: number;
  /** bytes; 0 = unbounded (Note [Capture budget], FORMAT.md §5) */
  budgetBytes?: number;
  allocator?: AllocatorMode;
}

export interface WorkloadEnvOptions {
  sessionDir: string;
  /** Absolute path of libgpumem_allocator.so. */
  allocatorSo: string;
  /** Folder holding sitecustomize.py and the gpumem package (the extension's native/python). */
  pythonPathPrefix: string;
  settings?: Partial<RecordingSettings>;
  /** Folders whose files count as user code for line attribution (workspace folders). */
  userRoots?: string[];
  /** Environment to extend; defaults to process.env. Never mutated. */
  baseEnv?: NodeJS.ProcessEnv;
}

/**
 * Throws the table's message (Note [Settings table]) when a setting has a value the bootstrap would reject; the
 * value is named by the variable it is about to be written to.
 */
export function validateSettings(s: Partial<RecordingSettings>): void {
  for (const d of SETTINGS) {
    const v = s[d.key];
    if (v !== undefined) checkValue(d, v, d.env);
  }
}

/**
 * The full environment for the workload: the base environment plus GPUMEM_* and PYTHONPATH with our
 * bootstrap folder first (so our sitecustomize runs; it chains any other one it finds later on the path).
 */
export function buildWorkloadEnv(opts: WorkloadEnvOptions): Record<string, string> {
  const settings: Partial<RecordingSettings> = opts.settings ?? {};
  validateSettings(settings);
  for (const [what, p] of [
    ['session folder', opts.sessionDir],
    ['allocator library', opts.allocatorSo],
    ['bootstrap folder', opts.pythonPathPrefix],
  ] as const) {
    if (!path.isAbsolute(p)) throw new Error(`The ${what} path must be absolute, got "${p}".`);
  }
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(opts.baseEnv ?? process.env)) {
    if (v !== undefined && (!k.startsWith('GPUMEM_') || USER_ENV_SWITCHES.includes(k))) env[k] = v;
  }
  env.GPUMEM_SESSION_DIR = opts.sessionDir;
  env.GPUMEM_ALLOCATOR_SO = opts.allocatorSo;
  for (const d of SETTINGS) {
    const v = settings[d.key] ?? d.default;
    // a default that means none (the simulator's own capacity) needs no variable: absent is the default
    if (!(v === 0 && d.default === 0 && d.zero)) env[d.env] = toEnv(d, v);
  }
  if (opts.userRoots && opts.userRoots.length > 0) env.GPUMEM_USER_ROOTS = opts.userRoots.join(path.delimiter);
  env.PYTHONPATH = prependPath(opts.pythonPathPrefix, env.PYTHONPATH);
  return env;
}

/** `prefix` first, then the entries of `existing` (without duplicating `prefix`). */
export function prependPath(prefix: string, existing: string | undefined): string {
  if (!existing) return prefix;
  // Empty entries mean "the current directory" to Python: keep them, the user wrote them.
  const rest = existing.split(path.delimiter).filter((p) => p !== prefix);
  return [prefix, ...rest].join(path.delimiter);
}
