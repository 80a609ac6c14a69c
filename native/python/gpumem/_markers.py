"""record_function ranges become capture markers; backward()/grad() are bracketed so allocations on
autograd threads are attributed to the thread (and line) that called them (DESIGN §3).

Step facts (MARK_STEP, Note [Steps] in src/core/steps/detect.ts): every backward() end writes "backward" and
every Optimizer.step() end writes "optimizer.step" (a global post hook, no per-optimizer code). The reader
decides which of them end a training step; the workload only states facts, one C call each."""
import functools

from . import _native
from ._state import STATE


def _mark(name, kind):
    if STATE.configured:
        STATE.native.mark(name, kind)


def _patch_record_function(cls):
    if getattr(cls, "_gpumem_patched", False):
        return
    enter, exit_ = cls.__enter__, cls.__exit__

    def __enter__(self):
        result = enter(self)
        _mark(getattr(self, "name", "record_function"), _native.MARK_BEGIN)
        return result

    def __exit__(self, *exc):
        _mark(getattr(self, "name", "record_function"), _native.MARK_END)
        return exit_(self, *exc)

    cls.__enter__, cls.__exit__ = functools.wraps(enter)(__enter__), functools.wraps(exit_)(__exit__)
    cls._gpumem_patched = True


def _bracket(original):
    @functools.wraps(original)
    def run(*args, **kwargs):
        native = STATE.native if STATE.configured else None
        if native is None:
            return original(*args, **kwargs)
        # The allocator records this thread's stack at backward_begin for autograd-thread allocations;
        # calling the C function from here keeps the bootstrap to a single frame on that stack.
        native.lib.gpumem_backward_begin()
        try:
            result = original(*args, **kwargs)
        finally:
            native.lib.gpumem_backward_end()
        native.mark("backward", _native.MARK_STEP)
        return result

    return run


def apply(torch):
    # torch.profiler.record_function is torch.autograd.profiler.record_function; patch each class once.
    for owner in ("autograd.profiler", "profiler", "cuda.memory"):
        module = torch
        for part in owner.split("."):
            module = getattr(module, part, None)
        cls = getattr(module, "record_function", None) if module is not None else None
        if isinstance(cls, type):
            _patch_record_function(cls)
    autograd = torch.autograd
    # Tensor.backward() calls torch.autograd.backward by attribute at call time: one patch covers both.
    autograd.backward = _bracket(autograd.backward)
    if hasattr(autograd, "grad"):
        autograd.grad = _bracket(autograd.grad)
    _hook_optimizer_steps(torch)


def _on_optimizer_step(optimizer, args, kwargs):
    _mark("optimizer.step", _native.MARK_STEP)


def _hook_optimizer_steps(torch):
    # torch.optim.optimizer is a module that `import torch` loads but does not bind as an attribute in 2.11.
    import importlib

    try:
        module = importlib.import_module("torch.optim.optimizer")
    except ImportError:
        return
    register = getattr(module, "register_optimizer_step_post_hook", None)
    if callable(register) and not getattr(module, "_gpumem_step_hook", False):
        register(_on_optimizer_step)
        module._gpumem_step_hook = True
