"""The capture of this process: created at the first CUDA use, in either allocator mode, and closed at exit.

configure() writes the capture's header, starts the control socket and the proc file (Note [Lazy configure]
in native/python/README.md); _shutdown() ends the capture with its REC_END record. The lens allocator
(_install.py) and the observer of PyTorch's allocator (_observe.py) both record into it; the start-up
machine (_startup.py) decides when it is created.
"""
import atexit
import os
import platform
import socket as _socket
import sys

from . import _native, _session_folder as _session
from ._settings import module_paths_wanted, rank_info, tags_wanted
from ._state import STATE
from ._where import warn


def _header(torch):
    rank, local_rank, world_size = rank_info()
    header = {
        "pid": os.getpid(),
        "argv": list(sys.argv),
        "orig_argv": list(getattr(sys, "orig_argv", sys.argv)),
        "executable": sys.executable,
        "cwd": os.getcwd(),
        "host": _socket.gethostname(),
        "rank": rank,
        "local_rank": local_rank,
        "world_size": world_size,
        "torch_version": getattr(torch, "__version__", "?"),
        "torch_cuda_version": getattr(getattr(torch, "version", None), "cuda", None),
        "python_version": platform.python_version(),
        "first_cuda_init": STATE.first_cuda_init,
        "bootstrap": "gpumem-python/1",
        "allocator_mode": STATE.settings.allocator_mode if STATE.settings is not None else "lens",
        # Note [Not recorded] (src/core/analyses/summary/notRecorded.ts): the panels say what a setting left out.
        "module_paths": module_paths_wanted(),
        "tags": tags_wanted(),
        # Note [Figures only] (_observe.py): the lens mode records every allocation, whatever GPUMEM_EVENTS says
        "events": STATE.settings is None or STATE.settings.events or STATE.settings.allocator_mode != "pytorch",
        # Note [Recorded steps] (_recorded_steps.py): allocations recorded for the first N optimizer steps only (0: every step)
        "record_steps": STATE.settings.record_steps
        if STATE.settings is not None and STATE.settings.allocator_mode == "pytorch" and STATE.settings.events else 0,
        "allocator_mode_reason": (STATE.mode_choice.reason + (" at " + STATE.mode_choice.where if STATE.mode_choice.where else ""))
        if STATE.mode_choice is not None else "",
        # Frames under this folder are the bootstrap's own (e.g. the backward() bracket, which is the
        # innermost frame of backward-attributed stacks): readers drop them when naming user lines.
        "bootstrap_dir": os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        # Where torch.compile writes the code it generates, when moved from inductor's default cache (whose
        # torchinductor_* folder name the user-frame rule knows): readers do not name those lines as the user's.
        "generated_code_dirs": [os.path.abspath(d) for d in (os.environ.get("TORCHINDUCTOR_CACHE_DIR"),) if d],
    }
    # The allocator policy that makes the capture's numbers (readers ask it what-if questions,
    # Note [Policy of the data] in native/addon/src/policy_replay.cpp).
    settings = STATE.settings
    if settings is not None and settings.allocator_mode != "pytorch":
        header["segments"] = settings.segments
        header["trim_on_growth"] = bool(settings.trim)
    elif settings is not None:
        # PyTorch's own policy made the numbers (Note [Policy of the data] in native/addon/src/policy_replay.cpp).
        try:
            header["pytorch_allocator_backend"] = backend = torch.cuda.memory.get_allocator_backend()
            if backend and backend != "native":
                # Note [Not recorded]: the observer takes PyTorch's stats for such a backend (cudaMallocAsync has
                # neither trace trackers nor history: _observe._start_source), whatever the events setting says,
                # so the file says so and the panels tell why.
                header["events"], header["record_steps"] = False, 0
            settings = torch.cuda.memory._snapshot().get("allocator_settings", {})
            header["pytorch_expandable_segments"] = bool(settings.get("expandable_segments"))
            # Note [Settings of the data] (native/addon/src/alloc_conf.h): every setting, so the replay of the
            # policy that ran runs with them, and says which it does not model. Versioned (FORMAT.md's header keys).
            header["pytorch_allocator_settings"] = {"version": 1, "settings": _plain(settings)}
        except Exception:
            pass
    return header


