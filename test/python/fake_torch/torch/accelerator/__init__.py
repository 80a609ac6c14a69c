"""Stand-in torch.accelerator (2.8+): device-generic APIs that go to the allocator PyTorch registered
for CUDA at start-up (its native caching allocator), not to the one change_current_allocator set."""
from .memory import *  # noqa: F401,F403
from .memory import __all__  # noqa: F401
