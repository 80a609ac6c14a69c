"""Swapping in the lens allocator (right after `import torch`) and configuring it (at first CUDA use).

Note [Two steps]: change_current_allocator must run before CUDA initialises, so it runs as soon as
torch has imported. gpumem_configure creates the capture file and the control socket, so it waits
for the first torch.cuda._lazy_init(): processes that never use CUDA leave nothing behind.
"""
import atexit
import os
import platform
import socket as _socket
import sys
import threading

from . import _native, _session_folder as _session
from ._settings import rank_info
from ._state import STATE
from ._where import user_location, warn

# (setter on torch._C._CUDAPluggableAllocator, exported symbol). Pool hooks take C++ types by value
# with the 2.x signatures; the pre-2.3 stream-pool setters have other signatures and are never wired.
HOOKS = (
    ("set_init_fn", "gpumem_init"),
    ("set_reset_fn", "gpumem_reset"),
    ("set_memory_fraction_fn", "gpumem_memory_fraction"),
    ("set_record_stream_fn", "gpumem_record_stream"),
    ("set_base_alloc_fn", "gpumem_base_alloc"),
    ("set_begin_allocate_to_pool", "gpumem_begin_allocate_to_pool"),
    ("set_end_allocate_to_pool_fn", "gpumem_end_allocate_to_pool"),
    ("set_release_pool", "gpumem_release_pool"),
)

_original_lazy_init = None
_configure_lock = threading.Lock()


def trace_cuda_init(cuda):
    """Wrap torch.cuda._lazy_init in torch.cuda and in every torch.cuda.* module that imported it by
    name, so the first CUDA initialisation is seen wherever it comes from."""
    global _original_lazy_init
    original = getattr(cuda, "_lazy_init", None)
    if original is None or _original_lazy_init is not None:
        return
    _original_lazy_init = original

    def _lazy_init():
        first = _original_lazy_init is not None and not cuda.is_initialized()
        if first:
            _first_cuda_init(sys._getframe(1))
        result = original()
        if first and STATE.observing:
            _observe_after_init(sys.modules["torch"])
        return result

    _lazy_init.__wrapped__ = original
    _lazy_init.__doc__ = original.__doc__
    _replace_everywhere(original, _lazy_init)


def _replace_everywhere(old, new):
    for name, module in list(sys.modules.items()):
        if (name == "torch.cuda" or name.startswith("torch.cuda.")) and getattr(module, "_lazy_init", None) is old:
            module._lazy_init = new


def _first_cuda_init(frame):
    global _original_lazy_init
    if STATE.first_cuda_init is None:
        STATE.first_cuda_init = user_location(frame)
    # Two threads may initialise CUDA at once: configure and unwrap exactly once.
    with _configure_lock:
        if STATE.swapped and not STATE.configured and not STATE.configure_tried:
            STATE.configure_tried = True
            try:
                configure()
            except Exception as exc:  # _lazy_init must go on: the workload runs, untracked on disk
                warn("no capture for this process: %s: %s" % (type(exc).__name__, exc))
        if STATE.swapped and _original_lazy_init is not None:
            # Configured (or failed for good): stop paying for the wrapper on every CUDA call.
            restore = _original_lazy_init
            _original_lazy_init = None
            _replace_everywhere(sys.modules["torch.cuda"]._lazy_init, restore)


def _observe_after_init(torch):
    """PyTorch-allocator mode: PyTorch has just initialised its allocator; observe it from now on."""
    global _original_lazy_init
    from . import _observe

    with _configure_lock:
        try:
            _observe.after_cuda_init(torch)
        except Exception as exc:  # the workload must go on, untracked
            warn("no capture for this process: %s: %s" % (type(exc).__name__, exc))
        if _original_lazy_init is not None:
            restore = _original_lazy_init
            _original_lazy_init = None
            _replace_everywhere(sys.modules["torch.cuda"]._lazy_init, restore)