def _plain(value):
    """PyTorch's allocator_settings as JSON can hold them: dict keys as text (roundup_power2_divisions is keyed by
    MiB as numbers), tuples as lists, anything else as its text."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, float) and value != value or value in (float("inf"), float("-inf")):
        return str(value)  # JSON has no NaN or infinity
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def configure(mode="lens"):
    """Create the capture, the control socket and the proc file. On failure, tracking continues in
    memory (stats shims work) and one line says why there is no capture. In the PyTorch-allocator mode
    the lens core is never used: no segment policy is configured, the observer feeds the recorder."""
    settings = STATE.settings
    torch = sys.modules["torch"]
    pid = os.getpid()
    if mode != "pytorch" and not settings.events:
        warn("figures only (GPUMEM_EVENTS=0) is for PyTorch's own allocator; the lens allocator records every "
             "allocation: run with --allocator auto or pytorch for figures only")
    if mode != "pytorch" and settings.record_steps:
        warn("recording the first steps only (GPUMEM_RECORD_STEPS=%d) is for PyTorch's own allocator; the lens "
             "allocator records every allocation: run with --allocator auto or pytorch for it" % settings.record_steps)
    capture = _session.capture_path(settings.session_dir, pid)
    sock = _session.socket_path(settings.session_dir, pid)
    config = {
        "capture_path": capture,
        "header": _header(torch),
        "backend": settings.backend,
        "segments": settings.segments,
        "trim_on_growth": settings.trim,
        "stacks": settings.stacks,
        "user_roots": settings.user_roots,
        "sample_interval_ms": settings.sample_ms,
    }
    if mode == "pytorch":
        for key in ("backend", "segments", "trim_on_growth"):
            config.pop(key)
        # Snapshots come from PyTorch's own _snapshot() in this mode (Note [Recorder sources]): the lens's
        # snapshot ring would only cost a lock and a copy per event.
        config["trace_entries"] = 0
    if settings.sim_capacity and mode != "pytorch":
        config["sim_capacity"] = settings.sim_capacity
    if settings.budget:
        config["budget_bytes"] = settings.budget
    if sock:
        config["control_socket"] = sock
    try:
        STATE.native.configure(config)
    except _native.NativeError as exc:
        if not sock:
            warn("no capture for this process: %s" % exc)
            return
        # The capture matters more than the socket: retry without the control server.
        warn("no control channel for this process (%s); recording continues" % exc)
        config.pop("control_socket")
        sock = None
        try:
            STATE.native.configure(config)
        except _native.NativeError as exc2:
            warn("no capture for this process: %s" % exc2)
            return
    if not sock:
        warn("no control channel for this process: the session path is too long for a Unix socket and no private runtime folder is usable")
    STATE.configured = True
    STATE.capture, STATE.socket = capture, sock
    for text, level in STATE.pending_notices:
        STATE.native.notice(text, level)
    del STATE.pending_notices[:]
    rank, local_rank, world_size = rank_info()
    try:
        _session.write_proc_file(settings.session_dir, {
            "pid": pid, "rank": rank, "local_rank": local_rank, "world_size": world_size,
            "capture": capture, "socket": sock, "argv": list(sys.argv),
        })
    except OSError as exc:
        warn("cannot write the proc file in %s (%s); the extension will not find this process" % (settings.session_dir, exc))
    STATE.owner_pid = pid
    _track_exit_code()
    atexit.register(_shutdown)
    if hasattr(os, "register_at_fork"):
        # A forked child shares the parent's capture file but not its writer thread, and cannot use
        # CUDA anyway: it must never write (markers, shutdown) into the parent's capture.
        os.register_at_fork(after_in_child=_forget_in_child)


def _forget_in_child():
    STATE.configured = False


def _track_exit_code():
    """Best effort exit code for the capture's end record (the process's real status is never touched)."""
    real_exit = sys.exit
    real_hook = sys.excepthook

    def exit(status=None):
        STATE.exit_code = status if isinstance(status, int) else (0 if status is None else 1)
        return real_exit(status)

    def excepthook(kind, value, tb):
        STATE.exit_code = 130 if issubclass(kind, KeyboardInterrupt) else 1
        return real_hook(kind, value, tb)

    sys.exit = exit
    sys.excepthook = excepthook


def _shutdown():
    if os.getpid() != STATE.owner_pid:
        return
    try:
        STATE.native.shutdown(STATE.exit_code)
    finally:
        sock = STATE.socket
        if sock and not sock.startswith(STATE.settings.session_dir + os.sep):
            # Sockets outside the session folder are ours to clean; the session folder keeps its own.
            try:
                os.unlink(sock)
            except OSError:
                pass
