// The FILE + --device part shared by the commands that answer for one device of a capture or pickle
// (replay, advise): the file must exist, the device must be one the file records (default: the one whose
// memory peaks highest, replay's defaultDevice). Errors go to stderr as one line and return exit code 1.
import fs from 'node:fs';
import { openModel } from '../../core/base/model/open';
import type { Model } from '../../core/base/model/types';
import { defaultDevice } from '../../core/analyses/replay';

export function withDevice(command: string, file: string, deviceArg: number | undefined, fn: (model: Model, device: number) => void): number {
  if (!fs.existsSync(file)) {
    process.stderr.write(`gpumem ${command}: ${file} does not exist; pass a .gpumem capture or a snapshot .pickle\n`);
    return 1;
  }
  const model = openModel(file);
  try {
    const devices = model.devices();
    const device = deviceArg ?? defaultDevice(model);
    if (device === undefined) {
      process.stderr.write(`gpumem ${command}: ${file} records no device memory: nothing to ${command}\n`);
      return 1;
    }
    if (!devices.includes(device)) {
      process.stderr.write(`gpumem ${command}: ${file} has no device ${device}; its devices: ${devices.join(', ')}\n`);
      return 1;
    }
    fn(model, device);
    return 0;
  } finally {
    model.close();
  }
}
