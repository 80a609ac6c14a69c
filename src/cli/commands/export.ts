// `gpumem export FILE --pickle OUT [--at TIME_US]`: a capture (or a moment of it) as a PyTorch 2.11
// snapshot pickle that pytorch.org/memory_viz and torch.cuda._memory_viz open.
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs, UsageError } from './args';
import { formatBytes } from '../../core/base/units/bytes';
import { openModel } from '../../core/base/model/open';
import { budgetOf, budgetSentence } from '../../core/analyses/summary/budget';

export async function run(argv: string[]): Promise<number> {
  const { options, positionals } = parseArgs('export', argv, { pickle: { value: true }, at: { value: true } });
  if (positionals.length !== 1) throw new UsageError('needs exactly one FILE (a .gpumem capture or a snapshot .pickle)', 'export');
  const out = options.get('pickle');
  if (typeof out !== 'string') throw new UsageError('needs --pickle OUT (where to write the snapshot pickle)', 'export');
  let atUs = Infinity;
  if (options.has('at')) {
    atUs = Number(options.get('at'));
    if (!Number.isFinite(atUs)) {
      throw new UsageError(`--at takes a time in microseconds since the epoch, like PyTorch's time_us (got "${String(options.get('at'))}")`, 'export');
    }
  }
  const file = positionals[0];
  if (!fs.existsSync(file)) {
    process.stderr.write(`gpumem export: ${file} does not exist; pass a .gpumem capture or a snapshot .pickle\n`);
    return 1;
  }
  if (path.resolve(out) === path.resolve(file)) {
    process.stderr.write('gpumem export: OUT is the input file; choose another path for the pickle\n');
    return 1;
  }
  const model = openModel(file);
  try {
    if (Number.isFinite(atUs)) {
      const ranges = model.devices().map((d) => model.timeRange(d));
      const t0 = Math.min(...ranges.map((r) => r.t0Us));
      const t1 = Math.max(...ranges.map((r) => r.t1Us));
      if (ranges.length && (atUs < t0 || atUs > t1)) {
        process.stderr.write(`gpumem export: note: --at ${atUs} is outside the recording (${t0} … ${t1} time_us)\n`);
      }
    }
    // Note [Capture budget]: the trace of a budgeted capture holds the compacted ranges' moments only; say so.
    const info = model.fileInfo();
    const budget = info.originUs === null ? null : budgetOf(info, (us) => (us - (info.originUs ?? 0)) / 1e6);
    if (budget) {
      process.stderr.write(
        `gpumem export: note: ${budgetSentence(budget)} In the pickle's trace the aggregated part holds only the allocations live at those moments.\n`,
      );
    }
    model.exportPickle(out, atUs);
    const size = fs.statSync(out).size;
    process.stdout.write(`wrote ${out} (${formatBytes(size)}${Number.isFinite(atUs) ? `, state at time_us ${atUs}` : ''}); open it at pytorch.org/memory_viz\n`);
    return 0;
  } finally {
    model.close();
  }
}
