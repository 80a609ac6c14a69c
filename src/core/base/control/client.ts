// Control-socket client: connect, send one newline-delimited JSON request, await one reply line.
// Protocol: native/python/README.md ("Control protocol"); the server lives in the allocator .so.
import * as net from 'node:net';

export interface ControlReply {
  ok: boolean;
  error?: string;
  [key: string]: unknown;
}

export interface PingReply extends ControlReply {
  pid: number;
  rank: number;
  devices: { index: number; allocated: number; reserved: number }[];
}
export interface EmptyCacheReply extends ControlReply {
  reserved_before: number;
  reserved_after: number;
}
export interface SnapshotReply extends ControlReply {
  pickle: string;
  offset: number;
}

export class ControlError extends Error {
  constructor(
    message: string,
    readonly code: 'gone' | 'timeout' | 'protocol' | 'refused',
  ) {
    super(message);
    this.name = 'ControlError';
  }
}

/** Replies longer than this are a broken server, not a real answer. */
const MAX_REPLY = 1 << 20;
let nextId = 1;

/**
 * Sends `request` (an object with `cmd`) and resolves with the parsed reply. Rejects with a
 * ControlError when the workload is gone, does not answer within `timeoutMs`, or answers garbage;
 * a reply with ok:false resolves (the caller decides how to show `error`).
 */
export function sendRequest(socketPath: string, request: Record<string, unknown>, timeoutMs = 2000): Promise<ControlReply> {
  const id = nextId++;
  return new Promise((resolve, reject) => {
    let buf = '';
    let settled = false;
    const sock = net.createConnection({ path: socketPath });
    const finish = (err: Error | null, reply?: ControlReply) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      sock.destroy();
      if (err) reject(err);
      else resolve(reply!);
    };
    const timer = setTimeout(
      () => finish(new ControlError(`The workload did not answer "${String(request.cmd)}" within ${timeoutMs} ms (socket ${socketPath}). It may be stuck or stopped (SIGSTOP/debugger).`, 'timeout')),
      timeoutMs,
    );
    sock.setEncoding('utf8');
    sock.on('connect', () => sock.write(JSON.stringify({ ...request, id }) + '\n'));
    sock.on('data', (chunk: string) => {
      buf += chunk;
      const nl = buf.indexOf('\n');
      if (nl < 0) {
        if (buf.length > MAX_REPLY) finish(new ControlError(`Reply from ${socketPath} exceeds ${MAX_REPLY} bytes without a newline.`, 'protocol'));
        return;
      }
      let reply: unknown;
      try {
        reply = JSON.parse(buf.slice(0, nl));
      } catch {
        finish(new ControlError(`The workload sent a reply that is not JSON: ${buf.slice(0, Math.min(nl, 200))}`, 'protocol'));
        return;
      }
      if (typeof reply !== 'object' || reply === null || typeof (reply as ControlReply).ok !== 'boolean') {
        finish(new ControlError(`The workload's reply has no "ok" field: ${buf.slice(0, Math.min(nl, 200))}`, 'protocol'));
        return;
      }
      finish(null, reply as ControlReply);
    });
    sock.on('end', () => finish(new ControlError(`The workload closed the control connection without answering "${String(request.cmd)}".`, 'protocol')));
    sock.on('error', (e: NodeJS.ErrnoException) => {
      if (e.code === 'ENOENT') finish(new ControlError(`No control socket at ${socketPath}: the workload has exited (or never initialised CUDA).`, 'gone'));
      else if (e.code === 'ECONNREFUSED') finish(new ControlError(`The control socket ${socketPath} refused the connection: the workload has exited.`, 'refused'));
      else finish(new ControlError(`Cannot talk to the workload at ${socketPath}: ${e.message}`, 'protocol'));
    });
  });
}

function expectOk<T extends ControlReply>(reply: ControlReply, cmd: string): T {
  if (!reply.ok) throw new ControlError(`The workload refused "${cmd}": ${reply.error ?? 'no reason given'}`, 'protocol');
  return reply as T;
}

function num(reply: ControlReply, key: string, cmd: string): void {
  if (typeof reply[key] !== 'number') throw new ControlError(`Reply to "${cmd}" lacks the number "${key}".`, 'protocol');
}

export async function ping(socketPath: string, timeoutMs?: number): Promise<PingReply> {
  const r = expectOk<PingReply>(await sendRequest(socketPath, { cmd: 'ping' }, timeoutMs), 'ping');
  num(r, 'pid', 'ping');
  if (!Array.isArray(r.devices)) throw new ControlError('Reply to "ping" lacks "devices".', 'protocol');
  return r;
}

export async function emptyCache(socketPath: string, timeoutMs?: number): Promise<EmptyCacheReply> {
  const r = expectOk<EmptyCacheReply>(await sendRequest(socketPath, { cmd: 'empty_cache' }, timeoutMs ?? 10000), 'empty_cache');
  num(r, 'reserved_before', 'empty_cache');
  num(r, 'reserved_after', 'empty_cache');
  return r;
}

/** Asks for a PyTorch snapshot pickle; `path` overrides the default next to the capture. */
export async function snapshot(socketPath: string, path?: string, timeoutMs?: number): Promise<SnapshotReply> {
  const req: Record<string, unknown> = { cmd: 'snapshot' };
  if (path) req.path = path;
  // Writing a pickle of a big trace ring takes longer than a ping.
  const r = expectOk<SnapshotReply>(await sendRequest(socketPath, req, timeoutMs ?? 30000), 'snapshot');
  if (typeof r.pickle !== 'string') throw new ControlError('Reply to "snapshot" lacks "pickle".', 'protocol');
  return r;
}

export async function mark(socketPath: string, name: string, timeoutMs?: number): Promise<ControlReply> {
  return expectOk(await sendRequest(socketPath, { cmd: 'mark', name }, timeoutMs), 'mark');
}
