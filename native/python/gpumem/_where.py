"""Naming the user's line that did something (for messages that must say WHERE)."""
import os
import sys

_OURS = os.path.dirname(os.path.abspath(__file__))


def _internal_dirs():
    dirs = [_OURS]
    torch = sys.modules.get("torch")
    torch_file = getattr(torch, "__file__", None)
    if torch_file:
        dirs.append(os.path.dirname(os.path.abspath(torch_file)))
    return dirs


def user_location(frame):
    """'file:line in func' of the innermost frame outside torch, gpumem and importlib; the innermost
    frame itself when every frame is internal."""
    internal = _internal_dirs()
    first = frame
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith("<frozen") and not any(
            filename == d or filename.startswith(d + os.sep) for d in internal
        ):
            return "%s:%d in %s" % (filename, frame.f_lineno, frame.f_code.co_name)
        frame = frame.f_back
    if first is None:
        return "an unknown place"
    return "%s:%d in %s" % (first.f_code.co_filename, first.f_lineno, first.f_code.co_name)


def warn(message):
    """One line on stderr, prefixed so users can tell it from their own output."""
    try:
        sys.stderr.write("gpumem: %s\n" % message)
        sys.stderr.flush()
    except Exception:
        pass
