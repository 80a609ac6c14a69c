// Reading a setting of the table (./table.ts, Note [Settings table]) from what a user wrote: a VS Code setting, a
// command-line option, an environment variable. The bootstrap's parser (native/python/gpumem/_settings.py) and
// the allocator's (native/allocator/src/settings.h) follow the same rules from the same table, and
// test/unit/settings.test.mjs gives all three the same wrong values and compares the messages.
import { formatSize, readSize } from '../units/parseBytes';
import type { SettingDecl } from './table';

export type SettingValue = string | number | boolean;

/** A value the table's rule refuses; `message` is the same sentence every language gives. */
export class SettingError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SettingError';
  }
}

const quoted = (s: string) => `'${s}'`;

function oneOf(words: readonly string[]): string {
  return words.length === 1 ? words[0] : `${words.slice(0, -1).join(', ')} or ${words[words.length - 1]}`;
}

/**
 * What a value must be, in words. `medium`: how values are spelt where it is read ('text': the environment and
 * command lines, where a flag is '1'/'0'; 'json': gpumem_configure's JSON and VS Code, where it is true/false).
 */
export function ruleOf(d: SettingDecl, medium: 'text' | 'json' = 'text'): string {
  switch (d.kind) {
    case 'choice':
      return `must be ${oneOf((d.choices ?? []).map(quoted))}`;
    case 'flag': {
      const [on, off] = medium === 'text' ? ["'1'", "'0'"] : ['true', 'false'];
      return `must be ${on}${d.on ? ` (${d.on})` : ''} or ${off}`;
    }
    case 'count':
      return `must be a non-negative whole number${d.zero ? ` (0 = ${d.zero})` : ''}`;
    case 'size': {
      const min = d.min ?? 1;
      const atLeast = min > 1 ? `at least ${min} bytes (${formatSize(min, ' ')})` : 'a positive number of bytes';
      return d.zero ? `must be 0 (${d.zero}) or ${atLeast}` : `must be ${atLeast}`;
    }
  }
}

/** `<name> <rule>, got <value>[ (hint)]`: the one message of a wrong value (Note [Settings table]). */
export function settingMessage(d: SettingDecl, name: string, got: string, medium: 'text' | 'json' = 'text', hint?: string): string {
  return `${name} ${ruleOf(d, medium)}, got ${got}${hint ? ` (${hint})` : ''}`;
}

/** Checks a typed value (a VS Code setting's number or boolean, a RecordingSettings field); returns it. */
export function checkValue(d: SettingDecl, value: unknown, name: string): SettingValue {
  const bad = (): never => {
    throw new SettingError(settingMessage(d, name, typeof value === 'string' ? quoted(value) : JSON.stringify(value) ?? String(value), 'json'));
  };
  switch (d.kind) {
    case 'choice':
      return typeof value === 'string' && (d.choices ?? []).includes(value) ? value : bad();
    case 'flag':
      return typeof value === 'boolean' ? value : bad();
    case 'count':
    case 'size': {
      if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) return bad();
      if (value === 0) return d.zero || d.kind === 'count' ? 0 : bad();
      return value >= (d.min ?? 0) ? value : bad();
    }
  }
}

/**
 * Reads a value from text (an environment variable, a command-line option, a string setting): '' is the
 * default; a count is digits; a size is bytes or a binary unit, and `none` is 0 where 0 means something.
 */
export function parseText(d: SettingDecl, text: string, name: string): SettingValue {
  const t = text.trim();
  if (t === '') return d.default;
  const bad = (hint?: string): never => {
    throw new SettingError(settingMessage(d, name, quoted(text), 'text', hint));
  };
  switch (d.kind) {
    case 'choice':
      return (d.choices ?? []).includes(t) ? t : bad();
    case 'flag':
      return t === '1' ? true : t === '0' ? false : bad();
    case 'count': {
      const n = Number(t);
      return /^\d+$/.test(t) && Number.isSafeInteger(n) && (n === 0 || n >= (d.min ?? 0)) ? n : bad();
    }
    case 'size': {
      if (d.zero && t.toLowerCase() === 'none') return 0;
      const got = readSize(t);
      if (typeof got === 'string') return bad(got);
      if (got === 0) return d.zero ? 0 : bad();
      return got >= (d.min ?? 1) ? got : bad();
    }
  }
}

/** The value as the environment carries it (what the bootstrap's parseText reads back). */
export function toEnv(d: SettingDecl, value: SettingValue): string {
  if (d.kind === 'flag') return value ? '1' : '0';
  return String(value);
}

/** The word after a command-line option in --help (`--budget SIZE`); '' for a flag. */
export function cliMetavar(d: SettingDecl): string {
  return d.kind === 'choice' ? (d.choices ?? []).join('|') : d.kind === 'count' ? 'N' : d.kind === 'size' ? 'SIZE' : '';
}

/** The option's --help sentence, with what 0 means and the default: both CLIs print exactly this. */
export function cliHelp(d: SettingDecl): string {
  if (d.kind === 'flag') return d.help;
  if (d.kind === 'size') return `${d.help} (binary units: 256MiB, 1GiB${d.zero ? `; 0 = ${d.zero}` : ''}; default: ${formatSize(Number(d.default))})`;
  return `${d.help}${d.zero ? `, 0 = ${d.zero}` : ''} (default: ${d.default})`;
}

/** A value as a settings store holds it (VS Code's): text is read by parseText, a number or boolean checked. */
export function readValue(d: SettingDecl, raw: unknown, name: string): SettingValue {
  return typeof raw === 'string' && d.kind !== 'flag' ? parseText(d, raw, name) : checkValue(d, raw, name);
}
