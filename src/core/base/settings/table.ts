// The settings that cross languages, declared once (Note [Settings table]).
//
// Note [Settings table]: a recording setting is set in VS Code (package.json's contributes.configuration) or on
// a command line (`gpumem run`, `python3 -m gpumem run`), travels to the workload as an environment variable,
// is parsed there by the bootstrap (native/python/gpumem/_settings.py) and reaches the allocator as a key of
// gpumem_configure's JSON (native/allocator/src/settings.h). This table is the only place that says, for each
// of them: its name in every place, its default, its bounds, what 0 means, and the rule a wrong value breaks.
// Everything else is generated from it or tested against it (`node .dev/gen-settings.mjs` writes, `--check`
// fails when stale; test/unit/settings.test.mjs runs the check and the same wrong values through the TS,
// Python and C++ parsers):
//   package.json            the VS Code settings (type, default, enum, minimum, pattern, descriptions);
//   _settings.py            its generated part: this table for Python, which its parser reads;
//   settings_table.h        this table for the allocator's gpumem_configure;
//   ./parse.ts              the TS parser (settings, CLI options, environment) reads this table directly.
// A wrong value gets one message everywhere: `<name> <rule>, got <value>`, <name> spelt as the user wrote it
// (gpuMemoryLens.captureBudget, --budget, GPUMEM_BUDGET, "budget_bytes").

/** How a value is written and checked. */
export type SettingKind =
  /** one of `choices` */
  | 'choice'
  /** on or off: '1'/'0' in the environment, true/false in JSON and VS Code, `cli` turns it off */
  | 'flag'
  /** a whole number ≥ 0 */
  | 'count'
  /** bytes: a whole number or a binary unit (256MiB, 1GiB; Note [Size input] in src/core/base/units/parseBytes.ts) */
  | 'size';

export interface SettingDecl {
  /** the key in TS (RecordingSettings) */
  readonly key:
    | 'segments'
    | 'trimOnGrowth'
    | 'stacks'
    | 'backwardLinks'
    | 'events'
    | 'recordSteps'
    | 'sampleMs'
    | 'budgetBytes'
    | 'allocator'
    | 'backend'
    | 'simCapacity';
  /** the attribute of the bootstrap's Settings (native/python/gpumem/_settings.py) */
  readonly py: string;
  /** the environment variable the launchers set and the bootstrap reads */
  readonly env: string;
  /** the key of gpumem_configure's JSON (native/allocator); absent: the allocator does not read it */
  readonly json?: string;
  /** the option of `gpumem run` and `python3 -m gpumem run` (a flag's option turns it off); absent: none */
  readonly cli?: string;
  /** the VS Code setting; absent: not a VS Code setting */
  readonly vscode?: string;
  readonly kind: SettingKind;
  readonly choices?: readonly string[];
  readonly default: string | number | boolean;
  /** count and size: the smallest value other than 0 */
  readonly min?: number;
  /** count and size: what 0 means ("unbounded", "off"); absent: 0 is an ordinary value */
  readonly zero?: string;
  /** flag: what on means, said in the rule ("trim on growth") */
  readonly on?: string;
  /** what it does, for --help and the VS Code settings page */
  readonly help: string;
  /** the VS Code settings page's description (markdown), when it says more than `help` */
  readonly description?: string;
  readonly enumDescriptions?: readonly string[];
}

