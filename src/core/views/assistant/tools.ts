// The assistant's tools, declared once: names, what each is for (written for a language model), and the JSON
// Schema of its input. Two thin adapters serve them: VS Code's language-model tools (src/glue/assistant; package.json's
// `contributes.languageModelTools` is written from this table by `npm run gen-tools`) and the MCP server
// (`gpumem mcp`, src/cli/commands/mcp.ts). ./answer.ts computes the answers.
//
// Note [Tool contract]: a tool reads one recording (a capture or a PyTorch snapshot pickle, by `path`) or, without a
// path, the workload running now. Answers are compact JSON cut to what answers the question; every size is given in
// bytes (a field ending `_bytes`) and beside it in binary units (the same name without `_bytes`), so a model can
// quote the figure a person reads and still compute with the exact one. Tools whose `changesRun` is true act on the
// running workload: VS Code asks the user to confirm each call; MCP marks them as not read-only so clients ask too.
// Pure data: no import, so .dev/gen-tools.mjs can load it alone.

export interface JsonSchema {
  type: 'object' | 'string' | 'integer' | 'number' | 'array' | 'boolean';
  description?: string;
  properties?: Record<string, JsonSchema>;
  required?: string[];
  additionalProperties?: boolean;
  enum?: string[];
  minimum?: number;
  maximum?: number;
  items?: JsonSchema;
  minItems?: number;
  maxItems?: number;
}

export interface ToolDeclaration {
  /** the tool's name in VS Code and MCP (letters, digits, `_`) */
  name: string;
  /** for people: the tool's title in VS Code's tool picker and MCP clients */
  title: string;
  /** for people: one line in the tool picker */
  userDescription: string;
  /** for the model: when to call it and what the answer holds */
  modelDescription: string;
  inputSchema: JsonSchema & { type: 'object' };
  /** acts on the running workload: VS Code asks the user to confirm (Note [Tool contract]) */
  changesRun: boolean;
  /** VS Code's confirmation, for tools that change the run */
  confirm?: { title: string; message: string };
}

const PATH: JsonSchema = {
  type: 'string',
  description:
    'Path of a GPU Memory Lens capture (.gpumem, written by `gpumem run` or the VS Code extension), a PyTorch memory ' +
    'snapshot (.pickle, written by torch.cuda.memory._dump_snapshot), or a session folder holding one capture. ' +
    'Relative paths start at the workspace folder (VS Code) or the working directory (MCP server). ' +
    'Leave it out to ask about the PyTorch workload running now under GPU Memory Lens.',
};

const DEVICE: JsonSchema = {
  type: 'integer',
  minimum: 0,
  description: 'CUDA device index inside the recording. Default: the first device with allocations.',
};

const CAPACITY: JsonSchema = {
  type: 'string',
  description:
    'Device memory size to check against, in binary units ("80GiB", "81559MiB") or bytes. Default: the device size the recording holds.',
};

const SIZES = 'Sizes are in bytes (fields ending _bytes) and, beside each, in binary units (KiB, MiB, GiB).';

