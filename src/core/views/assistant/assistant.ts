// The assistant's tools behind one call: check the input against the tool's schema (./input.ts), find the recording
// (a path, or the run followed now), compute the answer (./answers), add the human sizes (Note [Sizes twice]).
// The VS Code tools (src/glue/assistant) and the MCP server (src/cli/commands/mcp.ts) are thin adapters over call().
import { openModelAsync } from '../../base/model/open';
import { checkInput, type ToolInput } from './input';
import { liveProcess, recordingFile, RecordingCache, type LiveLookup, type LiveTarget, type OpenRecording, type Recording } from './recordings';
import { withSizes } from './sizes';
import { ToolError } from './answers/toolError';
import { TOOLS, toolNamed, type ToolDeclaration } from './tools';
import { summaryAnswer } from './answers/summary';
import { peakLinesAnswer } from './answers/peakLines';
import { leaksAnswer } from './answers/leaks';
import { categoriesAnswer } from './answers/categories';
import { adviceAnswer } from './answers/advice';
import { compareAnswer } from './answers/compare';
import { replayAnswer } from './answers/replay';
import { emptyCacheAnswer, snapshotAnswer } from './answers/control';

export interface AssistantHost {
  /** where relative paths start: the workspace folder (VS Code), the working directory (MCP) */
  baseDir(): string;
  /** the run followed now, or why there is none */
  live(): LiveLookup;
  /** how a file is read (default: the native reader on its worker thread) */
  read?: OpenRecording;
}

type Answer = (t: AssistantTools, input: ToolInput) => Promise<object>;

const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
const num = (v: unknown): number | undefined => (typeof v === 'number' ? v : undefined);

const ANSWERS: Record<string, Answer> = {
  gpumem_summary: async (t, i) => summaryAnswer(await t.recording(str(i.path)), { device: num(i.device) }),
  gpumem_peak_lines: async (t, i) => peakLinesAnswer(await t.recording(str(i.path)), { device: num(i.device), top: num(i.top) }),
  gpumem_leaks: async (t, i) => leaksAnswer(await t.recording(str(i.path)), { device: num(i.device) }),
  gpumem_categories: async (t, i) => categoriesAnswer(await t.recording(str(i.path)), { device: num(i.device), step: num(i.step), time_s: num(i.time_s) }),
  gpumem_advice: async (t, i) => {
    const rec = await t.recording(str(i.path));
    const other = str(i.other_path) === undefined ? undefined : await t.recording(str(i.other_path));
    if (i.batches !== undefined && !other) throw new ToolError('batches needs other_path, the second recording');
    return adviceAnswer(rec, { device: num(i.device), capacity: str(i.capacity), batches: i.batches as number[] | undefined }, other);
  },
  gpumem_compare: async (t, i) => {
    const before = await t.recording(str(i.path));
    const after = await t.recording(str(i.other_path));
    return compareAnswer(before, after, { device: num(i.device) });
  },
  gpumem_replay: async (t, i) => replayAnswer(await t.recording(str(i.path)), { device: num(i.device), policy: str(i.policy), capacity: str(i.capacity) }),
  gpumem_empty_cache: async (t) => emptyCacheAnswer(t.liveTarget()),
  gpumem_capture_snapshot: async (t) => snapshotAnswer(t.liveTarget()),
};

export class AssistantTools {
  readonly tools: readonly ToolDeclaration[] = TOOLS;
  private readonly cache: RecordingCache;

  constructor(private readonly host: AssistantHost) {
    this.cache = new RecordingCache(host.read ?? ((file) => openModelAsync(file)));
  }

  /**
   * The tool's answer as JSON-ready data. Throws a ToolError with a sentence for the model on any failure: a wrong
   * input, a missing or unreadable file, no running workload, or (said as such) an analysis that failed.
   */
  async call(name: string, input: unknown): Promise<object> {
    const tool = toolNamed(name);
    const answer = ANSWERS[name];
    if (!tool || !answer) throw new ToolError(`there is no tool named ${name}; the tools are ${TOOLS.map((t) => t.name).join(', ')}`);
    const checked = checkInput(tool, input);
    try {
      return withSizes(await answer(this, checked)) as object;
    } catch (e) {
      if (e instanceof ToolError) throw e;
      throw new ToolError(`${name} failed: ${e instanceof Error ? e.message : String(e)}`);
    }
  }

  /** The run followed now; a ToolError that says there is none, and what to pass instead. */
  liveTarget(): LiveTarget {
    const found = this.host.live();
    if ('none' in found) throw new ToolError(found.none);
    return found;
  }

  /** The recording a path names, or without one the run followed now (its first process). */
  async recording(given: string | undefined): Promise<Recording> {
    if (given !== undefined) {
      const { file, note } = recordingFile(given, this.host.baseDir());
      return { model: await this.cache.get(file), file, ...(note ? { note } : {}) };
    }
    const target = this.liveTarget();
    const { process, note } = liveProcess(target);
    return { model: process.model ?? (await this.cache.get(process.capture)), file: process.capture, note };
  }

  dispose(): void {
    this.cache.dispose();
  }
}

/** The text a host hands back: compact JSON (no indentation: every character is a token the model reads). */
export function answerText(answer: object): string {
  return JSON.stringify(answer);
}
