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


def _is_python_version_dir(name):
    """'python3', 'python3.12', 'python3.13t': a standard-library directory name."""
    if not name.startswith("python"):
        return False
    v = name[6:]
    if v.endswith("t"):
        v = v[:-1]
    major, dot, minor = v.partition(".")
    return major.isdigit() and major.isascii() and (not dot or (minor.isdigit() and minor.isascii()))


def is_user_file(path, internal_dirs=()):
    """Note [User frames] (native/format/README.md): the one rule, also the reader's (model.cpp is_user_path);
    both pass native/format/user_frames_cases.json. A frame is the user's code unless its file name is empty
    or a pseudo-file ('<string>', '<frozen runpy>'), or a directory of its path is site-packages or
    dist-packages, or lib/pythonX[.Y][t] (or lib64/...: the standard library), or torchinductor_* (the code
    torch.compile generates), or it lies in one of internal_dirs (the tool's own). Backslashes count as slashes."""
    if not path or path.startswith("<"):
        return False
    p = path.replace("\\", "/")
    for d in internal_dirs:
        d = d.replace("\\", "/")
        while len(d) > 1 and d.endswith("/"):
            d = d[:-1]
        if d and len(p) > len(d) and p.startswith(d) and p[len(d)] == "/":
            return False
    dirs = p.split("/")[:-1]  # the last component is the file itself
    for i, d in enumerate(dirs):
        if d in ("site-packages", "dist-packages") or d.startswith("torchinductor_"):
            return False
        if i > 0 and dirs[i - 1] in ("lib", "lib64") and _is_python_version_dir(d):
            return False
    return True


def user_location(frame):
    """'file:line in func' of the innermost frame in the user's code (is_user_file, with gpumem and torch as
    the tool's own directories); the innermost frame itself when no frame is the user's."""
    internal = _internal_dirs()
    first = frame
    while frame is not None:
        filename = frame.f_code.co_filename
        if is_user_file(filename, internal):
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
