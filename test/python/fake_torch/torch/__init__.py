"""Stand-in torch (see ../README.md)."""
import os as _os

__version__ = "2.11.0+fake"

from . import _C  # noqa: E402
from . import cuda  # noqa: E402
from . import autograd  # noqa: E402
from . import backends  # noqa: E402
from . import profiler  # noqa: E402
from . import nn  # noqa: E402

if _os.environ.get("FAKE_TORCH_ACCELERATOR") != "none":  # torch.accelerator came with 2.6, its memory APIs with 2.8
    from . import accelerator  # noqa: E402,F401
from ._tensor import Tensor, _fake_matmul, _fake_op, empty  # noqa: E402,F401


class version:
    cuda = "13.0"


def compile(model=None, *, fullgraph=False, dynamic=None, backend="inductor", mode=None, options=None, disable=False):
    """Returns what it was asked to do, so tests can see the effective mode/options."""
    return {"model": model, "mode": mode, "options": options}


if _os.environ.get("FAKE_TORCH_PLUGIN_INITS_CUDA"):
    import fake_cuda_plugin  # noqa: E402,F401  (like a device-backend autoload entry point)
