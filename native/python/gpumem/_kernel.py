"""`python3 -m gpumem._kernel`: the process behind VS Code's "GPU Memory Lens" notebook kernel (src/glue/notebook).

It runs notebook cells one at a time, under the tool (the extension starts it like a script: a session folder, the
workload environment, so sitecustomize arms the bootstrap), and gives each cell the figures of Note [Cell figures]
(_ipython.py) through the same Meter (_meter.py): peak allocated, added to allocated and reserved, the top lines at
the cell's peak.

Note [Kernel protocol]: one JSON object per line, both ways; the TypeScript side is src/core/base/kernel/protocol.ts
(its types are the contract, test_kernel.py and test/unit/kernel-protocol.test.mjs hold both ends to it).
- requests on stdin:  {"op":"execute","id","code","file"}  ·  {"op":"shutdown"}
- replies on stdout:  {"type":"ready","version","pid","python","shell":"ipython"|"exec","session"}
                      {"type":"stream","id","name":"stdout"|"stderr","text"}   the cell's print()s, in order
                      {"type":"result","id","text"}                            the value of a last expression
                      {"type":"error","id","ename","evalue","traceback":[…]}
                      {"type":"done","id","ok","execution_count","file","figures":{…}|null}
The protocol owns the process's real stdout: at start the kernel keeps a private duplicate of fd 1 for its replies
and points fd 1 at fd 2, so what native code writes to fd 1 (and everything on fd 2: the bootstrap's own lines)
goes to stderr, which the extension shows in its output channel; Python-level output of a cell (sys.stdout,
sys.stderr) is sent as stream replies, so it reaches the cell's output in order with its result and error. stdin
is the request channel: user code gets an empty stdin (input() raises EOFError, as in a kernel without stdin).

Note [Cell files]: the extension names the file each execution is compiled as (`file`, in the session folder's
cells/), and the kernel writes the cell's source there. Frames of the capture then name a real file (openable,
shown by tracebacks, a user frame by the one rule, Note [User frames]), and the extension maps that path back to
the cell (its status bar item's lines, the annotations on the cell's lines). With IPython, its compiler is told to
use that name (CachingCompiler.get_code_name, as ipykernel does for its temp files); without IPython the cell is
compiled with that name, and a last expression's value is shown as IPython would.
Nothing here may end the kernel because of a cell: every failure of a cell is its error reply.
"""
import ast
import io
import json
import linecache
import os
import sys
import threading
import traceback

VERSION = 1


class Channel:
    """Replies to the extension: one JSON line each, on a private duplicate of the original stdout."""

    def __init__(self, fd):
        self.out = os.fdopen(fd, "w", encoding="utf-8", buffering=1)
        self.lock = threading.Lock()

    def send(self, msg):
        line = json.dumps(msg, ensure_ascii=False, default=str)
        with self.lock:
            try:
                self.out.write(line + "\n")
                self.out.flush()
            except (OSError, ValueError):
                pass  # the extension is gone; the cell still finishes


class CellStream(io.TextIOBase):
    """sys.stdout / sys.stderr while the kernel runs: each write is a stream reply of the running cell."""

    def __init__(self, channel, name, kernel):
        self.channel, self.stream_name, self.kernel = channel, name, kernel

    @property
    def name(self):
        return "<%s>" % self.stream_name

    @property
    def encoding(self):
        return "utf-8"

    def writable(self):
        return True

    def isatty(self):
        return False

    def fileno(self):
        return 2  # C-level writers (faulthandler, …) get stderr: fd 1 is not the cell's

    def write(self, s):
        if not isinstance(s, str):
            s = str(s)
        if s:
            self.channel.send({"type": "stream", "id": self.kernel.current, "name": self.stream_name, "text": s})
        return len(s)

    def flush(self):
        pass


def _make_shell(kernel):
    """IPython's InteractiveShell wired to the protocol, or None (plain exec) when IPython is missing or broken."""
    if os.environ.get("GPUMEM_KERNEL_SHELL") == "exec":
        return None
    try:
        from IPython.core.interactiveshell import InteractiveShell

        shell = InteractiveShell.instance()
        compiler = shell.compile
        original = compiler.get_code_name

        def get_code_name(raw_code, transformed_code, number):
            return kernel.next_file or original(raw_code, transformed_code, number)

        compiler.get_code_name = get_code_name

        def show_traceback(etype, evalue, stb):
            kernel.error(getattr(etype, "__name__", str(etype)), str(evalue), list(stb))

        shell._showtraceback = show_traceback
        hook = shell.displayhook
        hook.write_output_prompt = lambda: None

        def write_format_data(format_dict, md_dict=None):
            kernel.channel.send({"type": "result", "id": kernel.current, "text": format_dict.get("text/plain", "")})

        hook.write_format_data = write_format_data
        return shell
    except Exception as exc:
        sys.stderr.write("gpumem kernel: IPython is not usable (%s: %s); cells run with exec\n" % (type(exc).__name__, exc))
        return None


