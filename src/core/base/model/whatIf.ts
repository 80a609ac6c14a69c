// The allocator's own answers about a moment of a capture or pickle (Note [What-if]): what a request and
// empty_cache() would do, and how the whole allocation stream replays under another policy. The native
// reader answers both by running native/allocator's policy on its simulated device, seeded with the state
// the data recorded; this file only types the answers and names the policies.
//
// Note [What-if]: a sentence about what would fail, grow or be released is never worded from a model of
// the allocator; it is what the allocator's policy answers on the simulated device (DESIGN §6). The data's
// own policy comes from the capture header (segments/trim settings), a pickle's `allocator_settings`, or its
// segments' `is_expandable`; `policySource` says which, and 'assumed' means none of them said.

/** pytorch: PyTorch's default (fixed segments); pytorch-expandable: expandable_segments:True;
 *  lens: our default (expandable + trim on growth); lens-no-trim: ours without trim. */
export type Policy = 'pytorch' | 'pytorch-expandable' | 'lens' | 'lens-no-trim';

export const POLICIES: readonly Policy[] = ['pytorch', 'pytorch-expandable', 'lens', 'lens-no-trim'];

export const POLICY_LABELS: Record<Policy, string> = {
  pytorch: 'PyTorch (fixed segments)',
  'pytorch-expandable': 'PyTorch expandable_segments:True',
  lens: 'GPU Memory Lens (expandable + trim)',
  'lens-no-trim': 'GPU Memory Lens without trim',
};

export function isPolicy(v: unknown): v is Policy {
  return typeof v === 'string' && (POLICIES as readonly string[]).includes(v);
}

export type PolicySource = 'capture-header' | 'pickle-segments' | 'pickle-settings' | 'assumed';

export const POLICY_SOURCE_WORDS: Record<PolicySource, string> = {
  'capture-header': "the capture's allocator settings",
  'pickle-segments': "the snapshot's segments",
  'pickle-settings': "the snapshot's allocator_settings",
  'assumed': 'an assumption (the data does not say)',
};

export interface WhatIfQuery {
  /** default: the data's own policy */
  policy?: Policy;
  /** default: the device's total memory where the data has it */
  capacityBytes?: number;
  /** request sizes (bytes) to ask about, each on its own (never cumulatively) */
  requests?: number[];
  /** PYTORCH_CUDA_ALLOC_CONF settings for the pytorch policies instead of the data's (Note [Settings of the data]) */
  allocConf?: string;
}

/**
 * Where the pytorch policies' settings come from (Note [Settings of the data] in native/addon/src/alloc_conf.h):
 * the capture's header or a snapshot's allocator_settings (what PyTorch reported for the run), a what-if's own
 * (`given`), PyTorch's defaults where the data does not record them; '' for the lens policies, which take none.
 */
export type SettingsSource = 'capture-header' | 'pickle-settings' | 'given' | 'defaults' | '';

export type RequestOutcome = 'from-cache' | 'grows' | 'oom';

export interface RequestAnswer {
  bytes: number;
  /** from-cache: served without reserving more; grows: reserved grows by growsByBytes; oom: would fail */
  outcome: RequestOutcome;
  growsByBytes: number;
}

export interface WhatIfAnswer {
  policy: Policy;
  policySource: PolicySource;
  reservedBytes: number;
  /** what torch.cuda.empty_cache() would release at this moment */
  emptyCacheReleasesBytes: number;
  /** the largest single request served without reserving more device memory */
  largestWithoutGrowthBytes: number;
  requests: RequestAnswer[];
  /** the pytorch policies' settings as PYTORCH_CUDA_ALLOC_CONF text ('' for PyTorch's defaults) and their source */
  allocConf?: string;
  settingsSource?: SettingsSource;
  /** settings of the policy that the engine does not model (the answers above do not account for them) */
  notModelled?: string[];
}

export interface ReplayOom {
  tUs: number;
  requestedBytes: number;
  reservedBytes: number;
  allocatedBytes: number;
  cause: 'shortage' | 'fragmentation';
  /** the engine's own explanation, one sentence */
  sentence: string;
}

/**
 * One policy's replay. Note [Settings of the data]: when a setting the policy runs with is not modelled (garbage
 * collection, the cudaMallocAsync backend, a key the engine does not know) or the data has no allocation to replay,
 * `modelled` is false, `notModelled` says which, and there is no figure at all (the peaks are null).
 */
export type ReplayResult = ReplayFigures | ReplayNotModelled;

