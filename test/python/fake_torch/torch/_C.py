"""Stand-in for torch._C: the allocator registry and the cudnn flag."""
import ctypes
import threading

_MALLOC = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p)
_FREE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p)
_INIT = ctypes.CFUNCTYPE(None, ctypes.c_int)
_RESET = ctypes.CFUNCTYPE(None)
_FRACTION = ctypes.CFUNCTYPE(None, ctypes.c_double, ctypes.c_int)


class _CUDAPluggableAllocator:
    def __init__(self, alloc_ptr, free_ptr):
        self.malloc = _MALLOC(alloc_ptr)
        self.free = _FREE(free_ptr)
        self.hooks = {}

    def _set(name):
        def setter(self, address):
            self.hooks[name] = address
        setter.__name__ = name
        return setter

    set_init_fn = _set("set_init_fn")
    set_reset_fn = _set("set_reset_fn")
    set_memory_fraction_fn = _set("set_memory_fraction_fn")
    set_base_alloc_fn = _set("set_base_alloc_fn")
    set_record_stream_fn = _set("set_record_stream_fn")
    set_begin_allocate_to_pool = _set("set_begin_allocate_to_pool")
    set_end_allocate_to_pool_fn = _set("set_end_allocate_to_pool_fn")
    set_release_pool = _set("set_release_pool")
    del _set


current_allocator = None  # None = the native caching allocator
native_live = {}          # fake native allocator: ptr → size
_next_native = [0x7F0000000000]


def _cuda_customAllocator(alloc_ptr, free_ptr):
    return _CUDAPluggableAllocator(alloc_ptr, free_ptr)


def _cuda_changeCurrentAllocator(allocator):
    global current_allocator
    import torch.cuda

    if torch.cuda._initialized or _cuda_initialized[0]:
        raise RuntimeError("Can't swap an already initialized allocator")
    current_allocator = allocator


_cuda_initialized = [False]  # the C++ side's state: set by _cuda_init, before Python's _initialized


def _cuda_init():
    _cuda_initialized[0] = True
    if current_allocator is not None and "set_init_fn" in current_allocator.hooks:
        _INIT(current_allocator.hooks["set_init_fn"])(1)


# PyTorch 2.10+ memory labels (c10 CUDAAllocator::setUserMetadata / getUserMetadata): the native caching allocator
# keeps a thread_local label; a pluggable allocator inherits the no-op virtuals (the label is dropped, "" is read).
_user_metadata = threading.local()


def _cuda_setMemoryMetadata(metadata):
    if not isinstance(metadata, str):
        raise TypeError("_cuda_setMemoryMetadata(): incompatible function arguments. The following argument types "
                        "are supported:\n    1. (arg0: str) -> None")
    if current_allocator is None:
        _user_metadata.text = metadata


def _cuda_getMemoryMetadata():
    return getattr(_user_metadata, "text", "") if current_allocator is None else ""


def _cuda_emptyCache():
    if current_allocator is not None and "set_reset_fn" in current_allocator.hooks:
        _RESET(current_allocator.hooks["set_reset_fn"])()


def _cuda_setMemoryFraction(fraction, device):
    if current_allocator is not None and "set_memory_fraction_fn" in current_allocator.hooks:
        _FRACTION(current_allocator.hooks["set_memory_fraction_fn"])(fraction, device)


def _alloc(size):
    if current_allocator is None:
        ptr = _next_native[0]
        _next_native[0] += max(512, size)
        native_live[ptr] = size
        return ptr
    return current_allocator.malloc(size, 0, None)


def _free(ptr, size):
    if current_allocator is None:
        native_live.pop(ptr, None)
    else:
        current_allocator.free(ptr, size, 0, None)


_cudnn_benchmark = [False]


def _get_cudnn_benchmark():
    return _cudnn_benchmark[0]


def _set_cudnn_benchmark(value):
    _cudnn_benchmark[0] = bool(value)


# cuBLAS's workspace, as real torch keeps one per handle and stream: allocated through the current CUDA allocator
# at the first matmul of the process and kept (32 MiB on an H100 with torch 2.11) until
# torch._C._cuda_clearCublasWorkspaces() frees it (what PyTorch's own leak check calls between tests).
_cublas_workspace = []


def _cuda_clearCublasWorkspaces():
    while _cublas_workspace:
        _cublas_workspace.pop().free()
