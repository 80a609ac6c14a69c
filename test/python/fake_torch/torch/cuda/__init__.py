"""Stand-in torch.cuda. _lazy_init has PyTorch 2.11's shape (torch/cuda/__init__.py), re-entrance included:
after torch._C._cuda_init() it runs the queued calls (_check_capability among them) while
is_initialized() is still False, and those call get_device_properties, which calls _lazy_init again; the
inner call returns at once because this thread is initialising (_tls.is_initializing). A bootstrap that
wraps _lazy_init sees that inner call too (the PyTorch-allocator mode hung on it)."""
import threading
import traceback

import torch

_initialized = False
_tls = threading.local()
_initialization_lock = threading.Lock()
_queued_calls = []  # (callable, traceback) run at the end of _lazy_init, as PyTorch's _lazy_call queues them
lazy_init_calls = []  # "outer" / "reentered" per _lazy_init call that found CUDA uninitialised (for tests)


def is_available():
    return True


def is_initialized():
    return _initialized


def _lazy_call(callable, **kwargs):
    if is_initialized():
        callable()
    else:
        _queued_calls.append((callable, traceback.format_stack()))


def _lazy_init():
    global _initialized
    if is_initialized() or hasattr(_tls, "is_initializing"):
        if not is_initialized():
            lazy_init_calls.append("reentered")
        return
    with _initialization_lock:
        if is_initialized():
            return
        lazy_init_calls.append("outer")
        torch._C._cuda_init()
        _tls.is_initializing = True
        try:
            for queued_call, _orig_traceback in _queued_calls:
                queued_call()
        finally:
            delattr(_tls, "is_initializing")
        _initialized = True


def init():
    _lazy_init()


def current_device():
    _lazy_init()
    return 0


def device_count():
    return 1


class _DeviceProperties:
    name, total_memory, major, minor = "Stand-in GPU", 8 << 30, 9, 0
    pci_bus_id, pci_domain_id, pci_device_id = 0x3B, 0, 0


def get_device_properties(device=None):
    _lazy_init()  # PyTorch: "will define _get_device_properties"
    return _DeviceProperties()


def get_device_capability(device=None):
    prop = get_device_properties(device)
    return prop.major, prop.minor


def get_device_name(device=None):
    return get_device_properties(device).name


def _check_capability():
    for d in range(device_count()):
        get_device_capability(d)


_lazy_call(_check_capability)


def _get_device_index(device, optional=False):
    if device is None:
        if not optional:
            raise ValueError("Expected a cuda device")
        return current_device()
    if isinstance(device, int):
        return device
    if isinstance(device, str):
        return int(device.split(":", 1)[1]) if ":" in device else current_device()
    raise ValueError("Invalid device %r" % (device,))


from .memory import *  # noqa: E402,F401,F403
