// `gpumem run`: create a session folder, run the workload unchanged under the lens, report the captures.
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import {
  buildCommand,
  buildWorkloadEnv,
  findPython,
  locateInstall,
  observerBuildCommand,
  startObserverBuildAhead,
  type Command,
  type InstallPaths,
} from '../../core/base/launch';
import { createSessionFolder } from '../../core/base/sessionFolder';
import type { RecordingSettings } from '../../core/base/launch/env';
import { parseText, type SettingValue } from '../../core/base/settings/parse';
import { SETTINGS, type SettingDecl } from '../../core/base/settings/table';
import { parseArgs, str, UsageError, type OptionSpec, type Parsed } from './args';

// Note [Same options]: `gpumem run` and `python3 -m gpumem run` take the same options: the settings table's
// (Note [Settings table]: --allocator, --segments, --no-trim, --no-stacks, --figures-only, --sample-ms, --budget, --backend), read
// and refused by the table's rules, plus --out, --python and --allocator-so; test/unit/settings.test.mjs compares
// both CLIs' options and their refusals.
const SETTING_OPTIONS = SETTINGS.filter((d) => d.cli !== undefined);

const SPEC: Record<string, OptionSpec> = {
  out: { value: true },
  python: { value: true },
  ...Object.fromEntries(SETTING_OPTIONS.map((d) => [optionName(d), d.kind === 'flag' ? {} : { value: true }])),
  'allocator-so': { value: true },
  help: {},
  h: {},
};

/** `gpumem run`'s options, as typed (Note [Same options]: `python3 -m gpumem run` has exactly these). */
export function runOptions(): string[] {
  return Object.keys(SPEC)
    .filter((k) => k !== 'help' && k !== 'h')
    .map((k) => `--${k}`);
}

/** `--budget` → "budget" (the parser's key). */
function optionName(d: SettingDecl): string {
  return (d.cli ?? '').replace(/^--/, '');
}

/** The recording settings given on the command line, each read by the table's rule (a flag's option turns it off). */
export function settingsFromOptions(p: Parsed): Partial<RecordingSettings> {
  const out: Partial<Record<SettingDecl['key'], SettingValue>> = {};
  for (const d of SETTING_OPTIONS) {
    if (d.kind === 'flag') {
      if (p.options.has(optionName(d))) out[d.key] = false;
      continue;
    }
    const text = str(p, optionName(d));
    if (text === undefined) continue;
    try {
      out[d.key] = parseText(d, text, d.cli ?? d.key);
    } catch (e) {
      throw new UsageError((e as Error).message, 'run');
    }
  }
  return out as Partial<RecordingSettings>;
}

export interface RunDeps {
  /** Where dist/ and native/python are; defaults to the bundle's location. */
  install?: () => InstallPaths;
  stderr?: (s: string) => void;
}

/** The workload command: `script.py …` and `-m mod …` get the interpreter; anything else runs as given. */
export function workloadCommand(positionals: string[], python: () => string): { command: Command; name: string } {
  const [first, ...rest] = positionals;
  if (first === undefined) throw new UsageError('nothing to run: give a script (gpumem run train.py) or -m module', 'run');
  if (first === '-m') {
    const [mod, ...args] = rest;
    if (!mod) throw new UsageError('-m needs a module name, e.g. gpumem run -m mypkg.train', 'run');
    return { command: buildCommand(python(), { kind: 'module', name: mod }, args), name: mod };
  }
  if (first.endsWith('.py')) {
    if (!fs.existsSync(first)) throw new UsageError(`no such script: ${first}`, 'run');
    return { command: buildCommand(python(), { kind: 'script', path: first }, rest), name: first };
  }
  // A launcher such as torchrun: its Python children inherit the environment and are tracked.
  return { command: { file: first, args: rest }, name: rest.find((a) => a.endsWith('.py')) ?? first };
}

export async function run(argv: string[], deps: RunDeps = {}): Promise<number> {
  const p = parseArgs('run', argv, SPEC, true);
  if (p.options.has('help') || p.options.has('h')) return -1; // main prints the help
  const err = deps.stderr ?? ((s: string) => process.stderr.write(s));
  const settings = settingsFromOptions(p);
  const { command, name } = workloadCommand(p.positionals, () => findPython(str(p, 'python')));
  const install = (deps.install ?? (() => locateInstall(__dirname)))();
  const allocatorSo = str(p, 'allocator-so');
  if (allocatorSo !== undefined && !fs.existsSync(allocatorSo)) {
    throw new UsageError(`--allocator-so: no such file: ${allocatorSo} (build it with make -C native/allocator)`, 'run');
  }
  const cwd = process.cwd();
  const folder = createSessionFolder(str(p, 'out') ?? path.join(cwd, '.gpumem'), name, { command: [command.file, ...command.args], cwd });
  const env = buildWorkloadEnv({
    sessionDir: folder.dir,
    allocatorSo: allocatorSo !== undefined ? path.resolve(allocatorSo) : install.allocatorSo,
    pythonPathPrefix: install.pythonDir,
    settings,
    userRoots: [cwd],
  });
  err(`gpumem: session folder ${folder.dir}\n`);
  // Note [Observer build ahead]: the PyTorch-allocator mode's observer builds beside the workload's own start.
  const mode = settings.allocator ?? 'auto';
  if ((mode === 'auto' || mode === 'pytorch') && (settings.backend ?? 'cuda') === 'cuda') {
    startObserverBuildAhead(observerBuildCommand(findPython(str(p, 'python')), install.pythonDir, process.env));
  }
  const code = await spawnWorkload(command, env, err);
  reportCaptures(folder.dir, err);
  return code;
}

function spawnWorkload(command: Command, env: Record<string, string>, err: (s: string) => void): Promise<number> {
  return new Promise((resolve) => {
    const child = spawn(command.file, command.args, { stdio: 'inherit', env });
    // In a terminal, Ctrl-C already reaches the workload (same foreground process group); a forwarded
    // copy would interrupt its KeyboardInterrupt handling. Forward what the terminal did not deliver.
    const forward = (sig: NodeJS.Signals) => () => {
      if (sig === 'SIGINT' && process.stdin.isTTY) return;
      child.kill(sig);
    };
    const onInt = forward('SIGINT');
    const onTerm = forward('SIGTERM');
    process.on('SIGINT', onInt);
    process.on('SIGTERM', onTerm);
    const done = (code: number) => {
      process.off('SIGINT', onInt);
      process.off('SIGTERM', onTerm);
      resolve(code);
    };
    child.on('error', (e: NodeJS.ErrnoException) => {
      err(
        e.code === 'ENOENT'
          ? `gpumem run: cannot start "${command.file}": not found. Pass --python PATH or check the command.\n`
          : `gpumem run: cannot start "${command.file}": ${e.message}\n`,
      );
      done(127);
    });
    child.on('exit', (code, signal) => {
      // A shell reports death by signal N as 128+N; do the same so callers can tell Ctrl-C apart.
      const signum = signal ? os.constants.signals[signal] : 0;
      done(code ?? 128 + signum);
    });
  });
}

function reportCaptures(sessionDir: string, err: (s: string) => void): void {
  const captures = fs.readdirSync(sessionDir).filter((f) => f.endsWith('.gpumem')).sort();
  if (captures.length === 0) {
    err('gpumem: no capture was written: the workload never used CUDA, or tracking was off (see the messages above).\n');
    return;
  }
  for (const c of captures) err(`gpumem: capture ${path.join(sessionDir, c)}\n`);
}
