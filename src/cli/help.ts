// Help texts, one per command (`gpumem <command> --help`).
import { cliHelp, cliMetavar } from '../core/base/settings/parse';
import { SETTINGS } from '../core/base/settings/table';

/** `gpumem run`'s setting options, from the settings table (Note [Same options] in ./commands/run.ts). */
function settingOptions(): string {
  const lines: string[] = [];
  for (const d of SETTINGS) {
    if (!d.cli) continue;
    const head = `  ${d.cli}${cliMetavar(d) ? ' ' + cliMetavar(d) : ''}`;
    let line = head.length < 29 ? head.padEnd(29) : head + ' ';
    for (const word of cliHelp(d).split(' ')) {
      if (line.length + word.length > 110 && line.trim() !== '') {
        lines.push(line.trimEnd());
        line = ' '.repeat(29);
      }
      line += word + ' ';
    }
    lines.push(line.trimEnd());
  }
  return lines.join('\n');
}

export const HELP: Record<string, string> = {
  main: `gpumem — run PyTorch workloads under the GPU Memory Lens allocator

Usage: gpumem <command> [options]

Commands:
  run           run your script or module with memory tracking, leaving a capture per process
  ping          show running workloads of a session folder (allocated / reserved now)
  empty-cache   release a running workload's cached memory (prints reserved before/after)
  snapshot      write a PyTorch snapshot pickle of a running workload
  summary       summarise a capture (.gpumem) or a PyTorch snapshot pickle
  export        convert a capture to a PyTorch snapshot pickle
  replay        replay a capture's allocations under each allocator policy (peak, ratio, OOM at a capacity)
  advise        what to change, backed by the replay: each item with evidence, predicted peak, assumptions
  mcp           serve these analyses to an AI assistant: a Model Context Protocol server on stdio

Run \`gpumem <command> --help\` for a command's options.`,

  run: `Usage: gpumem run [options] [--] script.py [args…]
       gpumem run [options] [--] -m module [args…]
       gpumem run [options] -- command [args…]      e.g. -- torchrun --nproc_per_node=2 train.py

Runs the workload unchanged (same argv, cwd, stdin/stdout/stderr, exit code) with memory tracking
installed in every Python process it starts (the allocator mode: --allocator), and prints where the captures are.
\`python3 -m gpumem run\` takes the same options.

Options (before the script; everything after it goes to the workload):
  --out DIR                  folder for session folders (default: .gpumem)
  --python PATH              interpreter for script.py / -m (default: python3 on PATH)
${settingOptions()}
  --allocator-so PATH        the lens library (default: the built dist/native/libgpumem_allocator.so)
  -h, --help                 this help`,

  ping: `Usage: gpumem ping [--session DIR | --pid N] [--out DIR] [--json]

Asks each running process of a session folder for its pid, rank and current allocated/reserved memory.
Without --session, the newest session folder under --out (default .gpumem) with a running process is used;
--pid N picks the process with that pid from any session folder under --out.`,

  'empty-cache': `Usage: gpumem empty-cache [--session DIR | --pid N] [--out DIR] [--json]

Releases every fully free cached segment of the running workload(s) back to the driver, like
torch.cuda.empty_cache() would, and prints reserved memory before and after.
Session folder selection as for \`gpumem ping\`.`,

  snapshot: `Usage: gpumem snapshot [--session DIR | --pid N] [--out DIR] [--json]

Writes a PyTorch snapshot pickle (the format torch.cuda.memory._dump_snapshot writes; open it at
pytorch.org/memory_viz or in VS Code) of each running process and prints its path.
Session folder selection as for \`gpumem ping\`.`,

  summary: `Usage: gpumem summary FILE [--json] [--top N]
       gpumem summary DIR… | CAPTURE CAPTURE… [--json]

Summarises a capture (.gpumem) or a PyTorch snapshot pickle: who and when, peaks, breakdown, OOMs, what-if,
categories, steps and leaks, top allocation sites, the backward peak by the forward lines whose backward made
it, problems.
Given session folders (searched 3 levels deep) or several captures: one row per rank (host, rank, device,
peak allocated, peak reserved, OOMs, top line at the peak), with the ranks whose peak stands out flagged.`,

  replay: `Usage: gpumem replay FILE [--policy pytorch|pytorch-expandable|lens|lens-no-trim|all]
                    [--alloc-conf SETTINGS] [--capacity SIZE] [--device N] [--json]

Replays the allocation stream of a capture (.gpumem) or a PyTorch snapshot pickle's trace on a simulated
device, under each allocator policy, and prints per policy: peak reserved, peak reserved / peak allocated,
what empty_cache() would release at each marker, and whether (and where, and why) the run would run out
of memory at the capacity. No GPU is needed; the result is deterministic. The self-check line compares the
replay of the policy that ran with the peak the run recorded.

Policies:
  pytorch              PyTorch's caching allocator with fixed segments
  pytorch-expandable   the same with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
  lens                 GPU Memory Lens' default (expandable segments, trim on growth)
  lens-no-trim         GPU Memory Lens with expandable segments, no trim
  all                  every policy above (default)
The pytorch policies run with the PyTorch allocator settings the run recorded (max_split_size_mb,
max_non_split_rounding_mb, roundup_power2_divisions), else PyTorch's defaults. A setting the replay does
not model (garbage_collection_threshold, backend:cudaMallocAsync, an unknown key) is named, and that
policy gets no figure.

Options:
  --alloc-conf SETTINGS  what if PyTorch had these settings: PYTORCH_CUDA_ALLOC_CONF text for the pytorch
                       policies instead of the run's ("max_split_size_mb:128,roundup_power2_divisions:4");
                       the policy decides expandable_segments
  --capacity SIZE      device size for the OOM check: bytes or a binary unit (80GiB, 81559MiB);
                       default: the device total the capture records (none in most pickles: no OOM check)
  --device N           which CUDA device's stream to replay (default: the first with events)
  --json               machine-readable output`,

  advise: `Usage: gpumem advise FILE [OTHER] [--batches B1,B2] [--capacity SIZE] [--device N] [--json]

Advice from the run's own numbers, only where the data shows it: the allocator policy with the lowest
replayed peak (and the one that avoids an out-of-memory error), where empty_cache() would hand idle
reserved memory back, which module class to checkpoint, zero_grad(set_to_none=True) when gradients stay
allocated into the next forward, and the leak findings. Each item has its evidence, its predicted peak,
a confidence and what it assumes. --capacity and --device as for \`gpumem replay\`.

Batch size: give OTHER, a capture of the same script at another batch size, and the largest batch that
fits the device (or --capacity) is predicted from the line through both peaks. The batches come from
--batches B1,B2 (FILE's, then OTHER's) or from each run's command line (--batch N, --batch-size N, --bs N).`,

  mcp: `Usage: gpumem mcp [--out DIR]

Serves the analyses as tools to an AI assistant that speaks the Model Context Protocol (Claude Desktop, VS Code's
mcp.json, any MCP client), over stdio: summary, the top lines at the peak, leaks with their keepers, categories at
a moment or a step, advice with its predictions, a comparison of two recordings, what-if replay under an allocator
policy, and, acting on the running workload, empty-cache and snapshot (clients ask before calling those). Each
tool takes the path of a capture or a snapshot pickle; without one it answers about the workload running now.
The client starts it; to try it by hand, see src/cli/README.md.

Options:
  --out DIR    folder of session folders where the running workload is looked for (default: .gpumem)`,

  export: `Usage: gpumem export FILE --pickle OUT

Converts a capture (.gpumem) into a PyTorch snapshot pickle that pytorch.org/memory_viz opens.`,
};
