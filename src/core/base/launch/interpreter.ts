// Interpreter fallback when the Python extension has none selected: the gpuMemoryLens.pythonPath
// setting, else python3 (then python) on PATH.
import * as fs from 'node:fs';
import * as path from 'node:path';

function isExecutable(p: string): boolean {
  try {
    fs.accessSync(p, fs.constants.X_OK);
    return fs.statSync(p).isFile();
  } catch {
    return false;
  }
}

/** Looks `name` up on PATH like a shell would; returns the absolute path or undefined. */
export function which(name: string, envPath: string | undefined = process.env.PATH): string | undefined {
  if (name.includes('/')) return isExecutable(name) ? path.resolve(name) : undefined;
  for (const dir of (envPath ?? '').split(path.delimiter)) {
    if (!dir) continue;
    const candidate = path.join(dir, name);
    if (isExecutable(candidate)) return candidate;
  }
  return undefined;
}

/**
 * The interpreter to use: `configured` (a path or a command name) if given, else python3/python on PATH.
 * Throws an error that says which setting to change.
 */
export function findPython(configured: string | undefined, envPath: string | undefined = process.env.PATH): string {
  const wanted = (configured ?? '').trim();
  if (wanted) {
    const found = which(wanted, envPath);
    if (!found) {
      throw new Error(`The Python interpreter "${wanted}" does not exist or is not executable. Fix gpuMemoryLens.pythonPath (or --python).`);
    }
    return found;
  }
  const found = which('python3', envPath) ?? which('python', envPath);
  if (!found) {
    throw new Error('No python3 found on PATH. Select an interpreter in the Python extension, or set gpuMemoryLens.pythonPath (or --python).');
  }
  return found;
}
