"""Replacements for the memory APIs a pluggable allocator breaks in PyTorch 2.4–2.11.

- torch.cuda.X and torch.cuda.memory.X raise "CUDAPluggableAllocator does not yet support
  getDeviceStats" and friends.
- torch.accelerator.X and torch.accelerator.memory.X (2.8+) go to the device allocator PyTorch
  registered for CUDA at start-up, its own caching allocator, which change_current_allocator does not
  replace: under the lens they report that allocator's empty state ({} stats, 0 bytes) and their
  empty_cache() releases nothing.

Each replacement returns our allocator's numbers in PyTorch's format and mirrors PyTorch's behaviour
before CUDA is initialised (zeros / empty dicts). Every name is feature-detected: a torch that lacks
one is not given it. PyTorch's own helpers that call these by module-global name (memory_cached,
torch.accelerator.memory_allocated → memory_stats, …) follow.

Note [MemPool]: torch.cuda.MemPool() asks the current allocator to createOrIncrefPool, which
PyTorch does not offer to pluggable allocators ("pluggable does not yet support createOrIncrefPool").
A stand-in class would not be a torch._C._MemPool (CUDA graph capture retains pools by that type) and
could not honour MemPool(allocator=…), use_on_oom or no_split, so we do not pretend: the constructor
raises a RuntimeError that says why and names the mode to re-run with.

Note [Memory labels under the lens]: torch.cuda.memory._set_memory_metadata(text) (PyTorch 2.10+) labels the trace
entries PyTorch's own allocator records from then on, on the calling thread; under a pluggable allocator it is
accepted and does nothing (and _get_memory_metadata() returns ""). The shim gives the label to the lens allocator
(gpumem_user_metadata: a REC_USER_METADATA in the capture, Note [User metadata] in native/format/gpumem_format.h,
and the user_metadata of the trace entries our _snapshot()/_dump_snapshot() return) and keeps it per thread for
_get_memory_metadata(), as PyTorch does. Like PyTorch's, the label is the calling thread's: allocations of
autograd's worker threads carry none. It initialises CUDA first when nothing has yet (the capture opens there), as
our _record_memory_history does. A dict (newer PyTorch's structured metadata) is written as compact JSON; anything
else but a str raises TypeError. Where a newer torch has _memory_metadata_supported() (False for a pluggable
allocator, so that best-effort labelling code skips its labels), it says True. torch.cuda.memory._annotate_memory
(a label on one live allocation) is not in PyTorch 2.11 and is not shimmed (Note [Labels and the mode] in _mode.py
keeps PyTorch's allocator for it); record_function ranges, PyTorch's other annotation, are markers already
(_markers.py) and an exported pickle's external_annotations.
"""
import collections
import functools
import json
import pickle
import threading
import warnings

from . import _history, _stats, _summary
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
    # The pickle comes from the allocator; our own objects only (dicts, lists, tuples, str, int). What the
    # user's _record_memory_history calls asked for (Note [History view]).
    return _history.view(pickle.loads(STATE.native.snapshot_pickle()))


def _dump_snapshot(filename="dump_snapshot.pickle", augment_with_fx_traces=False):
    data = STATE.native.snapshot_pickle()
    if _history.recorded():
        data = pickle.dumps(_history.view(pickle.loads(data)), protocol=4)
    with open(filename, "wb") as f:
        f.write(data)


def memory_snapshot(mempool_id=None, include_traces=True):
    segments = _snapshot()["segments"]
    if mempool_id is None:
        return segments
    # PyTorch's snapshot of one pool: the segments whose segment_pool_id is that pool's id.
    wanted = tuple(mempool_id)
    return [s for s in segments if tuple(s.get("segment_pool_id", (0, 0))) == wanted]


def _record_memory_history(enabled="all", *args, **kwargs):
    """The lens allocator always records (every event goes to the capture); what user code reads back
    through _snapshot()/_dump_snapshot() follows these calls as PyTorch's would (Note [History view])."""
    if args:  # positional: (context, stacks, max_entries) in 2.1+, (record_context, trace_alloc_max_entries, …) before
        names = ("record_context", "trace_alloc_max_entries", "trace_alloc_record_context") if isinstance(enabled, bool) \
            else ("context", "stacks", "max_entries")
        kwargs.update(zip(names, args))
    if not _initialized():
        _torch.cuda._lazy_init()
    _history.record(enabled, **kwargs)
    return None


_labels = threading.local()  # Note [Memory labels under the lens]: this thread's label ("" none)


def _set_memory_metadata(metadata):
    if isinstance(metadata, dict):
        metadata = json.dumps(metadata, separators=(",", ":"))
    if not isinstance(metadata, str):
        raise TypeError("_set_memory_metadata(): metadata must be a str, not %s" % type(metadata).__name__)
    if not _initialized():
        _torch.cuda._lazy_init()
    _labels.text = metadata
    STATE.native.user_metadata(metadata)


