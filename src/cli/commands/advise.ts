// `gpumem advise FILE [--capacity SIZE] [--device N] [--json]`: issue 18's advice from the run's own numbers.
import fs from 'node:fs';
import path from 'node:path';
import { bytesOption, int, parseArgs, UsageError } from '../args';
import { adviceText, advise } from '../../core/advice';
import { openModel } from '../../core/model/open';
import { defaultDevice } from '../../core/replay';

export async function run(argv: string[]): Promise<number> {
  const parsed = parseArgs('advise', argv, { capacity: { value: true }, device: { value: true }, json: {} });
  if (parsed.positionals.length !== 1) throw new UsageError('needs exactly one FILE (a .gpumem capture or a snapshot .pickle with a trace)', 'advise');
  const file = parsed.positionals[0];
  const capacity = bytesOption(parsed, 'capacity', 'advise');
  const deviceArg = int(parsed, 'device', 'advise');
  if (!fs.existsSync(file)) {
    process.stderr.write(`gpumem advise: ${file} does not exist; pass a .gpumem capture or a snapshot .pickle\n`);
    return 1;
  }
  const model = openModel(file);
  try {
    const device = deviceArg ?? defaultDevice(model);
    if (device === undefined || !model.devices().includes(device)) {
      process.stderr.write(`gpumem advise: ${file} has no device ${device ?? ''} to advise on; its devices: ${model.devices().join(', ') || 'none'}\n`);
      return 1;
    }
    const a = advise(model, device, capacity);
    process.stdout.write((parsed.options.has('json') ? JSON.stringify(a, null, 2) : adviceText(path.basename(file), a)) + '\n');
    return 0;
  } finally {
    model.close();
  }
}
