// `gpumem advise FILE [OTHER] [--batches B1,B2] [--capacity SIZE] [--device N] [--json]`: the advice
// from the run's own numbers; OTHER (a second run at another batch size) adds the batch-size prediction.
import fs from 'node:fs';
import path from 'node:path';
import { bytesOption, int, parseArgs, str, UsageError } from './args';
import { adviceText, advise } from '../../core/analyses/advice';
import { openModel } from '../../core/base/model/open';
import type { Model } from '../../core/base/model/types';
import { withDevice } from './deviceFile';

function batches(text: string | undefined): [number, number] | undefined {
  if (text === undefined) return undefined;
  const parts = text.split(',').map((p) => p.trim());
  if (parts.length !== 2 || !parts.every((p) => /^[1-9]\d*$/.test(p))) {
    throw new UsageError(`--batches wants two positive whole numbers, FILE's then OTHER's (e.g. --batches 8,16), not "${text}"`, 'advise');
  }
  return [Number(parts[0]), Number(parts[1])];
}

export async function run(argv: string[]): Promise<number> {
  const parsed = parseArgs('advise', argv, { capacity: { value: true }, device: { value: true }, json: {}, batches: { value: true } });
  if (parsed.positionals.length < 1 || parsed.positionals.length > 2) {
    throw new UsageError('needs FILE (a .gpumem capture or a snapshot .pickle with a trace), and optionally OTHER, a run at another batch size', 'advise');
  }
  const [file, otherFile] = parsed.positionals;
  const capacity = bytesOption(parsed, 'capacity', 'advise');
  const deviceArg = int(parsed, 'device', 'advise');
  const b = batches(str(parsed, 'batches'));
  if (b && otherFile === undefined) throw new UsageError('--batches needs OTHER, the second run', 'advise');
  if (otherFile !== undefined && !fs.existsSync(otherFile)) {
    process.stderr.write(`gpumem advise: ${otherFile} does not exist; pass a second .gpumem capture of the same script at another batch size\n`);
    return 1;
  }
  let other: Model | undefined;
  try {
    return withDevice('advise', file, deviceArg, (model, device) => {
      if (otherFile !== undefined) other = openModel(otherFile);
      const a = advise(model, device, {
        capacityBytes: capacity,
        file: path.basename(file),
        ...(b ? { batch: b[0] } : {}),
        ...(other ? { other: { model: other, file: path.basename(otherFile as string), ...(b ? { batch: b[1] } : {}) } } : {}),
      });
      process.stdout.write((parsed.options.has('json') ? JSON.stringify(a, null, 2) : adviceText(path.basename(file), a)) + '\n');
    });
  } finally {
    other?.close();
  }
}
