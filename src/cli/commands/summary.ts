// `gpumem summary FILE [--json] [--top N]`: issue #4's summary of a capture or a PyTorch snapshot pickle.
import fs from 'node:fs';
import { parseArgs, UsageError } from '../args';
import { summarizeFile } from '../../core/summary';

export async function run(argv: string[]): Promise<number> {
  const { options, positionals } = parseArgs('summary', argv, { json: {}, top: { value: true } });
  if (positionals.length !== 1) throw new UsageError('needs exactly one FILE (a .gpumem capture or a snapshot .pickle)', 'summary');
  const file = positionals[0];
  const top = options.has('top') ? Number(options.get('top')) : 10;
  if (!Number.isInteger(top) || top < 0) throw new UsageError(`--top must be a whole number (got "${String(options.get('top'))}")`, 'summary');
  if (!fs.existsSync(file)) {
    process.stderr.write(`gpumem summary: ${file} does not exist; pass a .gpumem capture or a snapshot .pickle\n`);
    return 1;
  }
  const result = summarizeFile(file, top);
  if (options.has('json')) {
    process.stdout.write(JSON.stringify(result.summary, null, 2) + '\n');
    for (const p of result.problems) process.stderr.write(`gpumem summary: note: ${p}\n`);
  } else {
    process.stdout.write(result.text + '\n');
  }
  return 0;
}
