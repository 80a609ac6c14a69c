// Which recording a tool call is about, and keeping it open between calls.
//
// Note [Recordings kept open]: an assistant asks several tools about the same file in a row (summary, then lines,
// then advice); reading a 10 M-event capture takes seconds, so the last few files read stay open, keyed by path and
// reopened when their size or modification time changes (a capture that is still growing). Answers are computed
// synchronously once the file is open (every analysis is a native call), so a model handed to one call cannot be
// closed by another call's eviction while it is in use.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Model } from '../../base/model/types';
import { captureFiles } from '../../analyses/ranks';
import type { LiveProcess, LiveTarget } from './answers/subject';
import { ToolError } from './answers/toolError';

export type { LiveLookup, LiveProcess, LiveTarget, Recording } from './answers/subject';

export type OpenRecording = (file: string) => Promise<Model>;

const KEEP_OPEN = 3;

export class RecordingCache {
  private readonly open = new Map<string, { model: Model; stamp: string }>();

  constructor(private readonly read: OpenRecording) {}

  async get(file: string): Promise<Model> {
    const stamp = stampOf(file);
    const hit = this.open.get(file);
    if (hit && hit.stamp === stamp) {
      this.open.delete(file); // most recently used last
      this.open.set(file, hit);
      return hit.model;
    }
    if (hit) this.drop(file);
    let model: Model;
    try {
      model = await this.read(file);
    } catch (e) {
      throw new ToolError(`${file} could not be read: ${(e as Error).message}`);
    }
    this.open.set(file, { model, stamp });
    while (this.open.size > KEEP_OPEN) this.drop(this.open.keys().next().value as string);
    return model;
  }

  private drop(file: string): void {
    const e = this.open.get(file);
    this.open.delete(file);
    try {
      e?.model.close();
    } catch {
      // closing is best effort: the model holds no resource worth failing a call for
    }
  }

  dispose(): void {
    for (const f of [...this.open.keys()]) this.drop(f);
  }
}

function stampOf(file: string): string {
  const st = fs.statSync(file);
  return `${st.size} ${st.mtimeMs}`;
}

/** An absolute path for a path the model gave (`~` is the home folder; relative paths start at `baseDir`). */
export function resolvePath(given: string, baseDir: string): string {
  const p = given.trim();
  if (p === '~' || p.startsWith('~/')) return path.join(os.homedir(), p.slice(1));
  return path.resolve(baseDir, p);
}

/**
 * The file a path names: a capture or pickle as is; a folder holding exactly one capture, that capture (a session
 * folder of a one-process run). Throws a ToolError that says what exists instead.
 */
export function recordingFile(given: string, baseDir: string): { file: string; note?: string } {
  const file = resolvePath(given, baseDir);
  let st: fs.Stats;
  try {
    st = fs.statSync(file);
  } catch {
    const shown = file === given ? file : `${file} (from "${given}")`;
    throw new ToolError(`no file at ${shown}: pass the path of a .gpumem capture or a PyTorch snapshot .pickle`);
  }
  if (!st.isDirectory()) return { file };
  let found: string[];
  try {
    found = captureFiles([file]);
  } catch (e) {
    throw new ToolError(`${file} is a folder that could not be read: ${(e as Error).message}`);
  }
  if (found.length === 1) return { file: found[0], note: `the one capture in ${file}` };
  if (found.length === 0) throw new ToolError(`${file} is a folder with no capture (*.gpumem) in it: pass a capture or a snapshot .pickle`);
  const shown = found.slice(0, 8).map((f) => path.relative(file, f));
  throw new ToolError(
    `${file} holds ${found.length} captures (one per process): pass one of them as path: ${shown.join(', ')}${found.length > shown.length ? ', …' : ''}`,
  );
}

/** The live run's process to answer about: rank 0 (or the first), with a note naming the others. */
export function liveProcess(target: LiveTarget): { process: LiveProcess; note: string } {
  if (target.processes.length === 0) {
    throw new ToolError(`the run ${target.name} has no process with a capture yet (it has not initialised CUDA): ask again in a moment`);
  }
  const sorted = [...target.processes].sort((a, b) => (a.rank ?? 1e9) - (b.rank ?? 1e9) || a.pid - b.pid);
  const p = sorted[0];
  const who = p.rank !== undefined ? `rank ${p.rank} (pid ${p.pid})` : `pid ${p.pid}`;
  let note = `${target.running ? 'the workload running now' : 'the last run (finished)'}: ${target.name}, ${who}`;
  if (sorted.length > 1) note += `; its other processes: ${sorted.slice(1, 8).map((o) => o.capture).join(', ')} (pass one as path)`;
  return { process: p, note };
}
