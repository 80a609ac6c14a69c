// `gpumem replay FILE [--policy P|all] [--capacity SIZE] [--device N] [--json]`: the what-if replay
// of the allocation stream under each allocator policy, on the simulated device.
import path from 'node:path';
import { bytesOption, int, parseArgs, str, UsageError } from './args';
import type { Policy } from '../../core/base/model/whatIf';
import { POLICIES } from '../../core/base/model/whatIf';
import { replayPolicies } from '../../core/analyses/replay';
import { withDevice } from './deviceFile';
import { replayJson, replayText } from '../../core/analyses/replay/report';

export async function run(argv: string[]): Promise<number> {
  const parsed = parseArgs('replay', argv, {
    policy: { value: true, choices: [...POLICIES, 'all'] },
    capacity: { value: true },
    device: { value: true },
    json: {},
  });
  if (parsed.positionals.length !== 1) throw new UsageError('needs exactly one FILE (a .gpumem capture or a snapshot .pickle with a trace)', 'replay');
  const file = parsed.positionals[0];
  const policyArg = str(parsed, 'policy') ?? 'all';
  const policies: Policy[] = policyArg === 'all' ? [...POLICIES] : [policyArg as Policy];
  const capacity = bytesOption(parsed, 'capacity', 'replay');
  const deviceArg = int(parsed, 'device', 'replay');
  return withDevice('replay', file, deviceArg, (model, device) => {
    const set = replayPolicies(model, device, policies, capacity);
    if (parsed.options.has('json')) process.stdout.write(JSON.stringify(replayJson(file, set), null, 2) + '\n');
    else process.stdout.write(replayText(path.basename(file), set) + '\n');
    for (const p of model.problems()) process.stderr.write(`gpumem replay: note: ${p.message} (at byte ${p.offset})\n`);
  });
}
