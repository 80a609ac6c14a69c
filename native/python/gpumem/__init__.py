"""GPU Memory Lens helpers for user code. Importing this never imports torch.

    import gpumem
    gpumem.mark("epoch 1")            # an instant marker in the capture
    gpumem.step()                     # this training step ends here (overrides automatic step detection)
    with gpumem.range("validation"):  # a begin/end range
        ...

Outside a tracked run (or before CUDA is used) these do nothing and return False.

Also `pytest -p gpumem` (GPU memory budgets per test) and `%load_ext gpumem` (per-cell figures in IPython).
PYTEST_DONT_REWRITE: sitecustomize imports this package before pytest can rewrite it; nothing here asserts.
"""
import contextlib

from ._state import STATE as _STATE

__all__ = ["mark", "step", "range", "active"]
__version__ = "0.1.0"

# `pytest -p gpumem` registers this module as a plugin; pytest then imports the plugin itself (Note [pytest budgets]
# in _pytest.py). A plain `import gpumem` never imports pytest.
pytest_plugins = ["gpumem._pytest"]


def load_ipython_extension(ipython):
    """`%load_ext gpumem`: per-cell GPU memory figures and the %%gpumem cell magic (_ipython.py)."""
    from . import _ipython

    _ipython.load(ipython)


def unload_ipython_extension(ipython):
    from . import _ipython

    _ipython.unload(ipython)


def active():
    """True when this process records a capture."""
    return _STATE.configured


def mark(name):
    """Record an instant marker (step boundary, phase) at this moment in the capture."""
    if not _STATE.configured:
        return False
    from . import _native

    return _STATE.native.mark(str(name), _native.MARK_INSTANT)


def step(name="step"):
    """Mark the end of a training step. Once a run calls this, its steps are exactly these marks; otherwise
    the tool finds steps from Optimizer.step() and backward() ends (Note [Steps])."""
    if not _STATE.configured:
        return False
    from . import _keeper, _markers, _native

    ok = _STATE.native.mark(str(name), _native.MARK_STEP)
    _keeper.step_end("user")
    _markers.count_recorded_step("user")  # Note [Recorded steps]: the user's steps, once there is one
    return ok


@contextlib.contextmanager
def range(name):  # noqa: A001 - mirrors record_function's vocabulary
    """Record a begin/end marker pair around a block."""
    from . import _native

    on = _STATE.configured
    if on:
        _STATE.native.mark(str(name), _native.MARK_BEGIN)
    try:
        yield
    finally:
        if on:
            _STATE.native.mark(str(name), _native.MARK_END)
