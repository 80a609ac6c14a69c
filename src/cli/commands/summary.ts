// `gpumem summary FILE [--json] [--top N]`: the summary of a capture or a PyTorch snapshot pickle.
// `gpumem summary DIR… | FILE FILE… [--json]`: one row per rank (Note [Rank flags]).
import fs from 'node:fs';
import { parseArgs, UsageError } from './args';
import { captureFiles, rankTable } from '../../core/analyses/ranks';
import { rankTableText } from '../../core/analyses/ranks/report';
import { summarizeFile } from '../../core/analyses/summary';

export async function run(argv: string[]): Promise<number> {
  const { options, positionals } = parseArgs('summary', argv, { json: {}, top: { value: true } });
  if (positionals.length === 0) throw new UsageError('needs a FILE (a .gpumem capture or a snapshot .pickle), or session folders / captures of several ranks', 'summary');
  const missing = positionals.find((p) => !fs.existsSync(p));
  if (missing !== undefined) {
    process.stderr.write(`gpumem summary: ${missing} does not exist; pass a .gpumem capture, a snapshot .pickle or a session folder\n`);
    return 1;
  }
  if (positionals.length > 1 || fs.statSync(positionals[0]).isDirectory()) {
    const files = captureFiles(positionals);
    if (files.length === 0) {
      process.stderr.write(`gpumem summary: no captures (*.gpumem) in ${positionals.join(', ')}\n`);
      return 1;
    }
    const table = rankTable(files);
    process.stdout.write((options.has('json') ? JSON.stringify(table, null, 2) : rankTableText(table)) + '\n');
    return 0;
  }
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