def choose_mode():
    """Resolve the allocator mode once per session and say it in one line (Note [Choosing the mode]).
    The answer is exported, so child processes (ranks, workers) inherit it instead of deciding again."""
    from . import _mode

    settings = STATE.settings
    requested = settings.allocator_mode
    announced = os.environ.get("GPUMEM_ALLOCATOR_ANNOUNCED") == "1"
    if requested == "auto":
        choice = _mode.decide("auto", _mode.entry_script(list(sys.argv)), roots=settings.user_roots)
    else:
        choice = _mode.decide(requested, None)
        reason = os.environ.get("GPUMEM_ALLOCATOR_REASON")
        if reason:
            choice.reason, choice.where = reason, os.environ.get("GPUMEM_ALLOCATOR_WHERE") or None
    settings.allocator_mode = choice.mode
    STATE.mode_choice = choice
    os.environ["GPUMEM_ALLOCATOR"] = choice.mode
    os.environ["GPUMEM_ALLOCATOR_REASON"] = choice.reason
    os.environ["GPUMEM_ALLOCATOR_WHERE"] = choice.where or ""
    # One line when `auto` chose (an explicit mode is the user's own word; nothing to explain).
    if not announced and requested == "auto":
        sys.stderr.write(choice.line() + "\n")
        os.environ["GPUMEM_ALLOCATOR_ANNOUNCED"] = "1"
    return choice


def install(torch):
    """Swap in the lens allocator and patch torch; never raises for conditions the user can fix."""
    settings = STATE.settings
    cuda = getattr(torch, "cuda", None)
    if cuda is None or not hasattr(torch._C, "_cuda_customAllocator"):
        warn("memory tracking is off: this PyTorch build has no CUDA support (torch %s)" % getattr(torch, "__version__", "?"))
        return
    if _original_lazy_init is None:
        trace_cuda_init(cuda)
    if choose_mode().mode == "pytorch":
        # PyTorch's allocator stays; it is observed from its first use (gpumem/_observe.py).
        STATE.native = _native.Allocator(settings.allocator_so)
        STATE.observing = True
        if cuda.is_initialized():
            _observe_after_init(torch)
        return
    if cuda.is_initialized():
        _too_late(None)
        return
    STATE.native = _native.Allocator(settings.allocator_so)
    pluggable = cuda.memory.CUDAPluggableAllocator(settings.allocator_so, "gpumem_malloc", "gpumem_free")
    hooks = pluggable.allocator()
    for setter, symbol in HOOKS:
        address = STATE.native.symbol_address(symbol)
        if address and hasattr(hooks, setter):
            getattr(hooks, setter)(address)
    try:
        cuda.memory.change_current_allocator(pluggable)
    except RuntimeError as exc:
        _too_late(exc)
        return
    STATE.swapped = True
    from . import _guards, _markers, _shims

    _shims.apply(torch)
    _guards.apply(torch)
    _markers.apply(torch)


def _too_late(exc):
    where = STATE.first_cuda_init or "an unknown place (CUDA was initialised while torch was importing, or before our bootstrap ran)"
    reason = " (%s)" % exc if exc is not None else ""
    warn(
        "memory tracking is OFF for this process: CUDA was already initialised at %s, and PyTorch "
        "cannot swap its allocator after that%s. Move that CUDA call after startup, or run without it; "
        "the workload continues with PyTorch's own allocator." % (where, reason)
    )


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
        "allocator_mode_reason": (STATE.mode_choice.reason + (" at " + STATE.mode_choice.where if STATE.mode_choice.where else ""))
        if STATE.mode_choice is not None else "",
        # Frames under this folder are the bootstrap's own (e.g. the backward() bracket, which is the
        # innermost frame of backward-attributed stacks): readers drop them when naming user lines.
        "bootstrap_dir": os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
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
            header["pytorch_allocator_backend"] = torch.cuda.memory.get_allocator_backend()
            header["pytorch_expandable_segments"] = bool(
                torch.cuda.memory._snapshot().get("allocator_settings", {}).get("expandable_segments"))
        except Exception:
            pass
    return header


def configure(mode="lens"):
    """Create the capture, the control socket and the proc file. On failure, tracking continues in
    memory (stats shims work) and one line says why there is no capture. In the PyTorch-allocator mode
    the lens core is never used: no segment policy is configured, the observer feeds the recorder."""
    settings = STATE.settings
    torch = sys.modules["torch"]
    pid = os.getpid()
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
