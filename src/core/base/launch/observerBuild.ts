// Building the PyTorch-allocator mode's observer ahead of a run (no vscode import).
//
// Note [Observer build ahead] (native/python/gpumem/_observer_build.py): the observer is a small C++ extension built
// against the user's torch, once per torch version (~25 s). VS Code builds it in the background when the Python
// environment changes (src/glue/runs/observerBuild.ts shows progress only while it really builds); `gpumem run`
// starts the same build beside the workload, so it overlaps the workload's own start. Both run
// `python -m gpumem build-observer --json` with the bootstrap's folder on PYTHONPATH and no GPUMEM_ variable
// (the build must not be tracked itself).
import { spawn } from 'node:child_process';
import { prependPath } from './env';

/** What `build-observer --json` says: a line when a build starts, then the result. */
export interface ObserverBuildStart {
  building: true;
  torch: string;
  folder: string;
}
export interface ObserverBuildResult {
  built: boolean;
  /** true: it was built before; nothing was compiled */
  already: boolean;
  torch?: string;
  folder?: string;
  /** why it was not built (no torch, no compiler, the build failed) */
  why?: string | null;
  /** true: this torch is built without CUDA, so there is nothing to observe (not a failure to report) */
  no_cuda?: boolean;
  seconds?: number;
}

export interface ObserverBuildCommand {
  file: string;
  args: string[];
  env: Record<string, string>;
}

export function observerBuildCommand(python: string, pythonDir: string, baseEnv: NodeJS.ProcessEnv): ObserverBuildCommand {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(baseEnv)) if (v !== undefined && !k.startsWith('GPUMEM_')) env[k] = v;
  env.PYTHONPATH = prependPath(pythonDir, env.PYTHONPATH);
  return { file: python, args: ['-m', 'gpumem', 'build-observer', '--json'], env };
}

/** One line of `build-observer --json`; undefined for anything else (a library's own output). */
export function parseObserverBuildLine(line: string): ObserverBuildStart | ObserverBuildResult | undefined {
  const t = line.trim();
  if (!t.startsWith('{')) return undefined;
  try {
    const o = JSON.parse(t) as Record<string, unknown>;
    if (o.building === true && typeof o.torch === 'string') return { building: true, torch: o.torch, folder: String(o.folder ?? '') };
    if (typeof o.built === 'boolean') return o as unknown as ObserverBuildResult;
  } catch {
    // not ours
  }
  return undefined;
}

/**
 * Runs the build and resolves with its result; `onStart` is called when a build really starts (not when the observer
 * was built before, or cannot be built). A process that dies or says nothing resolves as not built, with why.
 */
export function buildObserver(cmd: ObserverBuildCommand, onStart?: (s: ObserverBuildStart) => void): Promise<ObserverBuildResult> {
  return new Promise((resolve) => {
    let result: ObserverBuildResult | undefined;
    let pending = '';
    let stderr = '';
    const child = spawn(cmd.file, cmd.args, { env: cmd.env, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      pending += chunk;
      let nl: number;
      while ((nl = pending.indexOf('\n')) >= 0) {
        const e = parseObserverBuildLine(pending.slice(0, nl));
        pending = pending.slice(nl + 1);
        if (e && 'building' in e) onStart?.(e);
        else if (e) result = e;
      }
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr = (stderr + chunk).slice(-2000);
    });
    child.on('error', (e) => resolve({ built: false, already: false, why: `cannot run ${cmd.file}: ${e.message}` }));
    child.on('close', (code) => {
      const last = parseObserverBuildLine(pending);
      if (last && !('building' in last)) result = last;
      const lastLine = stderr.trim().split('\n').pop() ?? '';
      resolve(result ?? { built: false, already: false, why: `${cmd.file} -m gpumem build-observer exited with ${code}${lastLine ? `: ${lastLine}` : ''}` });
    });
  });
}

/** `gpumem run`: the same build, detached and silent, beside the workload (it never waits for it). */
export function startObserverBuildAhead(cmd: ObserverBuildCommand): void {
  try {
    const child = spawn(cmd.file, cmd.args, { env: cmd.env, stdio: 'ignore', detached: true });
    child.on('error', () => undefined); // the workload builds it itself at its first CUDA use
    child.unref();
  } catch {
    // same
  }
}