export const TOOLS: readonly ToolDeclaration[] = [
  {
    name: 'gpumem_summary',
    title: 'GPU memory summary',
    userDescription: 'Summarise a PyTorch GPU memory capture or snapshot: peaks, what the memory is, OOMs, leaks, top lines.',
    modelDescription:
      'Summarise a recording of PyTorch GPU memory: the command and allocator that ran, peak allocated and reserved memory ' +
      'with the time and training step of the peak, what the memory at the peak is (parameters, gradients, optimizer ' +
      'state, activations, temporaries), out-of-memory errors with the line that asked, the steps and the number of ' +
      'leak findings, the top source lines at the peak (with the bytes backward made on each), the highest point reached ' +
      'while a backward ran with the forward lines whose backward made it, and whether the recording is complete. Call ' +
      'it first when asked ' +
      'why a PyTorch program uses so much GPU memory or ran out of memory; the other gpumem_ tools each answer one ' +
      `question in depth. ${SIZES}`,
    inputSchema: { type: 'object', properties: { path: PATH, device: DEVICE }, additionalProperties: false },
    changesRun: false,
  },
  {
    name: 'gpumem_peak_lines',
    title: 'GPU memory: top lines at the peak',
    userDescription: 'The source lines holding the most GPU memory at the peak, with their call stacks.',
    modelDescription:
      'The source lines of the user\'s code that hold the most GPU memory at the peak. Each line has the bytes live at the ' +
      'peak that it allocated (self: it is the innermost user frame), the bytes live at the peak with it anywhere on the ' +
      'call stack (inclusive), what it allocated over the whole run and how many times, what is still live at the end, ' +
      'and, where backward made some of it, the split into forward and backward bytes: backward bytes sit on the forward ' +
      'line whose operation\'s backward made them (the autograd node and module are named), and on the line that called ' +
      'backward() only when no forward operation is linked. Also its function and the lines of user code that called it ' +
      `on its heaviest call stack (innermost first). Use it to answer "which line of my code uses the memory". ${SIZES}`,
    inputSchema: {
      type: 'object',
      properties: {
        path: PATH,
        device: DEVICE,
        top: { type: 'integer', minimum: 1, maximum: 25, description: 'How many lines (default 10, at most 25).' },
      },
      additionalProperties: false,
    },
    changesRun: false,
  },
  {
    name: 'gpumem_leaks',
    title: 'GPU memory leaks and their keepers',
    userDescription: 'Memory that grows from training step to step, and the line that keeps it alive.',
    modelDescription:
      'Memory that grows from one training step to the next (a leak). Each finding names the line that allocated the ' +
      'growing memory, the bytes it adds per step, the steps it grew over, what kind of memory it is, and, when the ' +
      'workload found it, its keeper: the line and the Python container that keep the tensors alive (for example ' +
      '`history.append(loss)` keeping every step\'s autograd graph). Also the step figures (peak, and allocated and ' +
      'reserved at each step end) for the first, last and highest steps. Steps come from optimizer.step() after ' +
      `backward(), gpumem.step() marks, or profiler step ranges. ${SIZES}`,
    inputSchema: { type: 'object', properties: { path: PATH, device: DEVICE }, additionalProperties: false },
    changesRun: false,
  },
  {
    name: 'gpumem_categories',
    title: 'GPU memory by category at a moment',
    userDescription: 'What the GPU memory is at the peak, at a step end or at a time: parameters, gradients, activations…',
    modelDescription:
      'What the GPU memory is at one moment: bytes of parameters, gradients, optimizer state, activations (also by ' +
      'module), temporaries and other; the allocator\'s cache (reserved − allocated) and what of it empty_cache() could ' +
      'release; what the device uses outside the allocator (CUDA context, libraries, other processes) when sampled; and ' +
      'the lines holding the most at that moment with their categories. The moment is the peak (default), the end of a ' +
      `training step (step), or a time in seconds since the first allocation (time_s). ${SIZES}`,
    inputSchema: {
      type: 'object',
      properties: {
        path: PATH,
        device: DEVICE,
        step: { type: 'integer', minimum: 1, description: 'The end of this training step (1 = the first step).' },
        time_s: { type: 'number', minimum: 0, description: 'Seconds since the first allocation of the process.' },
      },
      additionalProperties: false,
    },
    changesRun: false,
  },
  {
    name: 'gpumem_advice',
    title: 'GPU memory advice with predictions',
    userDescription: 'What to change to lower peak memory or avoid an OOM, with predicted peaks and evidence.',
    modelDescription:
      'What to change to lower peak GPU memory or avoid an out-of-memory error, computed from the recording and its ' +
      'replay on a simulated CUDA caching allocator: the allocator policy (for example expandable_segments), activation ' +
      'checkpointing of a module class, zero_grad(set_to_none=True), empty_cache() at a marker, the leaks to fix, and, ' +
      'given a second recording of the same script at another batch size (other_path), the largest batch that fits. ' +
      'Each item has the action, its evidence, the predicted peak where the prediction is checked on GPUs, a confidence ' +
      `and its assumptions; not_offered says what was considered and why it is not advised. ${SIZES}`,
    inputSchema: {
      type: 'object',
      properties: {
        path: PATH,
        device: DEVICE,
        other_path: {
          type: 'string',
          description: 'A second recording of the same script at another batch size, for the largest batch that fits.',
        },
        batches: {
          type: 'array',
          items: { type: 'integer', minimum: 1 },
          minItems: 2,
          maxItems: 2,
          description: 'The batch sizes of path and other_path, when their command lines do not say (--batch N).',
        },
        capacity: CAPACITY,
      },
      additionalProperties: false,
    },
    changesRun: false,
  },
  {
    name: 'gpumem_compare',
    title: 'Compare two GPU memory recordings',
    userDescription: 'Compare two captures or snapshots: peaks, categories at each peak, and the lines that changed.',
    modelDescription:
      'Compare two recordings, for example before and after a change or at two batch sizes: the peak allocated and ' +
      'reserved memory of each and the difference, memory by category at each peak, and the source lines whose memory ' +
      `live at the peak changed most. ${SIZES}`,
    inputSchema: {
      type: 'object',
      properties: {
        path: { ...PATH, description: `The first recording ("before"). ${PATH.description}` },
        other_path: { type: 'string', description: 'The second recording ("after"): a capture, a snapshot pickle or a session folder.' },
        device: DEVICE,
      },
      required: ['other_path'],
      additionalProperties: false,
    },
    changesRun: false,
  },
  {
    name: 'gpumem_replay',
    title: 'What-if replay under an allocator policy',
    userDescription: 'Replay the allocations under another allocator policy on a simulated GPU: peak, OOM, empty_cache().',
    modelDescription:
      'What-if: replay the recording\'s allocations, in order, under a CUDA caching-allocator policy on a simulated ' +
      'device (no GPU needed): PyTorch\'s default (fixed segments), PyTorch with expandable_segments:True, the GPU Memory ' +
      'Lens allocator (expandable with trim) and without trim. For each policy: peak reserved memory and its ratio to ' +
      'peak allocated, whether the run would run out of memory at the device capacity and why (shortage or ' +
      `fragmentation), and what empty_cache() would release at the recorded markers. ${SIZES}`,
    inputSchema: {
      type: 'object',
      properties: {
        path: PATH,
        device: DEVICE,
        policy: {
          type: 'string',
          enum: ['all', 'pytorch', 'pytorch-expandable', 'lens', 'lens-no-trim'],
          description: 'The policy to replay (default: all of them).',
        },
        capacity: CAPACITY,
      },
      additionalProperties: false,
    },
    changesRun: false,
  },
  {
    name: 'gpumem_empty_cache',
    title: 'Empty the running workload\'s GPU cache',
    userDescription: 'Release the cached GPU memory of the running workload (torch.cuda.empty_cache()).',
    modelDescription:
      'Release the cached GPU memory of the PyTorch workload running now under GPU Memory Lens, as ' +
      'torch.cuda.empty_cache() would, in every process of the run, and report reserved memory before and after. It ' +
      'changes the running program (the allocator must reserve memory again when it next needs it), so the user is ' +
      `asked to confirm. ${SIZES}`,
    inputSchema: { type: 'object', properties: {}, additionalProperties: false },
    changesRun: true,
    confirm: {
      title: 'Empty the GPU cache of the running workload?',
      message:
        'Every process of the run releases its cached GPU memory (torch.cuda.empty_cache()). The run goes on; the allocator reserves memory again when it needs it.',
    },
  },
  {
    name: 'gpumem_capture_snapshot',
    title: 'Capture a snapshot of the running workload',
    userDescription: 'Write a PyTorch memory snapshot (.pickle) of the running workload.',
    modelDescription:
      'Write a PyTorch memory snapshot (.pickle, the format of torch.cuda.memory._dump_snapshot) of each process of the ' +
      'workload running now under GPU Memory Lens, and return their paths: pass one as `path` to the other gpumem_ ' +
      'tools, or open it at pytorch.org/memory_viz. It asks the running program to write a file, so the user is asked to confirm.',
    inputSchema: { type: 'object', properties: {}, additionalProperties: false },
    changesRun: true,
    confirm: {
      title: 'Capture a memory snapshot of the running workload?',
      message: 'Every process of the run writes a PyTorch memory snapshot (.pickle) next to its capture.',
    },
  },
];

export type ToolName = (typeof TOOLS)[number]['name'];

export function toolNamed(name: string): ToolDeclaration | undefined {
  return TOOLS.find((t) => t.name === name);
}
