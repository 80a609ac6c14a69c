"""Entry point from sitecustomize: arm the import hooks; everything else happens when torch loads."""
from . import _settings
from ._hook import PostImportHook
from ._state import STATE
from ._where import warn

HOOK = PostImportHook()


def _guarded(fn):
    def run(module):
        try:
            fn(module)
        except Exception as exc:  # never break `import torch`
            warn("memory tracking is off: %s: %s" % (type(exc).__name__, exc))
    return run


def arm():
    try:
        STATE.settings = _settings.Settings()
    except _settings.SettingsError as exc:
        warn("memory tracking is off: %s" % exc)
        return
    from . import _startup

    # torch.cuda first (it is imported inside torch/__init__): from then on we can name the line
    # that initialises CUDA, even if that happens before torch finishes importing (Note [Start-up]).
    HOOK.watch("torch.cuda", _guarded(_startup.on_torch_cuda))
    # If torch was imported before us (a .pth file), watch() arms at once and the lens mode reports
    # when that is too late.
    HOOK.watch("torch", _guarded(_startup.on_torch))
