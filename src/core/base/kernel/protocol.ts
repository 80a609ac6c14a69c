// The notebook kernel's protocol (Note [Kernel protocol] in native/python/gpumem/_kernel.py): one JSON object per
// line, requests to the kernel's stdin and replies from its stdout. These types are the one contract; parseReply
// checks every line that comes back, so a malformed one is dropped with a reason rather than trusted.

export const KERNEL_PROTOCOL_VERSION = 1;

export type KernelRequest =
  | { op: 'execute'; id: string; code: string; file: string }
  | { op: 'shutdown' };

/** One line of the top lines at a cell's peak: the frame's file (a cell file or a user file), bytes live then. */
export interface CellLine {
  file: string;
  line: number;
  function: string;
  bytes: number;
}

/**
 * A cell's figures (Note [Cell figures] in gpumem/_ipython.py, Note [Piece figures] in gpumem/_meter.py): bytes;
 * device null while CUDA was never used. peak_allocated is the cell's own (above allocated_before, what was live at
 * its start); max_memory_allocated is PyTorch's figure inside the cell, both together.
 */
export interface CellFigures {
  peak_allocated: number;
  /** where the cell's own peak was counted: the capture's window, or PyTorch's counters */
  peak_from?: 'capture' | 'counters';
  max_memory_allocated?: number;
  peak_reserved: number;
  allocated_before: number;
  allocated_after: number;
  reserved_before: number;
  reserved_after: number;
  added_allocated: number;
  added_reserved: number;
  device: number | null;
  capture: string | null;
  capture_peak: number | null;
  lines: CellLine[];
}

export type KernelReply =
  | { type: 'ready'; version: number; pid: number; python: string; shell: 'ipython' | 'exec'; session: string | null }
  | { type: 'stream'; id: string | null; name: 'stdout' | 'stderr'; text: string }
  | { type: 'result'; id: string | null; text: string }
  | { type: 'error'; id: string | null; ename: string; evalue: string; traceback: string[] }
  | { type: 'done'; id: string | null; ok: boolean; execution_count: number; file: string | null; figures: CellFigures | null };

export function encodeRequest(r: KernelRequest): string {
  return JSON.stringify(r) + '\n';
}

const isNum = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);
const isStr = (v: unknown): v is string => typeof v === 'string';
const isId = (v: unknown): v is string | null => v === null || isStr(v);

function parseFigures(v: unknown): CellFigures | null | undefined {
  if (v === null) return null;
  if (typeof v !== 'object' || v === undefined) return undefined;
  const f = v as Record<string, unknown>;
  for (const k of ['peak_allocated', 'peak_reserved', 'allocated_before', 'allocated_after', 'reserved_before', 'reserved_after', 'added_allocated', 'added_reserved']) {
    if (!isNum(f[k])) return undefined;
  }
  if (!(f.device === null || isNum(f.device)) || !(f.capture === null || isStr(f.capture))) return undefined;
  if (!(f.capture_peak === null || f.capture_peak === undefined || isNum(f.capture_peak))) return undefined;
  if (!(f.max_memory_allocated === undefined || isNum(f.max_memory_allocated))) return undefined;
  if (!(f.peak_from === undefined || f.peak_from === 'capture' || f.peak_from === 'counters')) return undefined;
  if (!Array.isArray(f.lines)) return undefined;
  const lines: CellLine[] = [];
  for (const l of f.lines as unknown[]) {
    const r = l as Record<string, unknown>;
    if (typeof l !== 'object' || l === null || !isStr(r.file) || !isNum(r.line) || !isNum(r.bytes)) return undefined;
    lines.push({ file: r.file, line: r.line, function: isStr(r.function) ? r.function : '', bytes: r.bytes });
  }
  return { ...(f as unknown as CellFigures), capture_peak: (f.capture_peak as number | null | undefined) ?? null, lines };
}

/** A reply line checked against the contract: the reply, or a reason why it is not one. */
export function parseReply(line: string): KernelReply | { invalid: string } {
  let v: unknown;
  try {
    v = JSON.parse(line);
  } catch {
    return { invalid: `not JSON: ${line.slice(0, 120)}` };
  }
  if (typeof v !== 'object' || v === null) return { invalid: 'not an object' };
  const m = v as Record<string, unknown>;
  switch (m.type) {
    case 'ready':
      if (isNum(m.version) && isNum(m.pid) && isStr(m.python) && (m.shell === 'ipython' || m.shell === 'exec') && (m.session === null || isStr(m.session)))
        return m as KernelReply;
      break;
    case 'stream':
      if (isId(m.id) && (m.name === 'stdout' || m.name === 'stderr') && isStr(m.text)) return m as KernelReply;
      break;
    case 'result':
      if (isId(m.id) && isStr(m.text)) return m as KernelReply;
      break;
    case 'error':
      if (isId(m.id) && isStr(m.ename) && isStr(m.evalue) && Array.isArray(m.traceback) && m.traceback.every(isStr)) return m as KernelReply;
      break;
    case 'done': {
      const figures = parseFigures(m.figures);
      if (isId(m.id) && typeof m.ok === 'boolean' && isNum(m.execution_count) && (m.file === null || isStr(m.file)) && figures !== undefined)
        return { type: 'done', id: m.id, ok: m.ok, execution_count: m.execution_count, file: m.file, figures };
      break;
    }
    default:
      return { invalid: `unknown reply type ${JSON.stringify(m.type)}` };
  }
  return { invalid: `malformed ${String(m.type)} reply: ${line.slice(0, 120)}` };
}

/** Splits a byte stream into lines (a chunk may end inside a line or a UTF-8 character). */
export class LineSplitter {
  private rest = '';
  private readonly decoder = new TextDecoder('utf-8');

  push(chunk: Uint8Array | string): string[] {
    this.rest += typeof chunk === 'string' ? chunk : this.decoder.decode(chunk, { stream: true });
    const parts = this.rest.split('\n');
    this.rest = parts.pop() ?? '';
    return parts.filter((l) => l.length > 0);
  }
}