export const SETTINGS: readonly SettingDecl[] = [
  {
    key: 'allocator',
    py: 'allocator_mode',
    env: 'GPUMEM_ALLOCATOR',
    cli: '--allocator',
    vscode: 'gpuMemoryLens.allocator',
    kind: 'choice',
    choices: ['auto', 'lens', 'pytorch'],
    // Note [Default allocator mode] in native/python/README.md: `auto` everywhere (eec9b2c).
    default: 'auto',
    help:
      'which allocator tracks the run. auto: PyTorch\'s own, observed, whenever its observer can be built here (else the lens), said in one line; lens: ours (less fragmentation; cudnn.benchmark kept off, CUDA-graph compiles fall back); pytorch: PyTorch\'s own, observed (keeps cudnn.benchmark, CUDA graphs, PYTORCH_CUDA_ALLOC_CONF)',
    description:
      'Which allocator tracks a run: PyTorch\'s own, observed (every setting and feature kept), or the lens allocator. `auto` takes PyTorch\'s own whenever its observer can be built here.',
    enumDescriptions: [
      "PyTorch's own allocator, observed (the run as it is natively), whenever its observer can be built on this machine (a C++ compiler; built once per torch version); otherwise the lens allocator. The run says which and why.",
      'The lens allocator: less fragmentation; cudnn.benchmark is kept off and CUDA-graph compiles fall back.',
      "PyTorch's own caching allocator, observed: the run keeps every allocator feature and setting.",
    ],
  },
  {
    key: 'segments',
    py: 'segments',
    env: 'GPUMEM_SEGMENTS',
    json: 'segments',
    cli: '--segments',
    vscode: 'gpuMemoryLens.segmentStrategy',
    kind: 'choice',
    choices: ['expandable', 'fixed'],
    default: 'expandable',
    help: 'how the lens allocator reserves device memory',
    description: 'How the lens allocator reserves device memory.',
    enumDescriptions: [
      'Grow segments by mapping pages into a reserved address range (least fragmentation).',
      "Fixed-size segments like PyTorch's default allocator.",
    ],
  },
  {
    key: 'trimOnGrowth',
    py: 'trim',
    env: 'GPUMEM_TRIM',
    json: 'trim_on_growth',
    cli: '--no-trim',
    vscode: 'gpuMemoryLens.trimOnGrowth',
    kind: 'flag',
    default: true,
    on: 'trim on growth',
    help: "expandable segments keep free pages mapped (PyTorch's behaviour): no trim synchronizations, more reserved memory",
    description:
      "With `expandable` segments: give free pages back before raising the reserved peak, so reserved memory follows what tensors need (GPT-2 with varying lengths: ×1.04 of the allocated peak instead of ×1.12). Off: PyTorch's expandable behaviour, with no stream synchronizations while a workload's memory layout settles in its first steps.",
  },
  {
    key: 'stacks',
    py: 'stacks',
    env: 'GPUMEM_STACKS',
    json: 'stacks',
    cli: '--no-stacks',
    vscode: 'gpuMemoryLens.captureStacks',
    kind: 'flag',
    default: true,
    help: 'do not record Python stacks (no line attribution)',
    description: 'Record the Python stack of every allocation (needed for line annotations).',
  },
  {
    // Note [Backward on the forward line] (native/allocator/src/backward_links.h): the bootstrap reads it.
    key: 'backwardLinks',
    py: 'backward_links',
    env: 'GPUMEM_BACKWARD_LINKS',
    cli: '--no-backward-links',
    vscode: 'gpuMemoryLens.backwardOnForwardLine',
    kind: 'flag',
    default: true,
    help: "put backward's allocations on the backward() line instead of the forward line that made their autograd node",
    description:
      "Attribute each allocation made during backward to the forward line (and module) whose op made the autograd node that ran, with the backward() line as its outer frame. Off: backward's allocations sit on the backward() line. Needs the tool's small extension built against your torch (both modes build it); without it, the backward() line.",
  },
  {
    // Note [Figures only] (native/python/gpumem/_observe.py): the bootstrap reads it; the allocator never does.
    key: 'events',
    py: 'events',
    env: 'GPUMEM_EVENTS',
    cli: '--figures-only',
    vscode: 'gpuMemoryLens.recordAllocations',
    kind: 'flag',
    default: true,
    on: 'every allocation recorded',
    help: "figures only: PyTorch's allocated and reserved memory at each sample, nothing recorded per allocation (no lines, categories or leak findings)",
    description:
      "Record every allocation: sizes by line, editor annotations, categories, leak findings. Off: figures only, PyTorch's allocated and reserved memory read at each sample with nothing of the tool running per allocation, for a run that cannot afford a few per cent of its step; the panels say what is left out. The lens allocator always records every allocation.",
  },
  {
    // Note [Recorded steps] (native/python/gpumem/_recorded_steps.py): the bootstrap reads it; the allocator never does.
    key: 'recordSteps',
    py: 'record_steps',
    env: 'GPUMEM_RECORD_STEPS',
    cli: '--record-steps',
    vscode: 'gpuMemoryLens.recordSteps',
    kind: 'count',
    default: 0,
    min: 1,
    zero: 'every step',
    help: "record allocations one by one for the first N steps only (Optimizer.step() ends, or gpumem.step() marks), then PyTorch's figures",
    description:
      "Record every allocation for the first N steps only (Optimizer.step() ends, or your gpumem.step() marks): sizes by line, editor annotations, categories and leak findings come from those steps, and after step N the graphs show PyTorch's allocated and reserved memory read at each sample, with no recording per allocation (PyTorch still hands each one to the tool's tracker, which returns at once: PyTorch cannot detach it). 0: every step. PyTorch's allocator only (`auto` takes it); the panels say from which step on allocations were not recorded.",
  },
  {
    key: 'sampleMs',
    py: 'sample_ms',
    env: 'GPUMEM_SAMPLE_MS',
    json: 'sample_interval_ms',
    cli: '--sample-ms',
    vscode: 'gpuMemoryLens.deviceSampleIntervalMs',
    kind: 'count',
    default: 200,
    min: 0,
    zero: 'off',
    help: 'device-memory sampling period in ms',
    description: 'How often the workload samples device memory (NVML) into the capture, in milliseconds (0 = off).',
  },
  {
    key: 'budgetBytes',
    py: 'budget',
    env: 'GPUMEM_BUDGET',
    json: 'budget_bytes',
    cli: '--budget',
    vscode: 'gpuMemoryLens.captureBudget',
    kind: 'size',
    // Note [Capture budget] in native/allocator/src/compactor.cc: 1 GiB unless asked otherwise;
    // under 1 MiB a capture cannot hold its recent window.
    default: 2 ** 30,
    min: 2 ** 20,
    zero: 'unbounded',
    help: 'disk budget of each capture: the recent minutes in full, the peaks, OOMs and markers of the whole run',
    description:
      'Disk budget of each capture (binary units: 1GiB, 256MiB; 0 = none). A capture that reaches it keeps every event of the recent minutes, and for the whole run the timeline (as min/max buckets), the peaks with every allocation live then, per-line statistics at the peak, OOMs, markers and segment events.',
  },
  {
    key: 'backend',
    py: 'backend',
    env: 'GPUMEM_BACKEND',
    json: 'backend',
    cli: '--backend',
    kind: 'choice',
    choices: ['cuda', 'sim'],
    default: 'cuda',
    help: 'sim: a simulated device in host memory (testing without a GPU)',
  },
  {
    key: 'simCapacity',
    py: 'sim_capacity',
    env: 'GPUMEM_SIM_CAPACITY',
    json: 'sim_capacity',
    kind: 'size',
    default: 0,
    min: 1,
    zero: "the simulator's default",
    help: 'bytes of the simulated device (sim backend only)',
  },
];

/**
 * GPUMEM_* variables a user sets on purpose (native/python/README.md): they pass through to the workload.
 * Every other GPUMEM_* is session plumbing, and a stale one from an outer tracked run must not leak into this one.
 */
export const USER_ENV_SWITCHES: readonly string[] = [
  'GPUMEM_STRICT_COMPILE',
  'GPUMEM_GIL_FREE_WALK',
  // Note [Not recorded]: the switches that turn a recording part off must reach the workload, or the part
  // stays on under `gpumem run` and the extension while the README says how to turn it off.
  'GPUMEM_MODULE_PATHS',
  'GPUMEM_TAGS',
  'GPUMEM_KEEPER',
  'GPUMEM_KEEPER_MS',
];

/** The setting of a key (throws on a key the table does not have: a typo is a bug). */
export function setting(key: SettingDecl['key']): SettingDecl {
  const d = SETTINGS.find((s) => s.key === key);
  if (!d) throw new Error(`no setting ${key}`);
  return d;
}
