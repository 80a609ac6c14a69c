"""record_function ranges become capture markers; backward()/grad() are bracketed so allocations on
autograd threads are attributed to the thread (and line) that called them (DESIGN §3).

Step facts (MARK_STEP, Note [Steps] in src/core/analyses/steps/detect.ts): every backward() end writes "backward" and
every Optimizer.step() end writes "optimizer.step" (a global post hook, no per-optimizer code). The reader
decides which of them end a training step; the workload only states facts, one C call each.

Categories (Note [Categories] in native/addon/src/categories.cpp): a MARK_PHASE "backward" before each
backward() and "optimizer" before each Optimizer.step() begin the phases the step facts end, and at each step
end the optimizer's parameters, gradients and state are tagged by data pointer (_tags.TagWalk). Module paths
of activations: the allocator writes MARK_MODULE_* marks from the frames it walks, with the paths _modules.py
gives it (Note [Module paths]; GPUMEM_MODULE_PATHS=0 turns them off).

Leak keepers (Note [Leak keeper search] in _keeper.py): each step end also feeds the keeper watch, which names
the container that keeps tensors with autograd graphs alive when allocated memory keeps growing."""
import ctypes
import functools

from . import _keeper, _native
from ._settings import module_paths_wanted, tags_wanted
from ._state import STATE
from ._tags import TagWalk, weight_items


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
        native.mark("backward", _native.MARK_PHASE)
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
    global _walking
    if STATE.observer_source == "stats":
        # Figures only (Note [Figures only] in _observe.py; also cudaMallocAsync): no allocation is recorded, so no
        # tag or module mark could name one; the step facts and phases stay (a C call each).
        _walking = False
    autograd = torch.autograd
    # Tensor.backward() calls torch.autograd.backward by attribute at call time: one patch covers both.
    autograd.backward = _bracket(autograd.backward)
    if hasattr(autograd, "grad"):
        autograd.grad = _bracket(autograd.grad)
    _hook_optimizer_steps(torch)
    _hook_modules(torch)


def _hook_modules(torch):
    """Module paths from the frames the allocator walks (Note [Module paths]); no hook in the user's forward."""
    if not module_paths_wanted() or STATE.observer_source == "stats":
        return
    from . import _modules

    if getattr(torch, "_gpumem_module_paths", False) or STATE.native is None:
        return
    torch._gpumem_module_paths = True
    if STATE.settings is not None and not STATE.settings.stacks:
        return  # module paths come with the stacks (--no-stacks: classes from forward frames, as before)
    if _modules.install(torch, STATE.native.lib, _tag_weights if _walking else None) is False:
        text = ("gpumem: activations are grouped by module class, not module path: this Python's frames cannot be "
                "read without the GIL (Note [Module paths])")
        if STATE.configured:
            STATE.native.notice(text, _native.NOTICE_INFO)
        else:
            STATE.pending_notices.append((text, _native.NOTICE_INFO))


def _tag_many(items):
    """items: addr, nbytes, category, device, … (Note [Batched tags] in _tags.py)."""
    STATE.native.lib.gpumem_tags((ctypes.c_uint64 * len(items))(*items), len(items) // 4)


def _tag_weights(module):
    """Note [Weights from the first forward] in _tags.py; never an error in the workload."""
    try:
        items = weight_items(module)
        if items:
            _tag_many(items)
    except Exception:
        pass


_WALK = TagWalk(_tag_many)
# False with GPUMEM_TAGS=0 (Note [Not recorded]: the phases and step facts stay, a C call each) or once a walk failed
_walking = tags_wanted()


def _on_optimizer_step_begin(optimizer, args, kwargs):
    _mark("optimizer", _native.MARK_PHASE)


def _on_optimizer_step(optimizer, args, kwargs):
    global _walking
    if STATE.configured and _walking:
        try:
            _WALK.walk(optimizer)
        except Exception as e:  # an optimizer we do not understand must never stop training
            _walking = False
            STATE.native.notice("gpumem: parameters, gradients and optimizer state are not categorised "
                                "(walking %s failed: %s: %s)" % (type(optimizer).__name__, type(e).__name__, e))
    _mark("optimizer.step", _native.MARK_STEP)
    if STATE.configured:
        _keeper.step_end("optimizer")  # Note [Leak keeper search]: one requested-bytes read per step end
        count_recorded_step("optimizer")


_steps = 0  # step ends so far (Note [Recorded steps])
_user_steps = False  # gpumem.step() was called: only its marks count from then on (Note [Steps])


def count_recorded_step(source):
    """Note [Recorded steps] in _recorded_steps.py: after the N-th step end, nothing is recorded per allocation. The steps
    are Optimizer.step() ends, or the user's gpumem.step() marks once there is one, as Note [Steps] counts them
    (so an inference loop marked with gpumem.step() stops too)."""
    global _steps, _walking, _user_steps
    n = STATE.settings.record_steps if STATE.settings is not None else 0
    if not n or _steps > n:
        return
    if source == "user" and not _user_steps:
        _user_steps, _steps = True, 0  # the user's marks are the steps from now on
    elif source != "user" and _user_steps:
        return
    _steps += 1
    if _steps == n:
        from . import _recorded_steps

        # The marker it writes is what users see (the reader shows it as a notice with this name): no notice here.
        if _recorded_steps.events_off("recordSteps %d" % n):
            _walking = False  # tags name recorded allocations only
        elif STATE.observer_source == "history":  # PyTorch's history drained: a source that cannot stop (_recorded_steps.py)
            STATE.native.notice("gpumem: recordSteps %d has no effect here: allocations come from PyTorch's memory "
                                "history (the observer could not be built), recorded at every step" % n,
                                _native.NOTICE_WARNING)


def _hook_optimizer_steps(torch):
    # torch.optim.optimizer is a module that `import torch` loads but does not bind as an attribute in 2.11.
    import importlib

    try:
        module = importlib.import_module("torch.optim.optimizer")
    except ImportError:
        return
    register = getattr(module, "register_optimizer_step_post_hook", None)
    register_pre = getattr(module, "register_optimizer_step_pre_hook", None)
    if callable(register) and not getattr(module, "_gpumem_step_hook", False):
        if callable(register_pre):
            register_pre(_on_optimizer_step_begin)
        register(_on_optimizer_step)
        module._gpumem_step_hook = True
