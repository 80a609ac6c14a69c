"""What user code reads back through torch.cuda.memory._snapshot() / _dump_snapshot() follows PyTorch's
_record_memory_history switches, although the lens allocator always records everything for the capture.

Note [History view]: PyTorch's snapshot holds trace entries only while history is enabled, stack frames only
where the context asked for them ("state": live blocks, "alloc": + allocation entries, "all": + frees;
None: no frames), and disabling clears the trace (as does clear_history=True). Tests and tools match on that
(PyTorch's test_memory_plots_history_context). The lens keeps its own full record in the capture; the view
given to user code is filtered to what PyTorch would have recorded:
- until the first _record_memory_history call the view is the full record (richer than PyTorch's empty trace,
  and harmless: nothing can depend on frames being absent before recording was asked for);
- each call remembers, per device, the last trace entry at that moment (a position, not a time: the
  allocator's timestamps and Python's clocks are not the same clock); entries after it take the call's state.
Blocks keep their frames when their allocation entry was recorded in a state with context.
"""
import pickle

from ._state import STATE

_switches = []  # [(last entry key per device, enabled, trace, context)]
_CONTEXT_KEEPS = {None: (), "state": ("block",), "alloc": ("block", "alloc"), "all": ("block", "alloc", "free")}
_ALLOC_ACTIONS = ("alloc", "segment_alloc", "segment_map")


def recorded():
    """True once user code called _record_memory_history."""
    return bool(_switches)


def _key(entry):
    return (entry.get("time_us"), entry.get("addr", entry.get("device_free")), entry.get("size"), entry.get("action"))


def _raw():
    return pickle.loads(STATE.native.snapshot_pickle())


def record(enabled="all", context="all", stacks="all", max_entries=None, clear_history=False, **legacy):
    """Remember a _record_memory_history call (both signatures: 2.1+ strings, and the older booleans)."""
    if isinstance(enabled, bool):  # _record_memory_history(enabled, record_context, trace_alloc_max_entries, …)
        trace = enabled and int(legacy.get("trace_alloc_max_entries", 1)) > 1
        if not enabled:
            context = None
        elif legacy.get("trace_alloc_record_context", False):
            context = "alloc"
        elif legacy.get("record_context", True):
            context = "state"
        else:
            context = None
        on = bool(enabled)
    else:
        on = enabled is not None
        trace = enabled == "all"
        if context not in _CONTEXT_KEEPS:
            raise ValueError("context must be one of None, 'state', 'alloc', 'all' (got %r)" % (context,))
    keys = [(_key(t[-1]) if t else None) for t in _raw()["device_traces"]]
    if not on or clear_history:
        # Disabling (or clear_history) empties PyTorch's trace: nothing before this point is shown again.
        _switches[:] = [(keys, False, False, None)]
    if on:
        _switches.append((keys, True, trace, context))


def _position(trace, key):
    """Index just after the entry `key` in `trace` (searched from the end), 0 if it is not there."""
    if key is None:
        return 0
    for i in range(len(trace) - 1, -1, -1):
        if _key(trace[i]) == key:
            return i + 1
    return 0


def view(snapshot=None):
    """The snapshot as PyTorch would have recorded it under the user's _record_memory_history calls."""
    snap = snapshot if snapshot is not None else _raw()
    if not _switches:
        return snap
    traces = snap.get("device_traces", [])
    alloc_state = {}  # (device, addr) -> the state its latest allocation entry was recorded in
    for d, trace in enumerate(traces):
        starts = [(_position(trace, keys[d] if d < len(keys) else None), on, tr, ctx) for keys, on, tr, ctx in _switches]
        kept = []
        for i, e in enumerate(trace):
            state = (False, False, None)  # before the first call: not recording
            for pos, on, tr, ctx in starts:
                if pos <= i:
                    state = (on, tr, ctx)
            on, tr, ctx = state
            if e.get("action") in _ALLOC_ACTIONS and "addr" in e:
                alloc_state[(d, e["addr"])] = on and "block" in _CONTEXT_KEEPS[ctx]
            if not (on and tr):
                continue
            if "frames" in e:
                part = "alloc" if e.get("action") in _ALLOC_ACTIONS else "free"
                if part not in _CONTEXT_KEEPS[ctx]:
                    e = dict(e, frames=[])
            kept.append(e)
        traces[d] = kept
    for seg in snap.get("segments", []):
        d = seg.get("device", 0)
        for b in seg.get("blocks", []):
            if b.get("frames") and not alloc_state.get((d, b.get("address")), False):
                b["frames"] = []
    return snap
