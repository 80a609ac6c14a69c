"""Stand-in torch.accelerator.memory, shaped like PyTorch 2.11's torch/accelerator/memory.py.

Under a pluggable allocator these report the native allocator, which is never initialised then:
memory_stats() is {} and memory_allocated() 0, whatever the current allocator holds, and
empty_cache() does nothing. FAKE_TORCH_ACCELERATOR=2.8 leaves out get_memory_info (added later),
so tests can check that the bootstrap adds no name a torch lacks.
"""
import collections
import os

import torch

__all__ = [
    "empty_cache", "max_memory_allocated", "max_memory_reserved", "memory_allocated", "memory_reserved",
    "memory_stats", "reset_accumulated_memory_stats", "reset_peak_memory_stats",
]
FAKE_TOTAL = 80 << 30
FAKE_FREE = 79 << 30


def _native_initialized():
    # The native allocator initialises with CUDA only when it is still the current allocator.
    return torch._C.current_allocator is None and torch.cuda.is_initialized()


def empty_cache():
    if not _native_initialized():
        return


def memory_stats(device_index=None, /):
    if not _native_initialized():
        return collections.OrderedDict()
    n = sum(torch._C.native_live.values())
    return collections.OrderedDict([("allocated_bytes.all.current", n)])


def memory_allocated(device_index=None, /):
    return memory_stats(device_index).get("allocated_bytes.all.current", 0)


def max_memory_allocated(device_index=None, /):
    return memory_stats(device_index).get("allocated_bytes.all.peak", 0)


def memory_reserved(device_index=None, /):
    return memory_stats(device_index).get("reserved_bytes.all.current", 0)


def max_memory_reserved(device_index=None, /):
    return memory_stats(device_index).get("reserved_bytes.all.peak", 0)


def reset_accumulated_memory_stats(device_index=None, /):
    return None


def reset_peak_memory_stats(device_index=None, /):
    return None


if os.environ.get("FAKE_TORCH_ACCELERATOR") != "2.8":
    __all__.append("get_memory_info")

    def get_memory_info(device_index=None, /):
        return (FAKE_FREE, FAKE_TOTAL)
