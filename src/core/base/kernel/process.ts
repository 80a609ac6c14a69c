// The notebook kernel's process from the extension's side: spawn `python3 -m gpumem._kernel` (or the configured
// command) with the workload environment, send requests, dispatch replies to the execution they belong to
// (Note [Kernel protocol] in native/python/gpumem/_kernel.py). No vscode import: the glue drives it.
import { spawn, type ChildProcess } from 'node:child_process';
import { encodeRequest, LineSplitter, parseReply, type CellFigures, type KernelReply } from './protocol';

export type ReadyReply = Extract<KernelReply, { type: 'ready' }>;
export type DoneReply = Extract<KernelReply, { type: 'done' }>;

export interface KernelCommand {
  file: string;
  args: string[];
  cwd: string;
  env: Record<string, string>;
}

/** What one execution hears while it runs. */
export interface ExecutionSink {
  stream(name: 'stdout' | 'stderr', text: string): void;
  result(text: string): void;
  error(ename: string, evalue: string, traceback: string[]): void;
}

export interface KernelEvents {
  /** the kernel's own stderr (the bootstrap's lines, native output): for a log */
  log(text: string): void;
  exit(code: number | null, signal: string | null): void;
}

interface Pending {
  sink: ExecutionSink;
  resolve(done: DoneReply): void;
  reject(err: Error): void;
}

export class KernelProcess {
  readonly ready: Promise<ReadyReply>;
  private readonly child: ChildProcess;
  private readonly pending = new Map<string, Pending>();
  private seq = 0;
  private exited = false;
  private exitReason = '';

  constructor(cmd: KernelCommand, private readonly events: KernelEvents) {
    this.child = spawn(cmd.file, cmd.args, { cwd: cmd.cwd, env: cmd.env, stdio: ['pipe', 'pipe', 'pipe'] });
    let readyResolve!: (r: ReadyReply) => void;
    let readyReject!: (e: Error) => void;
    this.ready = new Promise((res, rej) => ((readyResolve = res), (readyReject = rej)));
    this.ready.catch(() => {}); // a kernel that never starts is reported through execute()
    const lines = new LineSplitter();
    this.child.stdout!.on('data', (chunk: Buffer) => {
      for (const line of lines.push(chunk)) {
        const r = parseReply(line);
        if ('invalid' in r) this.events.log(`gpumem kernel: dropped a reply (${r.invalid})\n`);
        else if (r.type === 'ready') readyResolve(r);
        else this.dispatch(r);
      }
    });
    this.child.stderr!.on('data', (chunk: Buffer) => this.events.log(chunk.toString('utf8')));
    this.child.stdin!.on('error', () => {}); // EPIPE after the kernel died: reported by 'exit'
    this.child.on('error', (err) => this.onExit(null, null, `could not start ${cmd.file}: ${err.message}`));
    this.child.on('exit', (code, signal) => this.onExit(code, signal, signal ? `the kernel was ended by ${signal}` : `the kernel exited with code ${code}`));
    this.onReadyFail = readyReject;
  }

  private readonly onReadyFail: (e: Error) => void;

  get pid(): number | undefined {
    return this.child.pid;
  }

  get alive(): boolean {
    return !this.exited;
  }

  private onExit(code: number | null, signal: string | null, reason: string): void {
    if (this.exited) return;
    this.exited = true;
    this.exitReason = reason;
    this.onReadyFail(new Error(reason));
    for (const p of this.pending.values()) p.reject(new Error(reason));
    this.pending.clear();
    this.events.exit(code, signal);
  }

  private dispatch(r: Exclude<KernelReply, ReadyReply>): void {
    const p = r.id !== null ? this.pending.get(r.id) : undefined;
    if (!p) {
      if (r.type === 'stream') this.events.log(r.text); // output between cells (a thread that prints)
      return;
    }
    switch (r.type) {
      case 'stream':
        p.sink.stream(r.name, r.text);
        break;
      case 'result':
        p.sink.result(r.text);
        break;
      case 'error':
        p.sink.error(r.ename, r.evalue, r.traceback);
        break;
      case 'done':
        this.pending.delete(r.id!);
        p.resolve(r);
        break;
    }
  }

  /** Runs `code` compiled as `file`; resolves when the kernel says it is done (requests queue in the kernel). */
  execute(code: string, file: string, sink: ExecutionSink): Promise<DoneReply> {
    if (this.exited) return Promise.reject(new Error(this.exitReason));
    const id = `x${++this.seq}`;
    return new Promise<DoneReply>((resolve, reject) => {
      this.pending.set(id, { sink, resolve, reject });
      this.child.stdin!.write(encodeRequest({ op: 'execute', id, code, file }));
    });
  }

  /** Ctrl-C: a KeyboardInterrupt in the running cell (its error), nothing between cells. */
  interrupt(): void {
    if (!this.exited) this.child.kill('SIGINT');
  }

  /** Asks the kernel to end (its capture closes cleanly), then ends it after `graceMs`. */
  shutdown(graceMs = 3000): Promise<void> {
    if (this.exited) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(() => this.child.kill('SIGKILL'), graceMs);
      this.child.once('exit', () => {
        clearTimeout(timer);
        resolve();
      });
      try {
        this.child.stdin!.end(encodeRequest({ op: 'shutdown' }));
      } catch {
        this.child.kill('SIGTERM');
      }
    });
  }
}

export type { CellFigures };
