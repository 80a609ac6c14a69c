// The workload's environment: how the launcher tells the bootstrap (native/python/sitecustomize.py)
// where to write and how to record. Variable names are the contract in native/python/README.md.
import * as path from 'node:path';

export type SegmentStrategy = 'expandable' | 'fixed';
export type Backend = 'cuda' | 'sim';
/**
 * Which allocator tracks the run (Note [Choosing the mode] in native/python/gpumem/_mode.py): `lens` swaps
 * in ours, `pytorch` observes PyTorch's own, `auto` lets the bootstrap choose from the script and the
 * environment and say why in one line.
 */
export type AllocatorMode = 'auto' | 'lens' | 'pytorch';
export const ALLOCATOR_MODES: readonly AllocatorMode[] = ['auto', 'lens', 'pytorch'];

export interface RecordingSettings {
  segments: SegmentStrategy;
  /**
   * Expandable segments give free pages back before raising the reserved peak (least memory; stream
   * synchronizations while a workload's layout settles). Off: PyTorch's expandable behaviour.
   */
  trimOnGrowth: boolean;
  /** Record the Python stack of every allocation. */
  stacks: boolean;
  /** Device-memory sampling period in ms; 0 = off. */
  sampleMs: number;
  /** `sim` runs the allocator on a simulated device (tests, no GPU). */
  backend?: Backend;
  simCapacity?: number;
  /** Disk budget of each capture in bytes, 0 = unbounded (Note [Capture budget], FORMAT.md §5). */
  budgetBytes?: number;
  /** Default `auto`. */
  allocator?: AllocatorMode;
}

/** The capture budget when none is set: 1 GiB (issue 16). */
export const DEFAULT_BUDGET_BYTES = 2 ** 30;

export const DEFAULT_SETTINGS: RecordingSettings = { segments: 'expandable', trimOnGrowth: true, stacks: true, sampleMs: 200 };

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

/** Throws with an actionable message when a setting has a value the bootstrap would reject. */
export function validateSettings(s: RecordingSettings): void {
  if (s.segments !== 'expandable' && s.segments !== 'fixed') {
    throw new Error(`Unknown segment strategy "${String(s.segments)}": use "expandable" or "fixed".`);
  }
  if (!Number.isInteger(s.sampleMs) || s.sampleMs < 0) {
    throw new Error(`Invalid sampling period ${String(s.sampleMs)} ms: use a whole number ≥ 0 (0 turns sampling off).`);
  }
  if (s.budgetBytes !== undefined && (!Number.isSafeInteger(s.budgetBytes) || s.budgetBytes < 0 || (s.budgetBytes > 0 && s.budgetBytes < 2 ** 20))) {
    throw new Error(`Invalid capture budget ${String(s.budgetBytes)} bytes: use 0 (unbounded) or at least 1 MiB, e.g. 1GiB.`);
  }
  if (s.allocator !== undefined && !ALLOCATOR_MODES.includes(s.allocator)) {
    throw new Error(`Unknown allocator mode "${String(s.allocator)}": use "auto", "lens" or "pytorch".`);
  }
  if (s.backend !== undefined && s.backend !== 'cuda' && s.backend !== 'sim') {
    throw new Error(`Unknown backend "${String(s.backend)}": use "cuda" or "sim".`);
  }
}

/**
 * GPUMEM_* variables a user sets on purpose (native/python/README.md): they pass through to the
 * workload. Every other GPUMEM_* is session plumbing, and a stale one from an outer tracked run must
 * not leak into this one.
 */
export const USER_ENV_SWITCHES: readonly string[] = ['GPUMEM_STRICT_COMPILE', 'GPUMEM_GIL_FREE_WALK'];

/**
 * The full environment for the workload: the base environment plus GPUMEM_* and PYTHONPATH with our
 * bootstrap folder first (so our sitecustomize runs; it chains any other one it finds later on the path).
 */
export function buildWorkloadEnv(opts: WorkloadEnvOptions): Record<string, string> {
  const settings: RecordingSettings = { ...DEFAULT_SETTINGS, ...(opts.settings ?? {}) };
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
  env.GPUMEM_SEGMENTS = settings.segments;
  env.GPUMEM_TRIM = settings.trimOnGrowth ? '1' : '0';
  env.GPUMEM_STACKS = settings.stacks ? '1' : '0';
  env.GPUMEM_SAMPLE_MS = String(settings.sampleMs);
  env.GPUMEM_BACKEND = settings.backend ?? 'cuda';
  env.GPUMEM_BUDGET = String(settings.budgetBytes ?? DEFAULT_BUDGET_BYTES);
  env.GPUMEM_ALLOCATOR = settings.allocator ?? 'auto'; // Note [Default allocator mode] in native/python/README.md
  if (settings.simCapacity !== undefined) env.GPUMEM_SIM_CAPACITY = String(settings.simCapacity);
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
