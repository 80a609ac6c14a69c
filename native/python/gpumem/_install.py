"""The lens allocator swapped in for PyTorch's (the `lens` allocator mode).

change_current_allocator must run before CUDA initialises, so the start-up machine (_startup.py) calls
swap() as soon as torch has imported; the capture itself is created at the first CUDA use (Note [Lazy
configure] in native/python/README.md). This module knows nothing of when: it swaps, or says why not.
"""
from . import _backward_links, _native
from ._state import STATE
from ._where import warn

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


def swap(torch):
    """Swap in the lens allocator and patch torch's APIs it breaks. True when swapped; otherwise one line
    says why and the workload keeps PyTorch's allocator, untracked."""
    cuda = torch.cuda
    if cuda.is_initialized():
        too_late(None)
        return False
    settings = STATE.settings
    STATE.native = _native.Allocator(settings.allocator_so)
    pluggable = _pluggable(torch, settings.allocator_so)
    hooks = pluggable.allocator()
    for setter, symbol in HOOKS:
        address = STATE.native.symbol_address(symbol)
        if address and hasattr(hooks, setter):
            getattr(hooks, setter)(address)
    try:
        cuda.memory.change_current_allocator(pluggable)
    except RuntimeError as exc:
        too_late(exc)
        return False
    STATE.swapped = True
    from . import _guards, _markers, _shims

    _shims.apply(torch)
    _guards.apply(torch)
    _markers.apply(torch)
    return True


def _pluggable(torch, allocator_so):
    """CUDAPluggableAllocator over the lens library, through the observer module's OOM glue when it is built
    (Note [Lens OOM type] in _observer_ext.cpp: OOMs reach Python as torch.OutOfMemoryError, as natively)."""
    import ctypes

    from . import _observer_build

    STATE.lens_oom_glue = None
    try:
        glue = _observer_build.lens_glue(torch)
        if glue:
            native = STATE.native
            ctypes.CDLL(glue).gpumem_glue_set(ctypes.c_void_p(native.symbol_address("gpumem_malloc")),
                                              ctypes.c_void_p(native.symbol_address("gpumem_free")))
            pluggable = torch.cuda.memory.CUDAPluggableAllocator(glue, "gpumem_glue_malloc", "gpumem_glue_free")
            STATE.lens_oom_glue = glue
            _backward_links.start(glue)  # the same extension (Note [Backward on the forward line])
            return pluggable
    except Exception:  # the glue is a nicety: the lens runs without it, OOMs as RuntimeError
        STATE.lens_oom_glue = None
    return torch.cuda.memory.CUDAPluggableAllocator(allocator_so, "gpumem_malloc", "gpumem_free")


def too_late(exc):
    where = STATE.first_cuda_init or "an unknown place (CUDA was initialised while torch was importing, or before our bootstrap ran)"
    reason = " (%s)" % exc if exc is not None else ""
    warn(
        "memory tracking is OFF for this process: CUDA was already initialised at %s, and PyTorch "
        "cannot swap its allocator after that%s. Move that CUDA call after startup, or run without it; "
        "the workload continues with PyTorch's own allocator." % (where, reason)
    )