interface ReplayBase {
  policy: Policy;
  /** the capacity the replay ran under (null: unlimited, no OOM check) */
  capacityBytes: number | null;
  /** the pytorch policies' settings as PYTORCH_CUDA_ALLOC_CONF text ('' for PyTorch's defaults; the lens: '') */
  allocConf: string;
  settingsSource: SettingsSource;
}

export interface ReplayNotModelled extends ReplayBase {
  modelled: false;
  notModelled: string[];
  peakReservedBytes: null;
  peakAllocatedBytes: null;
  ratio: null;
  peakAtUs: null;
  emptyCacheAtMarkers: [];
  oom: null;
}

export interface ReplayFigures extends ReplayBase {
  modelled: true;
  notModelled: [];
  peakReservedBytes: number;
  peakAllocatedBytes: number;
  /** peak reserved / peak allocated */
  ratio: number;
  peakAtUs: number;
  /** at each user marker: what empty_cache() would have released there */
  emptyCacheAtMarkers: { tUs: number; name: string; releasesBytes: number }[];
  oom: ReplayOom | null;
}

/** The native handle's optional what-if methods (absent in readers built before the engine). */
export interface WhatIfHandle {
  whatIf?(device: number, tUs: number, query?: WhatIfQuery): string | WhatIfAnswer;
  replay?(device: number, policy: Policy, capacityBytes?: number, query?: { allocConf?: string }): string | ReplayResult;
}

export class WhatIfUnavailable extends Error {
  constructor() {
    super('this build of the native reader has no what-if engine; rebuild with `npm run build`');
    this.name = 'WhatIfUnavailable';
  }
}

const decode = <T>(v: string | T): T => (typeof v === 'string' ? (JSON.parse(v) as T) : v);

/** Asks the native engine; throws WhatIfUnavailable when the addon predates it. */
export function askWhatIf(handle: WhatIfHandle, device: number, tUs: number, query?: WhatIfQuery): WhatIfAnswer {
  if (typeof handle.whatIf !== 'function') throw new WhatIfUnavailable();
  const q: WhatIfQuery = {};
  if (query?.policy) q.policy = query.policy;
  if (query?.capacityBytes !== undefined) q.capacityBytes = query.capacityBytes;
  if (query?.requests?.length) q.requests = query.requests;
  if (query?.allocConf !== undefined) q.allocConf = query.allocConf;
  return decode<WhatIfAnswer>(handle.whatIf(device, tUs, q));
}

export function askReplay(handle: WhatIfHandle, device: number, policy: Policy, capacityBytes?: number, allocConf?: string): ReplayResult {
  if (typeof handle.replay !== 'function') throw new WhatIfUnavailable();
  const raw =
    allocConf !== undefined
      ? handle.replay(device, policy, capacityBytes, { allocConf })
      : capacityBytes === undefined
        ? handle.replay(device, policy)
        : handle.replay(device, policy, capacityBytes);
  const r = decode<ReplayResult>(raw);
  // A reader built before the settings were read gives figures and nothing else: it modelled what it replayed.
  if ((r as { modelled?: boolean }).modelled === undefined) {
    return { ...(r as ReplayFigures), capacityBytes: r.capacityBytes ?? null, modelled: true, notModelled: [], allocConf: '', settingsSource: '' };
  }
  return { ...r, capacityBytes: r.capacityBytes ?? null };
}

/** The policies PYTORCH_CUDA_ALLOC_CONF settings apply to (PyTorch's allocator). */
export function isPytorchPolicy(p: Policy): boolean {
  return p === 'pytorch' || p === 'pytorch-expandable';
}

/**
 * The replay's self-check (Note [Replay check] in src/core/analyses/replay/check.ts): the policy that ran, replayed,
 * against the peak reserved the run recorded. `gpumem summary --json`'s `replay_check` and the advice's.
 */
export interface ReplayCheck {
  /** the policy that made the data, and how the data says so */
  policy: Policy;
  policy_source: PolicySource;
  /** the replay's peak reserved; null when not modelled */
  predicted_bytes: number | null;
  /** the peak reserved the run recorded */
  recorded_bytes: number;
  modelled: boolean;
  not_modelled: string[];
  /** |predicted − recorded| / recorded; null when not modelled or nothing was recorded */
  deviation: number | null;
  /** the settings the policy ran with (PYTORCH_CUDA_ALLOC_CONF text, '' for PyTorch's defaults) and their source */
  alloc_conf: string;
  settings_source: SettingsSource;
}
