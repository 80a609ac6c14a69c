"""Stand-in torch.cuda.memory: raises like PyTorch 2.11 does under a pluggable allocator."""
import collections
import ctypes

import torch

from . import _get_device_index, _lazy_init, is_initialized  # bound by name, as PyTorch does

__all__ = [
    "memory_stats", "memory_stats_as_nested_dict", "memory_allocated", "memory_reserved",
    "max_memory_allocated", "max_memory_reserved", "memory_summary", "reset_peak_memory_stats",
    "reset_accumulated_memory_stats", "reset_max_memory_allocated", "reset_max_memory_cached",
    "memory_snapshot", "get_per_process_memory_fraction", "set_per_process_memory_fraction",
    "empty_cache", "CUDAPluggableAllocator", "change_current_allocator", "mem_get_info", "MemPool",
]


def _unsupported(what):
    if torch._C.current_allocator is not None:
        raise RuntimeError(
            "CUDAPluggableAllocator does not yet support %s. If you need it, please file an issue "
            "describing your use case." % what
        )


def memory_stats(device=None):
    """As PyTorch's: the nested dict flattened in Python ("allocated_bytes.all.current"), sorted; so a test that sets
    memory_stats_as_nested_dict gets both, as under real torch."""
    result = []

    def add(prefix, obj):
        if isinstance(obj, dict):
            for k, v in obj.items():
                add(prefix + k + "." if isinstance(v, dict) else prefix + k, v)
        else:
            result.append((prefix, obj))

    add("", memory_stats_as_nested_dict(device=device))
    result.sort()
    return collections.OrderedDict(result)


def memory_stats_as_nested_dict(device=None):
    _unsupported("getDeviceStats")
    return {}


def memory_allocated(device=None):
    _unsupported("getDeviceStats")
    return sum(torch._C.native_live.values())


def memory_reserved(device=None):
    _unsupported("getDeviceStats")
    return 0


def max_memory_allocated(device=None):
    _unsupported("getDeviceStats")
    return 0


def max_memory_reserved(device=None):
    _unsupported("getDeviceStats")
    return 0


def memory_summary(device=None, abbreviated=False):
    _unsupported("getDeviceStats")
    return ""


def reset_peak_memory_stats(device=None):
    _unsupported("resetPeakStats")


def reset_max_memory_allocated(device=None):
    _unsupported("resetPeakStats")


def reset_max_memory_cached(device=None):
    _unsupported("resetPeakStats")


def reset_accumulated_memory_stats(device=None):
    _unsupported("resetAccumulatedStats")


def memory_snapshot(mempool_id=None, include_traces=True):
    _unsupported("snapshot")


def _snapshot(device=None, augment_with_fx_traces=False):
    _unsupported("snapshot")


def _dump_snapshot(filename="dump_snapshot.pickle", augment_with_fx_traces=False):
    _unsupported("snapshot")


def _record_memory_history(enabled="all", *args, **kwargs):
    _unsupported("recordHistory")


def _set_memory_metadata(metadata: str):
    """PyTorch 2.10+: labels the trace entries the calling thread's allocations record from now on. Under a
    pluggable allocator (the default virtual of CUDAAllocator) the label is accepted and dropped; a non-str
    fails like pybind's std::string argument."""
    torch._C._cuda_setMemoryMetadata(metadata)


def _get_memory_metadata() -> str:
    """The calling thread's label; always "" under a pluggable allocator."""
    return torch._C._cuda_getMemoryMetadata()


def get_per_process_memory_fraction(device=None):
    _lazy_init()
    _unsupported("getMemoryFraction")
    return 1.0


def set_per_process_memory_fraction(fraction, device=None):
    _lazy_init()
    if device is None:
        device = torch.cuda.current_device()
    device = _get_device_index(device)
    if not isinstance(fraction, float):
        raise TypeError("Invalid type for fraction argument, must be `float`")
    if fraction < 0 or fraction > 1:
        raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
    torch._C._cuda_setMemoryFraction(fraction, device)


def empty_cache():
    if is_initialized():
        torch._C._cuda_emptyCache()


class CUDAPluggableAllocator:
    def __init__(self, path_to_so_file, alloc_fn_name, free_fn_name):
        allocator = ctypes.CDLL(path_to_so_file)
        alloc_fn = ctypes.cast(getattr(allocator, alloc_fn_name), ctypes.c_void_p).value
        free_fn = ctypes.cast(getattr(allocator, free_fn_name), ctypes.c_void_p).value
        self._allocator = torch._C._cuda_customAllocator(alloc_fn, free_fn)

    def allocator(self):
        return self._allocator


def change_current_allocator(allocator):
    torch._C._cuda_changeCurrentAllocator(allocator.allocator())


def mem_get_info(device=None):
    return (79 << 30, 80 << 30)


_next_pool = [1]


class MemPool:
    """torch.cuda.MemPool: the C++ constructor asks the current allocator to createOrIncrefPool."""

    def __init__(self, allocator=None, use_on_oom=False, no_split=False):
        if torch._C.current_allocator is not None:
            raise RuntimeError(
                "pluggable does not yet support createOrIncrefPool. If you need it, please file an issue "
                "describing your use case."
            )
        self._id = (0, _next_pool[0])
        _next_pool[0] += 1

    @property
    def id(self):
        return self._id
