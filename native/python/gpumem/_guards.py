"""What cannot be shimmed under a pluggable allocator in PyTorch 2.11, handled visibly.

- cudnn.benchmark=True: cuDNN's autotuner sizes workspaces with the allocator's cacheInfo(), which
  pluggable allocators cannot provide ("does not yet support cacheInfo" crash). Benchmark stays off.
- torch.compile(mode="reduce-overhead"/"max-autotune"): CUDA graph trees need private-pool
  checkpointing (checkPoolLiveAllocations), also not pluggable. See Note [reduce-overhead] in README.
"""
import functools

from . import _native
from ._state import STATE
from ._where import warn

_warned = set()

CUDNN_MESSAGE = (
    "torch.backends.cudnn.benchmark=True is kept off under memory tracking: cuDNN's autotuner needs "
    "the allocator's cacheInfo, which PyTorch does not offer to pluggable allocators (it would crash). "
    "Results are the same; convolutions may run slower than with benchmark mode. To keep benchmark mode "
    "on, re-run in the PyTorch-allocator mode: gpumem run --allocator pytorch (or the setting "
    "gpuMemoryLens.allocator: \"pytorch\"; auto chooses it when it sees the line statically)."
)


def _once(key, message):
    if key in _warned:
        return
    _warned.add(key)
    warn(message)
    if STATE.configured:
        STATE.native.notice(message, _native.NOTICE_WARNING)
    else:
        STATE.pending_notices.append((message, _native.NOTICE_WARNING))  # written at configure


def _cudnn_setter(original):
    @functools.wraps(original)
    def set_benchmark(*args):
        # ContextProp calls setter(value); torch._C._set_cudnn_benchmark(value) too.
        if args and args[-1]:
            _once("cudnn", CUDNN_MESSAGE)
            args = args[:-1] + (False,)
        return original(*args)

    return set_benchmark


def _guard_cudnn(torch):
    cudnn = torch.backends.cudnn
    if hasattr(torch._C, "_set_cudnn_benchmark"):
        # torch.backends.cudnn.flags(benchmark=True) and set_flags() call this directly.
        torch._C._set_cudnn_benchmark = _cudnn_setter(torch._C._set_cudnn_benchmark)
    prop = type(cudnn).__dict__.get("benchmark")
    if prop is not None and callable(getattr(prop, "setter", None)) and not isinstance(prop, property):
        prop.setter = _cudnn_setter(prop.setter)  # the `cudnn.benchmark = True` spelling
    if getattr(cudnn, "benchmark", False):
        cudnn.benchmark = True  # already on (set before us): goes through the guard, turns it off


_NO_CUDAGRAPHS = {"reduce-overhead": "default", "max-autotune": "max-autotune-no-cudagraphs"}


def _compile_message(mode, fallback):
    return (
        'torch.compile(mode="%s") uses CUDA graphs, whose private memory pools need '
        "checkPoolLiveAllocations, which PyTorch does not offer to pluggable allocators; compiling with "
        'mode="%s" instead (same results, no CUDA graphs). To keep CUDA graphs, re-run in the '
        "PyTorch-allocator mode: gpumem run --allocator pytorch (or the setting gpuMemoryLens.allocator: "
        '"pytorch"). Set GPUMEM_STRICT_COMPILE=1 to fail instead.'
        % (mode, fallback)
    )


def _wrap_compile(original):
    @functools.wraps(original)
    def compile(*args, **kwargs):
        mode = kwargs.get("mode")
        options = kwargs.get("options")
        wants_graphs = mode in _NO_CUDAGRAPHS or (isinstance(options, dict) and options.get("triton.cudagraphs"))
        if wants_graphs:
            fallback = _NO_CUDAGRAPHS.get(mode, mode)
            if STATE.settings is not None and STATE.settings.strict_compile:
                raise RuntimeError(
                    'gpumem: torch.compile(mode="%s") cannot run under memory tracking: CUDA graphs need '
                    "checkPoolLiveAllocations, which PyTorch does not offer to pluggable allocators. "
                    'Use mode="%s", or run without GPU Memory Lens.' % (mode or "default", fallback or "default")
                )
            if mode in _NO_CUDAGRAPHS:
                kwargs["mode"] = fallback
                _once("compile:" + mode, _compile_message(mode, fallback))
            if isinstance(options, dict) and options.get("triton.cudagraphs"):
                kwargs["options"] = dict(options, **{"triton.cudagraphs": False})
                _once("compile:options", _compile_message('options={"triton.cudagraphs": True}', "default"))
        return original(*args, **kwargs)

    return compile


def _refuse_second_allocator(original):
    @functools.wraps(original)
    def change_current_allocator(allocator):
        # PyTorch would say "Can't swap an already initialized allocator", which hides the cause.
        raise RuntimeError(
            "gpumem: this workload installs its own CUDA allocator (torch.cuda.memory.change_current_allocator), "
            "but GPU Memory Lens has already installed the lens allocator to track memory, and PyTorch allows "
            "only one. Run this workload without memory tracking, or skip its allocator swap when the "
            "GPUMEM_SESSION_DIR environment variable is set."
        )

    return change_current_allocator


def apply(torch):
    memory = torch.cuda.memory
    if hasattr(memory, "change_current_allocator"):
        memory.change_current_allocator = _refuse_second_allocator(memory.change_current_allocator)
        if hasattr(torch.cuda, "change_current_allocator"):
            torch.cuda.change_current_allocator = memory.change_current_allocator
    backends = getattr(torch, "backends", None)
    if backends is not None and hasattr(backends, "cudnn"):
        _guard_cudnn(torch)
    if hasattr(torch, "compile"):
        torch.compile = _wrap_compile(torch.compile)
