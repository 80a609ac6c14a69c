"""PyTorch's memory history in the PyTorch-allocator mode: the user's own _record_memory_history, kept as they set it
beside the observer's recorder (Note [User history in the PyTorch-allocator mode]), and the fallback source that
drains that history into the capture when no tracker could be built."""
import functools
import threading

from ._observer_api import feed_trace
from ._observer_live import LIVE
from ._state import STATE
from ._where import warn


def raw_snapshot(torch):
    """PyTorch's own _snapshot(), whatever the user's history view shows (Note [User history in the
    PyTorch-allocator mode])."""
    snapshot = VIEW.raw_snapshot or torch.cuda.memory._snapshot
    return snapshot()


class HistoryDrain:
    """The fallback source: PyTorch's history, drained into the capture (every second and at states)."""

    def __init__(self, torch):
        self.torch = torch
        self.since = {}
        self.stacks = {}
        self.lock = threading.Lock()
        self.enable()
        t = threading.Thread(target=self._loop, name="gpumem-history-drain", daemon=True)
        t.start()

    def enable(self):
        record = VIEW.raw_record or self.torch.cuda.memory._record_memory_history
        record(enabled="all", context="alloc", stacks="python", max_entries=1_000_000)

    def drain(self, snap=None):
        with self.lock:
            snap = snap or raw_snapshot(self.torch)
            for d, trace in enumerate(snap.get("device_traces", [])):
                _, _, last = feed_trace(LIVE.obs, trace, d, self.stacks, self.since.get(d))
                self.since[d] = last

    def _loop(self):
        import time

        while True:
            time.sleep(1.0)
            try:
                self.drain()
            except Exception:
                return


# ---- the user's own _record_memory_history ----------------------------------------------------------------
_CONTEXT_LEVEL = {None: 0, "state": 1, "alloc": 2, "all": 3}
# The trace actions skip_actions accepts (torch 2.11 refuses "user_defined").
RING_ACTIONS = ("alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "segment_map",
                "segment_unmap", "snapshot", "oom")


class _HistoryView:
    """Note [User history in the PyTorch-allocator mode]: the observer's stacks come from a context recorder
    installed through PyTorch's recordHistory (Note [Observer stacks]), and the history fallback is PyTorch's
    history itself; a user's own _record_memory_history would replace either, and their snapshots would show
    the observer's trace. So _record_memory_history is wrapped: PyTorch's own runs first (it validates the
    arguments and sets compile contexts and annotations exactly as natively), then the observer's recorder is
    put back, chained with PyTorch's traceback gatherer when the user asked for stacks ("python", or "all" with
    C++ frames), with the user's trace size, context level and skipped actions. _snapshot() (and so
    _dump_snapshot() and memory_snapshot()) shows no trace entries while the user's history is off, as
    natively. What differs from a native run: with the user's history off, or at context "state"/None, trace
    entries are still gathered at malloc (the observer's recorder runs at context level "state" at least)."""

    def __init__(self):
        self.on = False           # the user's history is on
        self.user_stacks = 0      # 0 none, 1 python, 2 all
        self.max_entries = 1
        self.when = 0
        self.skip = []
        self.raw_snapshot = None  # PyTorch's own _snapshot and _record_memory_history
        self.raw_record = None

    def install(self, torch):
        memory = torch.cuda.memory
        original = getattr(memory, "_record_memory_history", None)
        snapshot = getattr(memory, "_snapshot", None)
        if original is None or snapshot is None or getattr(original, "_gpumem", False):
            return
        self.raw_snapshot = snapshot
        self.raw_record = original
        view = self

        @functools.wraps(original)
        def _record_memory_history(*args, **kwargs):
            result = original(*args, **kwargs)
            try:
                view.remember(original, args, kwargs)
                view.apply_ours()
            except Exception as exc:  # never fail the user's call for our bookkeeping
                warn("after _record_memory_history: %s: %s" % (type(exc).__name__, exc))
            return result

        @functools.wraps(snapshot)
        def _snapshot(*args, **kwargs):
            snap = snapshot(*args, **kwargs)
            if not view.on and isinstance(snap, dict) and isinstance(snap.get("device_traces"), list):
                snap["device_traces"] = [[] for _ in snap["device_traces"]]
            return snap

        _record_memory_history._gpumem = True
        memory._record_memory_history = _record_memory_history
        memory._snapshot = _snapshot
        if getattr(torch.cuda, "_record_memory_history", None) is original:
            torch.cuda._record_memory_history = _record_memory_history

    def remember(self, original, args, kwargs):
        import inspect

        try:
            bound = inspect.signature(original).bind(*args, **kwargs)
            bound.apply_defaults()
            a = bound.arguments
        except (TypeError, ValueError):
            a = dict(kwargs)
        enabled = a.get("enabled", "all")
        if isinstance(enabled, bool):  # the pre-2.1 signature: (enabled, record_context, trace_alloc_max_entries, …)
            self.on = enabled
            self.user_stacks = 1 if enabled else 0
            self.max_entries = int(a.get("trace_alloc_max_entries", 1) or 1) if enabled else 1
            self.when = (2 if a.get("trace_alloc_record_context") else 1) if enabled else 0
            self.skip = []
            return
        self.on = enabled is not None
        context = a.get("context", "all") if self.on else None
        stacks = a.get("stacks", "all")
        self.when = _CONTEXT_LEVEL.get(context, 0)
        self.user_stacks = 0 if not self.on or context is None else (2 if stacks == "all" else 1)
        self.max_entries = int(a.get("max_entries") or 1) if self.on and enabled == "all" else 1
        self.skip = list(a.get("skip_actions") or [])

    def apply_ours(self):
        """Puts the observer's recorder (or the fallback's history) back after the user's settings."""
        stacks = bool(STATE.settings.stacks) if STATE.settings is not None else True
        stacks = stacks and not LIVE.events_off  # Note [Recorded steps]: our recorder is out of PyTorch's history for good
        if LIVE.tracker is not None:
            # With the user's history off, PyTorch's trace ring is kept empty (every action skipped): the
            # tracker still sees every entry (probed on torch 2.11: skip_actions gates the ring only), and
            # no entry is copied into a ring nobody reads.
            skip = self.skip if self.on else list(RING_ACTIONS)
            LIVE.tracker.record(stacks, self.user_stacks, min(self.max_entries, 2 ** 62), self.when, skip)
        elif LIVE.fallback is not None:
            LIVE.fallback.enable()


VIEW = _HistoryView()
