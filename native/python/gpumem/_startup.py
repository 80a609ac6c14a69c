"""The bootstrap's start-up, one state machine (Note [Start-up]).

Note [Start-up]: tracking starts in two steps, whichever allocator tracks the run:

    NOT_STARTED --torch imported--> ARMED --first CUDA init--> CONFIGURING --> SWAPPED | OBSERVING --exit--> DONE
         (any step that cannot go on) --> OFF: the workload runs untracked, one line says why

- ARMED: the mode is chosen (_mode.py). In the lens mode the allocator is already swapped in (it must be,
  before CUDA initialises); in the PyTorch-allocator mode nothing of PyTorch's is touched yet.
- CONFIGURING: the first torch.cuda._lazy_init() runs. The lens mode creates the capture before PyTorch
  initialises (its allocator's init hook and first mallocs are recorded); the PyTorch-allocator mode lets
  PyTorch initialise first, then creates the capture and attaches the observer to the allocator it built.
- SWAPPED / OBSERVING: recording. _lazy_init is unwrapped again (no cost on later CUDA calls).

Re-entrant by construction. PyTorch's own _lazy_init re-enters itself while it initialises: its queued
calls (_check_capability → get_device_capability → get_device_properties) call _lazy_init again before
torch.cuda.is_initialized() turns true, and so does the observer's own get_device_properties. A
thread-local depth makes only the outermost call on a thread act; every inner call goes straight to
PyTorch's function, and the machine's lock is only ever taken at depth 0, so the thread that holds it
never asks for it again. (Before this, two modules that imported each other each guarded their half with
one non-reentrant lock; the inner call of the PyTorch-allocator mode took it twice and hung at the first
CUDA use on real torch.) Other threads arriving while the lens mode configures wait for it (their
mallocs must find the capture); in the PyTorch-allocator mode they go on, since PyTorch's own init lock
orders them and the observer seeds itself from PyTorch's snapshot of what is already live.

This module owns the transitions and nothing else: _install.py swaps the lens allocator, _capture.py
creates the capture, _observe.py observes PyTorch's allocator; none of them imports another.
"""
import sys
import threading

from . import _capture, _native
from ._state import STATE
from ._where import user_location, warn

NOT_STARTED, ARMED, CONFIGURING, SWAPPED, OBSERVING, OFF, DONE = (
    "not-started", "armed", "configuring", "swapped", "observing", "off", "done")


