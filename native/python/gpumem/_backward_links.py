"""Note [Backward on the forward line] (native/allocator/src/backward_links.h): connects the observer extension, which
puts each allocation made while an autograd node runs on the forward line whose op made the node (one RecordFunction
callback at op ends while a step is learned, Note [Learned steps]). Both modes: the PyTorch-allocator mode imports that extension, the lens loads it as its OOM glue. Without
the extension (not built yet, or PyTorch's history as the source) backward's allocations stay on the backward()
line, as the setting's description says."""
import ctypes

from ._state import STATE
from ._where import warn

_ON = {"lib": None}


def turn_on(extension_path):
    """Links on, through the built extension at `extension_path`; None when on, else why not (one line)."""
    if not getattr(STATE.settings, "backward_links", True):
        return "backward stays on the backward() line (GPUMEM_BACKWARD_LINKS=0)"
    if _ON["lib"] is not None:
        return None
    try:
        lib = ctypes.CDLL(extension_path)
        on = lib.gpumem_links_on
    except (OSError, AttributeError, TypeError) as exc:
        return "the observer extension cannot link backward to forward (%s)" % exc
    on.argtypes = [ctypes.c_void_p] * 2
    on.restype = ctypes.c_int
    names = ("gpumem_links_connect", "gpumem_op_end")
    fns = [STATE.native.symbol_address(n) for n in names]
    if None in fns:  # an older allocator library beside a newer bootstrap
        return "the allocator library cannot link backward to forward (no gpumem_links_connect)"
    rc = on(*fns)
    if rc != 0:
        return "PyTorch refused the RecordFunction callback that links backward to forward"
    _ON["lib"] = lib
    return None


def start(extension_path):
    """turn_on() where the mode has its extension, as a nicety of the mode, never its failure: whatever goes wrong
    leaves backward's allocations on the backward() line, said in one line. No path (a stand-in tracker): nothing."""
    if not extension_path:
        return
    try:
        why = turn_on(extension_path)
    except Exception as exc:
        why = "%s: %s" % (type(exc).__name__, exc)
    if why and STATE.settings.backward_links:
        warn("backward stays on the backward() line: " + why)


def turn_off():
    """Links off (Note [Recorded steps]: nothing is recorded per allocation any more)."""
    lib, _ON["lib"] = _ON["lib"], None
    if lib is not None:
        lib.gpumem_links_off()
