// The `gpumem` CLI (bundled to dist/cli.js). Each command returns its exit code; usage errors exit 2
// with the command's usage line, so scripts can tell "you called me wrong" from "it failed".
import { UsageError } from './commands/args';
import { runControl } from './commands/control';
import { run as runWorkload } from './commands/run';
import { HELP } from './help';
import { VERSION } from './commands/version';

type Runner = (argv: string[]) => Promise<number>;

/** Commands that read a file with the capture reader; everything after their name is ours (no workload). */
const READER_COMMANDS = new Set(['summary', 'export', 'replay', 'advise', 'mcp']);

/**
 * The reader's commands belong to the capture reader and may not be built into this bundle yet: loaded
 * through a glob-style dynamic import (esbuild bundles whatever src/cli/commands/*.ts exists at build time).
 */
// `mcp` is loaded the same way for a second reason: the MCP SDK it bundles is evaluated only when it runs, so it costs
// the other commands' start-up nothing.
async function readerCommand(name: 'summary' | 'export' | 'replay' | 'advise' | 'mcp'): Promise<Runner | undefined> {
  try {
    const mod = (await import(`./commands/${name}.ts`)) as { run?: Runner };
    return mod.run;
  } catch {
    return undefined;
  }
}

const COMMANDS: Record<string, () => Promise<Runner | undefined>> = {
  run: async () => runWorkload,
  ping: async () => (argv) => runControl('ping', argv),
  'empty-cache': async () => (argv) => runControl('empty-cache', argv),
  snapshot: async () => (argv) => runControl('snapshot', argv),
  summary: () => readerCommand('summary'),
  export: () => readerCommand('export'),
  replay: () => readerCommand('replay'),
  advise: () => readerCommand('advise'),
  mcp: () => readerCommand('mcp'),
};

function wantsHelp(argv: string[]): boolean {
  // Only options before `--` / the workload count: `gpumem run train.py --help` is the script's flag.
  for (const a of argv) {
    if (a === '--help' || a === '-h') return true;
    if (a === '--' || !a.startsWith('-') || a === '-m') return false;
  }
  return false;
}

export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined || command === '--help' || command === '-h' || command === 'help') {
    const topic = command === 'help' && rest[0] && HELP[rest[0]] ? rest[0] : 'main';
    process.stdout.write(HELP[topic] + '\n');
    return command === undefined ? 2 : 0;
  }
  if (command === '--version' || command === '-V') {
    process.stdout.write(`gpumem ${VERSION}\n`);
    return 0;
  }
  const load = COMMANDS[command];
  if (!load) {
    process.stderr.write(`gpumem: unknown command "${command}". Commands: ${Object.keys(COMMANDS).join(', ')} (gpumem --help).\n`);
    return 2;
  }
  if (!READER_COMMANDS.has(command) ? wantsHelp(rest) : rest.includes('--help') || rest.includes('-h')) {
    process.stdout.write(HELP[command] + '\n');
    return 0;
  }
  const runner = await load();
  if (!runner) {
    process.stderr.write(`gpumem ${command}: not built into this gpumem yet (the capture reader's command is missing); rebuild with \`npm run build\`.\n`);
    return 1;
  }
  try {
    const code = await runner(rest);
    if (code === -1) {
      process.stdout.write(HELP[command] + '\n');
      return 0;
    }
    return code;
  } catch (e) {
    if (e instanceof UsageError) {
      process.stderr.write(`gpumem ${e.command}: ${e.message}\n${HELP[e.command].split('\n')[0]}\n`);
      return 2;
    }
    process.stderr.write(`gpumem ${command}: ${(e as Error).message}\n`);
    return 1;
  }
}

// Run only as the CLI entry (dist/cli.js), not when a test imports this module.
if (require.main === module) {
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (e: unknown) => {
      process.stderr.write(`gpumem: ${(e as Error).stack ?? String(e)}\n`);
      process.exitCode = 1;
    },
  );
}