class Machine:
    def __init__(self):
        self.state = NOT_STARTED
        self.mode = None            # "lens" | "pytorch" once ARMED
        self.cond = threading.Condition(threading.Lock())
        self.owner = None           # the thread that moves ARMED → CONFIGURING → …
        self.tls = threading.local()
        self.original = None        # PyTorch's own torch.cuda._lazy_init
        self.history = []           # the states passed through, for tests and diagnostics

    def _to(self, state):
        self.state = state
        self.history.append(state)

    # ---- the _lazy_init wrapper -------------------------------------------------------------------------
    def lazy_init(self):
        tls = self.tls
        depth = getattr(tls, "depth", 0)
        original = self.original
        if not depth and STATE.first_cuda_init is None and not self.cuda.is_initialized():
            # Named in every state: the lens mode's too-late message needs it (a plugin that initialises
            # CUDA while torch imports, before the mode is armed).
            STATE.first_cuda_init = user_location(sys._getframe(2))
        if depth or self.state != ARMED:
            if self.state == CONFIGURING and self.mode == "lens" and not depth and self.owner is not threading.current_thread():
                self._wait_configured()
            return original()
        tls.depth = depth + 1
        try:
            if not self._claim():  # another thread claimed it a moment ago
                if self.mode == "lens":
                    self._wait_configured()
                return original()
            if self.mode == "lens":
                self._configure_lens()
                return original()
            try:
                result = original()
            except BaseException:
                self._release()  # PyTorch could not initialise: the next attempt tries again
                raise
        finally:
            tls.depth = depth
        torch = sys.modules["torch"]
        if not torch.cuda.is_initialized():
            self._release()
            return result
        # PyTorch-allocator mode: PyTorch's allocator exists now; observe it (at depth 0: every call the
        # observer makes into torch.cuda goes straight through).
        self._observe_now(torch)
        return result

    def _claim(self):
        with self.cond:
            if self.state != ARMED:
                return False
            self.owner = threading.current_thread()
            self._to(CONFIGURING)
            return True

    def _release(self):
        with self.cond:
            if self.state == CONFIGURING:
                self._to(ARMED)
            self.owner = None
            self.cond.notify_all()

    def _finish(self, state):
        with self.cond:
            self._to(state)
            self.owner = None
            self.cond.notify_all()
        self._unwrap()
        if state in (SWAPPED, OBSERVING):
            import atexit

            atexit.register(self._done)  # runs before the capture's own end record (atexit is last in, first out)

    def _done(self):
        with self.cond:
            if self.state in (SWAPPED, OBSERVING):
                self._to(DONE)

    def _wait_configured(self):
        with self.cond:
            self.cond.wait_for(lambda: self.state != CONFIGURING, timeout=120.0)

    def _configure_lens(self):
        try:
            _capture.configure("lens")
        except Exception as exc:  # _lazy_init must go on: the workload runs, untracked on disk
            warn("no capture for this process: %s: %s" % (type(exc).__name__, exc))
        # Configured, or failed for good (the allocator still serves; its stats shims still work).
        self._finish(SWAPPED)

    def _observe_now(self, torch):
        from . import _observe

        ok = False
        try:
            _capture.configure("pytorch")
            ok = STATE.configured and _observe.start(torch)
        except Exception as exc:  # the workload must go on, untracked
            warn("no capture for this process: %s: %s" % (type(exc).__name__, exc))
        self._finish(OBSERVING if ok else OFF)

    # ---- wrapping and unwrapping ------------------------------------------------------------------------
    def wrap(self, cuda):
        """Wrap torch.cuda._lazy_init in torch.cuda and in every torch.cuda.* module that imported it by name,
        so the first CUDA initialisation is seen wherever it comes from."""
        original = getattr(cuda, "_lazy_init", None)
        if original is None or self.original is not None:
            return
        self.original = original
        self.cuda = cuda
        machine = self

        def _lazy_init():
            return machine.lazy_init()

        _lazy_init.__wrapped__ = original
        _lazy_init.__doc__ = original.__doc__
        self.wrapper = _lazy_init
        _replace_everywhere(original, _lazy_init)

    def _unwrap(self):
        wrapper = getattr(self, "wrapper", None)
        if wrapper is not None and self.original is not None:
            _replace_everywhere(wrapper, self.original)


def _replace_everywhere(old, new):
    for name, module in list(sys.modules.items()):
        if (name == "torch.cuda" or name.startswith("torch.cuda.")) and getattr(module, "_lazy_init", None) is old:
            module._lazy_init = new


MACHINE = Machine()


# ---- the import hooks' entry points (_bootstrap.py) ------------------------------------------------------
def on_torch_cuda(cuda):
    """torch.cuda finished importing (inside `import torch`): from now on the first CUDA use is seen."""
    MACHINE.wrap(cuda)


def on_torch(torch):
    """torch finished importing: choose the mode and arm it."""
    m = MACHINE
    if m.state != NOT_STARTED:
        return
    cuda = getattr(torch, "cuda", None)
    if cuda is None or not hasattr(torch._C, "_cuda_customAllocator"):
        warn("memory tracking is off: this PyTorch build has no CUDA support (torch %s)" % getattr(torch, "__version__", "?"))
        m._to(OFF)
        return
    if m.original is None:
        m.wrap(cuda)
    choice = choose_mode(torch)
    m.mode = choice.mode
    if choice.mode == "pytorch":
        # PyTorch's allocator stays; it is observed from its first use (_observe.py).
        STATE.native = _native.Allocator(STATE.settings.allocator_so)
        m._to(ARMED)
        if cuda.is_initialized():  # torch was imported and used before us: observe from now on
            if m._claim():
                m._observe_now(torch)
        return
    from . import _install

    if _install.swap(torch):
        m._to(ARMED)
    else:
        m._to(OFF)
        m._unwrap()


def choose_mode(torch):
    """Resolve the allocator mode once per session and say it in one line (Note [Choosing the mode]).
    The answer is exported, so child processes (ranks, workers) inherit it instead of deciding again."""
    import os

    from . import _mode

    settings = STATE.settings
    requested = settings.allocator_mode
    announced = os.environ.get("GPUMEM_ALLOCATOR_ANNOUNCED") == "1"
    if requested == "auto":
        from . import _observer_build

        choice = _mode.decide("auto", _mode.entry_script(list(sys.argv)), roots=settings.user_roots,
                              observer=_observer_build.availability(torch))
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
