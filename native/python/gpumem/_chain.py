"""Chaining: our sitecustomize shadows any other one later on sys.path; find it and run it."""
import importlib.machinery
import importlib.util
import os
import sys
import traceback


def _same_dir(a, b):
    try:
        return os.path.samefile(a or ".", b)
    except OSError:
        return False


def find_next_sitecustomize(this_dir, path=None):
    """The spec of the first `sitecustomize` on `path` (default sys.path) after our own folder."""
    entries = list(sys.path if path is None else path)
    after = []
    seen_ours = False
    for entry in entries:
        if not seen_ours:
            seen_ours = _same_dir(entry, this_dir)
            continue
        if not _same_dir(entry, this_dir):
            after.append(entry)
    if not seen_ours:
        after = [e for e in entries if not _same_dir(e, this_dir)]
    return importlib.machinery.PathFinder.find_spec("sitecustomize", after)


def run_next_sitecustomize(this_dir):
    spec = find_next_sitecustomize(this_dir)
    if spec is None or spec.loader is None:
        return None
    # A separate module object named "sitecustomize" (as the shadowed file expects), kept reachable
    # under another key so its globals stay alive; sys.modules["sitecustomize"] remains ours.
    module = importlib.util.module_from_spec(spec)
    sys.modules["_gpumem_chained_sitecustomize"] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        # Same behaviour as site.py for a failing sitecustomize: report and continue.
        if sys.flags.verbose:
            traceback.print_exc()
        sys.stderr.write(
            "Error in sitecustomize (%s); set PYTHONVERBOSE for traceback:\n%s: %s\n"
            % (spec.origin, type(exc).__name__, exc)
        )
    return module
