import contextlib
import sys

import torch
from torch.backends import ContextProp, PropModule


def set_flags(_benchmark=None):
    orig = torch._C._get_cudnn_benchmark()
    if _benchmark is not None:
        torch._C._set_cudnn_benchmark(_benchmark)
    return orig


@contextlib.contextmanager
def flags(benchmark=False):
    orig = set_flags(benchmark)
    try:
        yield
    finally:
        set_flags(orig)


class CudnnModule(PropModule):
    benchmark = ContextProp(torch._C._get_cudnn_benchmark, torch._C._set_cudnn_benchmark)


sys.modules[__name__] = CudnnModule(sys.modules[__name__], __name__)