def _get_memory_metadata():
    return getattr(_labels, "text", "")


def _memory_metadata_supported():
    return True


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


# ---- torch.accelerator (torch/accelerator/memory.py, 2.8+): positional-only device_index ----------


def accelerator_memory_stats(device_index=None, /):
    return memory_stats(device_index)


def accelerator_memory_allocated(device_index=None, /):
    return memory_allocated(device_index)


def accelerator_memory_reserved(device_index=None, /):
    return memory_reserved(device_index)


def accelerator_max_memory_allocated(device_index=None, /):
    return max_memory_allocated(device_index)


def accelerator_max_memory_reserved(device_index=None, /):
    return max_memory_reserved(device_index)


def accelerator_reset_peak_memory_stats(device_index=None, /):
    reset_peak_memory_stats(device_index)


def accelerator_reset_accumulated_memory_stats(device_index=None, /):
    reset_accumulated_memory_stats(device_index)


def accelerator_empty_cache():
    # torch.cuda.empty_cache reaches our reset hook; PyTorch's own allocator holds nothing under the lens.
    _torch.cuda.memory.empty_cache()


def accelerator_get_memory_info(device_index=None, /):
    # (free, total) from the driver, like PyTorch; not from PyTorch's idle allocator.
    return _torch.cuda.memory.mem_get_info(_index(device_index))


_ACCELERATOR_SHIMS = {
    "memory_stats": accelerator_memory_stats,
    "memory_allocated": accelerator_memory_allocated,
    "memory_reserved": accelerator_memory_reserved,
    "max_memory_allocated": accelerator_max_memory_allocated,
    "max_memory_reserved": accelerator_max_memory_reserved,
    "reset_peak_memory_stats": accelerator_reset_peak_memory_stats,
    "reset_accumulated_memory_stats": accelerator_reset_accumulated_memory_stats,
    "empty_cache": accelerator_empty_cache,
    "get_memory_info": accelerator_get_memory_info,
}

# Note [MemPool]. The PyTorch-allocator mode is the one that keeps PyTorch's own allocator.
MEMPOOL_MESSAGE = (
    "gpumem: torch.cuda.MemPool cannot be created under the lens allocator: PyTorch creates memory pools "
    "only in its own caching allocator (createOrIncrefPool is not offered to pluggable allocators). "
    "Re-run this script in the PyTorch-allocator mode (gpuMemoryLens.allocator: \"pytorch\"; "
    "gpumem run --allocator pytorch), or without memory tracking."
)


def _wrap_mempool(original):
    class MemPool(original):
        def __init__(self, *args, **kwargs):
            try:
                super().__init__(*args, **kwargs)
            except RuntimeError as exc:
                if "createOrIncrefPool" not in str(exc):
                    raise
                raise RuntimeError(MEMPOOL_MESSAGE) from exc

    MemPool.__doc__ = original.__doc__
    MemPool.__module__ = original.__module__
    MemPool.__qualname__ = original.__qualname__
    return MemPool


def _replace(modules, name, shim):
    """Put `shim` under `name` in each module that already has that name (feature detection)."""
    done = False
    for module in modules:
        original = getattr(module, name, None) if module is not None else None
        if original is None:
            continue
        if not done:
            functools.update_wrapper(shim, original, assigned=("__doc__",), updated=())
            done = True
        setattr(module, name, shim)
    return done


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
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is not None:
        accel_memory = getattr(accelerator, "memory", None)
        for name, shim in _ACCELERATOR_SHIMS.items():
            _replace((accel_memory, accelerator), name, shim)
    pool = getattr(memory, "MemPool", None)
    if isinstance(pool, type):
        wrapped = _wrap_mempool(pool)
        memory.MemPool = wrapped
        if getattr(cuda, "MemPool", None) is pool:
            cuda.MemPool = wrapped
    # Note [Memory labels under the lens]: only where this torch has the API (2.10+).
    for name, shim in (("_set_memory_metadata", _set_memory_metadata), ("_get_memory_metadata", _get_memory_metadata),
                       ("_memory_metadata_supported", _memory_metadata_supported)):
        original = getattr(memory, name, None)
        if original is not None:
            functools.update_wrapper(shim, original, assigned=("__doc__",), updated=())
            setattr(memory, name, shim)
    setter = getattr(memory, "set_per_process_memory_fraction", None)
    if setter is not None:
        wrapped = _wrap_set_fraction(setter)
        memory.set_per_process_memory_fraction = wrapped
        if hasattr(cuda, "set_per_process_memory_fraction"):
            cuda.set_per_process_memory_fraction = wrapped
