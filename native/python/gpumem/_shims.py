"""Replacements for the torch.cuda memory APIs a pluggable allocator breaks in PyTorch 2.11
(they raise "CUDAPluggableAllocator does not yet support getDeviceStats" and friends).

Each returns our allocator's numbers in PyTorch's format and mirrors PyTorch's behaviour before CUDA
is initialised (zeros / empty dicts). Both spellings, torch.cuda.X and torch.cuda.memory.X, are
replaced; PyTorch's own helpers that call these by module-global name (memory_cached, …) follow.
"""
import collections
import functools
import pickle
import warnings

from . import _stats, _summary
from ._state import STATE

_torch = None


def _initialized():
    return _torch.cuda.is_initialized()


def _index(device):
    return _torch.cuda._get_device_index(device, optional=True)


def memory_stats(device=None):
    if not _initialized():
        return collections.OrderedDict()  # PyTorch: memory_stats_as_nested_dict() is {} before init
    return _stats.flat_stats(STATE.native.stats(_index(device)))


def memory_stats_as_nested_dict(device=None):
    if not _initialized():
        return {}
    return _stats.nested_stats(_stats.flat_stats(STATE.native.stats(_index(device))))


def memory_allocated(device=None):
    return STATE.native.allocated(_index(device)) if _initialized() else 0


def memory_reserved(device=None):
    return STATE.native.reserved(_index(device)) if _initialized() else 0


def max_memory_allocated(device=None):
    return memory_stats(device=device).get("allocated_bytes.all.peak", 0)


def max_memory_reserved(device=None):
    return memory_stats(device=device).get("reserved_bytes.all.peak", 0)


def memory_summary(device=None, abbreviated=False):
    device = _index(device)
    stats = memory_stats(device=device)
    if not stats:
        # PyTorch would raise KeyError on an uninitialised device; an all-zero table is more useful.
        stats = _stats.flat_stats({})
    return _summary.format_summary(stats, device, abbreviated)


def reset_peak_memory_stats(device=None):
    if _initialized():
        STATE.native.reset_peak(_index(device))


def reset_accumulated_memory_stats(device=None):
    if _initialized():
        STATE.native.reset_accumulated(_index(device))


def reset_max_memory_allocated(device=None):
    warnings.warn(
        "torch.cuda.reset_max_memory_allocated now calls torch.cuda.reset_peak_memory_stats, "
        "which resets /all/ peak memory stats.",
        FutureWarning,
        stacklevel=2,
    )
    return reset_peak_memory_stats(device=device)


def reset_max_memory_cached(device=None):
    warnings.warn(
        "torch.cuda.reset_max_memory_cached now calls torch.cuda.reset_peak_memory_stats, "
        "which resets /all/ peak memory stats.",
        FutureWarning,
        stacklevel=2,
    )
    return reset_peak_memory_stats(device=device)


def _snapshot(device=None, augment_with_fx_traces=False):
    # The pickle comes from the allocator; our own objects only (dicts, lists, tuples, str, int).
    return pickle.loads(STATE.native.snapshot_pickle())


def _dump_snapshot(filename="dump_snapshot.pickle", augment_with_fx_traces=False):
    data = STATE.native.snapshot_pickle()
    with open(filename, "wb") as f:
        f.write(data)


def memory_snapshot(mempool_id=None, include_traces=True):
    return _snapshot()["segments"]


def _record_memory_history(enabled="all", *args, **kwargs):
    """Accepted and ignored: the lens allocator always records (every event goes to the capture)."""
    return None


def get_per_process_memory_fraction(device=None):
    _torch.cuda._lazy_init()
    if device is None:
        device = _torch.cuda.current_device()
    return STATE.fractions.get(_index(device), 1.0)


def _wrap_set_fraction(original):
    @functools.wraps(original)
    def set_per_process_memory_fraction(fraction, device=None):
        original(fraction, device)  # validates and calls our memory_fraction hook
        index = _torch.cuda.current_device() if device is None else _index(device)
        STATE.fractions[index] = fraction

    return set_per_process_memory_fraction


_SHIMS = {
    "memory_stats": memory_stats,
    "memory_stats_as_nested_dict": memory_stats_as_nested_dict,
    "memory_allocated": memory_allocated,
    "memory_reserved": memory_reserved,
    "max_memory_allocated": max_memory_allocated,
    "max_memory_reserved": max_memory_reserved,
    "memory_summary": memory_summary,
    "reset_peak_memory_stats": reset_peak_memory_stats,
    "reset_accumulated_memory_stats": reset_accumulated_memory_stats,
    "reset_max_memory_allocated": reset_max_memory_allocated,
    "reset_max_memory_cached": reset_max_memory_cached,
    "memory_snapshot": memory_snapshot,
    "_snapshot": _snapshot,
    "_dump_snapshot": _dump_snapshot,
    "_record_memory_history": _record_memory_history,
    "get_per_process_memory_fraction": get_per_process_memory_fraction,
}


def apply(torch):
    global _torch
    _torch = torch
    cuda, memory = torch.cuda, torch.cuda.memory
    for name, shim in _SHIMS.items():
        original = getattr(memory, name, None)
        if original is not None:
            functools.update_wrapper(shim, original, assigned=("__doc__",), updated=())
        setattr(memory, name, shim)
        # Only names torch.cuda already re-exports (the private ones live in torch.cuda.memory only).
        if hasattr(cuda, name):
            setattr(cuda, name, shim)
    setter = getattr(memory, "set_per_process_memory_fraction", None)
    if setter is not None:
        wrapped = _wrap_set_fraction(setter)
        memory.set_per_process_memory_fraction = wrapped
        if hasattr(cuda, "set_per_process_memory_fraction"):
            cuda.set_per_process_memory_fraction = wrapped