class Kernel:
    def __init__(self, channel):
        from . import _meter

        self.channel = channel
        self.meter = _meter.Meter()
        self.current = None
        self.next_file = None
        self.count = 0
        self.files = set()          # every file a cell was compiled as: its frames are the cell's lines
        self.errored = False
        self.ns = {"__name__": "__main__", "__builtins__": __builtins__}
        self.shell = _make_shell(self)

    # ---- replies ------------------------------------------------------------------------------------------
    def error(self, ename, evalue, tb):
        self.errored = True
        self.channel.send({"type": "error", "id": self.current, "ename": ename, "evalue": evalue, "traceback": tb})

    def is_line(self):
        from ._where import _internal_dirs, is_user_file

        internal, files = _internal_dirs(), self.files
        return lambda f: f in files or is_user_file(f, internal)

    # ---- one cell -----------------------------------------------------------------------------------------
    def execute(self, req):
        self.current, self.errored = req.get("id"), False
        code = req.get("code") or ""
        file_ = req.get("file") or None
        if file_:
            try:
                os.makedirs(os.path.dirname(file_), exist_ok=True)
                with open(file_, "w", encoding="utf-8") as f:
                    f.write(code)
                self.files.add(file_)
            except OSError as exc:
                sys.stderr.write("gpumem kernel: cannot write %s: %s\n" % (file_, exc))
        piece = None
        try:
            piece = self.meter.begin("cell [%d]" % (self.count + 1))
        except Exception as exc:
            sys.stderr.write("gpumem kernel: no figures for this cell: %s: %s\n" % (type(exc).__name__, exc))
        count = self.run(code, file_)
        figures = None
        if piece is not None:
            try:
                fig = self.meter.end(piece, is_line=self.is_line())
                figures = {k: fig.get(k) for k in ("peak_allocated", "peak_from", "max_memory_allocated", "peak_reserved",
                                                   "allocated_before", "allocated_after", "reserved_before", "reserved_after",
                                                   "added_allocated", "added_reserved", "device", "capture", "capture_peak")}
                figures["lines"] = [{"file": f, "line": ln, "function": fn, "bytes": b} for f, ln, fn, b in fig.lines]
            except Exception as exc:
                sys.stderr.write("gpumem kernel: no figures for this cell: %s: %s\n" % (type(exc).__name__, exc))
        self.channel.send({"type": "done", "id": self.current, "ok": not self.errored, "execution_count": count,
                           "file": file_, "figures": figures})
        self.current = None

    def run(self, code, file_):
        self.next_file = file_
        try:
            if self.shell is not None:
                result = self.shell.run_cell(code, store_history=True)
                self.count = result.execution_count or self.count + 1
                if not self.errored and (result.error_before_exec or result.error_in_exec) is not None:
                    exc = result.error_before_exec or result.error_in_exec
                    self.error(type(exc).__name__, str(exc), [])
                return self.count
            self.count += 1
            self.exec_plain(code, file_ or "<cell %d>" % self.count)
            return self.count
        except BaseException as exc:  # noqa: B902 — a cell never ends the kernel
            self.error(type(exc).__name__, str(exc), traceback.format_exception(type(exc), exc, exc.__traceback__))
            return self.count
        finally:
            self.next_file = None

    def exec_plain(self, code, file_):
        linecache.cache[file_] = (len(code), None, code.splitlines(True), file_)
        try:
            tree = ast.parse(code, file_, "exec")
        except SyntaxError as exc:
            self.error("SyntaxError", str(exc), traceback.format_exception_only(SyntaxError, exc))
            return
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        try:
            exec(compile(tree, file_, "exec"), self.ns)
            if last is not None:
                value = eval(compile(last, file_, "eval"), self.ns)
                if value is not None:
                    self.ns["_"] = value
                    self.channel.send({"type": "result", "id": self.current, "text": repr(value)})
        except BaseException as exc:  # noqa: B902
            tb = exc.__traceback__
            while tb is not None and tb.tb_frame.f_code.co_filename != file_:
                tb = tb.tb_next  # our own frames are not the cell's
            self.error(type(exc).__name__, str(exc), traceback.format_exception(type(exc), exc, tb))


def main():
    # The protocol's channels first, before anything can print (Note [Kernel protocol]).
    requests = os.fdopen(os.dup(0), "r", encoding="utf-8")
    channel = Channel(os.dup(1))
    try:
        os.dup2(2, 1)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
    except OSError:
        pass
    sys.stdin = io.StringIO("")
    from . import _meter
    from ._state import STATE

    line = _meter.start_tracking(os.path.join(os.getcwd(), ".gpumem"), "kernel")
    if line:
        sys.stderr.write(line + "\n")
    kernel = Kernel(channel)
    sys.stdout = CellStream(channel, "stdout", kernel)
    sys.stderr = CellStream(channel, "stderr", kernel)
    real_stderr = sys.__stderr__
    session = STATE.settings.session_dir if STATE.settings is not None else os.environ.get("GPUMEM_SESSION_DIR")
    channel.send({"type": "ready", "version": VERSION, "pid": os.getpid(), "python": sys.version.split()[0],
                  "shell": "ipython" if kernel.shell is not None else "exec", "session": session})
    while True:
        try:
            raw = requests.readline()
        except KeyboardInterrupt:
            continue  # an interrupt between cells
        if not raw:
            break
        try:
            req = json.loads(raw)
        except ValueError:
            real_stderr.write("gpumem kernel: not a request: %r\n" % raw[:200])
            continue
        op = req.get("op") if isinstance(req, dict) else None
        if op == "shutdown":
            break
        if op == "execute":
            try:
                kernel.execute(req)
            except KeyboardInterrupt:
                channel.send({"type": "done", "id": req.get("id"), "ok": False, "execution_count": kernel.count,
                              "file": req.get("file"), "figures": None})
        else:
            real_stderr.write("gpumem kernel: unknown request %r\n" % (op,))
    sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__


if __name__ == "__main__":
    main()
