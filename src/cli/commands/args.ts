// A small, strict argument parser for the CLI: known options only, values for options that take
// one, `--` ends options; for `run`, the first positional (the script) ends options too, so the
// workload's own flags (`train.py --lr 0.1`) are never taken for ours.
import { parseBytes } from '../../core/base/units/parseBytes';

export class UsageError extends Error {
  constructor(
    message: string,
    readonly command: string,
  ) {
    super(message);
    this.name = 'UsageError';
  }
}

export interface OptionSpec {
  /** Takes a value (`--out DIR` or `--out=DIR`). */
  value?: boolean;
  /** Allowed values, for a clear error on a typo. */
  choices?: readonly string[];
}

export interface Parsed {
  options: Map<string, string | true>;
  positionals: string[];
}

export function parseArgs(
  command: string,
  argv: string[],
  spec: Record<string, OptionSpec>,
  stopAtFirstPositional = false,
): Parsed {
  const options = new Map<string, string | true>();
  const positionals: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--') {
      positionals.push(...argv.slice(i + 1));
      break;
    }
    if (a.startsWith('--') || (a.startsWith('-') && a.length > 1 && a !== '-m')) {
      const eq = a.indexOf('=');
      const name = (eq > 0 ? a.slice(0, eq) : a).replace(/^-+/, '');
      const s = spec[name];
      if (!s) throw new UsageError(`unknown option ${a.slice(0, eq > 0 ? eq : undefined)}`, command);
      if (!s.value) {
        if (eq > 0) throw new UsageError(`--${name} takes no value`, command);
        options.set(name, true);
        continue;
      }
      const v: string | undefined = eq > 0 ? a.slice(eq + 1) : argv[++i];
      if (v === undefined || (eq < 0 && v.startsWith('--'))) throw new UsageError(`--${name} needs a value`, command);
      if (s.choices && !s.choices.includes(v)) {
        throw new UsageError(`--${name} must be one of ${s.choices.join(', ')} (got "${v}")`, command);
      }
      options.set(name, v);
      continue;
    }
    if (stopAtFirstPositional) {
      positionals.push(...argv.slice(i));
      break;
    }
    positionals.push(a);
  }
  return { options, positionals };
}

export function str(p: Parsed, name: string): string | undefined {
  const v = p.options.get(name);
  return typeof v === 'string' ? v : undefined;
}

/** A size option in binary units ("80GiB", "1.5 TiB", bytes); undefined when absent. */
export function bytesOption(p: Parsed, name: string, command: string): number | undefined {
  const v = str(p, name);
  if (v === undefined) return undefined;
  try {
    return parseBytes(v);
  } catch (e) {
    throw new UsageError(`--${name}: ${(e as Error).message}`, command);
  }
}

export function int(p: Parsed, name: string, command: string): number | undefined {
  const v = str(p, name);
  if (v === undefined) return undefined;
  if (!/^\d+$/.test(v)) throw new UsageError(`--${name} must be a whole number (got "${v}")`, command);
  return Number(v);
}
