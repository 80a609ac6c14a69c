// The workload's command line. The user's command runs unchanged (`python script.py args`,
// `python -m mod args`, `torchrun …`): tracking comes from the environment (env.ts), so __main__,
// argv, tracebacks and exit codes are exactly those of an untracked run.

export type Target = { kind: 'script'; path: string } | { kind: 'module'; name: string };

export interface Command {
  /** Executable (an interpreter path, or the first word of a launch template). */
  file: string;
  args: string[];
}

export function buildCommand(python: string, target: Target, args: string[] = []): Command {
  if (!python) throw new Error('No Python interpreter: select one in the Python extension or set gpuMemoryLens.pythonPath.');
  if (target.kind === 'script') {
    if (!target.path) throw new Error('No script to run: pass a .py file or -m module.');
    return { file: python, args: [target.path, ...args] };
  }
  if (!target.name) throw new Error('-m needs a module name, e.g. `-m mypkg.train`.');
  return { file: python, args: ['-m', target.name, ...args] };
}

/**
 * Expands a gpuMemoryLens.launchCommand template such as `torchrun --nproc_per_node=2 ${file}`:
 * the template is split into words like a POSIX shell would (quotes and backslashes, no expansions),
 * then `${file}` and `${python}` are substituted inside words (so a path with spaces stays one word).
 */
export function expandLaunchTemplate(template: string, vars: { file: string; python: string }): Command {
  const words = splitShellWords(template).map((w) =>
    w.replace(/\$\{(file|python)\}/g, (_m, k: 'file' | 'python') => vars[k]),
  );
  if (words.length === 0) throw new Error('gpuMemoryLens.launchCommand is empty: clear the setting or give a command.');
  const unknown = /\$\{([^}]*)\}/.exec(template.replace(/\$\{(file|python)\}/g, ''));
  if (unknown) throw new Error(`gpuMemoryLens.launchCommand uses \${${unknown[1]}}; only \${file} and \${python} are known.`);
  return { file: words[0], args: words.slice(1) };
}

/** POSIX-shell-like word splitting: '…' literal, "…" with \" \\ \$ \` escapes, backslash outside quotes. */
export function splitShellWords(s: string): string[] {
  const words: string[] = [];
  let cur = '';
  let inWord = false;
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (c === ' ' || c === '\t' || c === '\n') {
      if (inWord) words.push(cur);
      cur = '';
      inWord = false;
    } else if (c === "'") {
      const end = s.indexOf("'", i + 1);
      if (end < 0) throw new Error(`Unterminated ' quote in: ${s}`);
      cur += s.slice(i + 1, end);
      i = end;
      inWord = true;
    } else if (c === '"') {
      i++;
      for (; i < s.length && s[i] !== '"'; i++) {
        if (s[i] === '\\' && i + 1 < s.length && '"\\$`'.includes(s[i + 1])) i++;
        cur += s[i];
      }
      if (i >= s.length) throw new Error(`Unterminated " quote in: ${s}`);
      inWord = true;
    } else if (c === '\\') {
      if (i + 1 < s.length) cur += s[++i];
      inWord = true;
    } else {
      cur += c;
      inWord = true;
    }
  }
  if (inWord) words.push(cur);
  return words;
}

/** One word quoted for a POSIX shell (for sending a command line to a terminal). */
export function shellQuote(word: string): string {
  if (word !== '' && /^[A-Za-z0-9_@%+=:,./-]+$/.test(word)) return word;
  return `'${word.replace(/'/g, `'\\''`)}'`;
}

/** A command as one shell line: `'/path/py' train.py --lr 0.1`. */
export function toShellLine(cmd: Command): string {
  return [cmd.file, ...cmd.args].map(shellQuote).join(' ');
}
