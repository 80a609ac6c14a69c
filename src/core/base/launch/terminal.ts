// How a workload runs in a VS Code terminal (no vscode import; src/glue/runs/launcher.ts uses these).
//
// Note [Terminal]: the command runs in a real terminal (pty) through a tiny `sh -c` wrapper, not a
// Pseudoterminal: stdin, Ctrl-C (SIGINT to the foreground process group, so Python raises
// KeyboardInterrupt and the capture is closed cleanly), colours and `pdb` behave as in any terminal.
// The wrapper *catches* INT (`trap ':' INT`; a caught signal is reset to the default in children, unlike
// an ignored one, so the workload still gets Ctrl-C) and so survives it: after the workload exits, its
// output and exit code stay on screen until Enter is pressed, and the terminal's exit status is the
// workload's.
import { toShellLine, type Command } from './command';

export const EXIT_NOTE = 'the workload exited with code';

export function terminalShellLine(cmd: Command): string {
  return [
    "trap ':' INT",
    toShellLine(cmd),
    'code=$?',
    `printf "\\n\\033[2m[GPU Memory Lens] ${EXIT_NOTE} %s. Press Enter to close this terminal.\\033[0m\\n" "$code"`,
    'read -r _',
    'exit "$code"',
  ].join('; ');
}

/**
 * The terminal's `env` option: only what differs from the extension host's environment (VS Code merges
 * it into the terminal's own); `null` removes a variable the workload must not inherit (e.g. a stale
 * GPUMEM_* of an outer tracked run).
 */
export function terminalEnv(full: Record<string, string>, base: NodeJS.ProcessEnv = process.env): Record<string, string | null> {
  const delta: Record<string, string | null> = {};
  for (const [k, v] of Object.entries(full)) if (base[k] !== v) delta[k] = v;
  for (const k of Object.keys(base)) if (!(k in full)) delta[k] = null;
  return delta;
}
