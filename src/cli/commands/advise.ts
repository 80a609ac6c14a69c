// `gpumem advise FILE [--capacity SIZE] [--device N] [--json]`: issue 18's advice from the run's own numbers.
import path from 'node:path';
import { bytesOption, int, parseArgs, UsageError } from '../args';
import { adviceText, advise } from '../../core/advice';
import { withDevice } from './deviceFile';

export async function run(argv: string[]): Promise<number> {
  const parsed = parseArgs('advise', argv, { capacity: { value: true }, device: { value: true }, json: {} });
  if (parsed.positionals.length !== 1) throw new UsageError('needs exactly one FILE (a .gpumem capture or a snapshot .pickle with a trace)', 'advise');
  const file = parsed.positionals[0];
  const capacity = bytesOption(parsed, 'capacity', 'advise');
  const deviceArg = int(parsed, 'device', 'advise');
  return withDevice('advise', file, deviceArg, (model, device) => {
    const a = advise(model, device, capacity);
    process.stdout.write((parsed.options.has('json') ? JSON.stringify(a, null, 2) : adviceText(path.basename(file), a)) + '\n');
  });
}
