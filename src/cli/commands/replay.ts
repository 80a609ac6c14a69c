// `gpumem replay FILE [--policy P|all] [--alloc-conf SETTINGS] [--capacity SIZE] [--device N] [--json]`: the what-if
// replay of the allocation stream under each allocator policy, on the simulated device, with its self-check.
import path from 'node:path';
import { bytesOption, int, parseArgs, str, UsageError } from './args';
import type { Policy } from '../../core/base/model/whatIf';
import { isPytorchPolicy, POLICIES } from '../../core/base/model/whatIf';
import { replayPolicies } from '../../core/analyses/replay';
import { replayCheck } from '../../core/analyses/replay/check';
import { withDevice } from './deviceFile';
import { replayJson, replayText } from '../../core/analyses/replay/report';

/** expandable_segments in --alloc-conf must agree with a single pytorch policy (each policy names its segments). */
function checkExpandable(conf: string | undefined, policies: Policy[]): void {
  const m = conf === undefined ? null : /(?:^|,)\s*expandable_segments\s*:\s*(\w+)/.exec(conf);
  if (!m) return;
  const wants = /^true$/i.test(m[1]) ? 'pytorch-expandable' : 'pytorch';
  const other = policies.find((p) => isPytorchPolicy(p) && p !== wants);
  if (policies.length === 1 && other) {
    throw new UsageError(`--alloc-conf says expandable_segments:${m[1]}, which is the ${wants} policy, not --policy ${other}`, 'replay');
  }
}

export async function run(argv: string[]): Promise<number> {
  const parsed = parseArgs('replay', argv, {
    policy: { value: true, choices: [...POLICIES, 'all'] },
    'alloc-conf': { value: true },
    capacity: { value: true },
    device: { value: true },
    json: {},
  });
  if (parsed.positionals.length !== 1) throw new UsageError('needs exactly one FILE (a .gpumem capture or a snapshot .pickle with a trace)', 'replay');
  const file = parsed.positionals[0];
  const policyArg = str(parsed, 'policy') ?? 'all';
  const policies: Policy[] = policyArg === 'all' ? [...POLICIES] : [policyArg as Policy];
  const allocConf = str(parsed, 'alloc-conf');
  checkExpandable(allocConf, policies);
  const capacity = bytesOption(parsed, 'capacity', 'replay');
  const deviceArg = int(parsed, 'device', 'replay');
  return withDevice('replay', file, deviceArg, (model, device) => {
    let set;
    try {
      set = replayPolicies(model, device, policies, capacity, allocConf);
    } catch (e) {
      // the engine's words for a setting PyTorch would refuse: the user's to fix
      if (allocConf !== undefined && /PYTORCH_CUDA_ALLOC_CONF/.test((e as Error).message)) throw new UsageError(`--alloc-conf: ${(e as Error).message.replace(/^replay: /, '')}`, 'replay');
      throw e;
    }
    // The self-check is of the run's own settings, so it is left out of a what-if with other settings.
    const own = model.whatIf(device, Infinity).policy;
    const ran = allocConf === undefined ? set.results.find((r) => r.policy === own) : undefined;
    const check = ran ? replayCheck(model, device, ran) : undefined;
    if (parsed.options.has('json')) process.stdout.write(JSON.stringify(replayJson(file, set, check), null, 2) + '\n');
    else process.stdout.write(replayText(path.basename(file), set, check) + '\n');
    for (const p of model.problems()) process.stderr.write(`gpumem replay: note: ${p.message} (at byte ${p.offset})\n`);
  });
}
