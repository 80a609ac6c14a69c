import torch

_initialized = False


def is_available():
    return True


def is_initialized():
    return _initialized


def _lazy_init():
    global _initialized
    if _initialized:
        return
    _initialized = True
    torch._C._cuda_init()


def init():
    _lazy_init()


def current_device():
    _lazy_init()
    return 0


def device_count():
    return 1


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
