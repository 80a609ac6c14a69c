#!/usr/bin/env python3
"""layers.py — the floors of the gpumem package (native/python/gpumem), and a check that its imports keep to them.

Note [Python floors]: every module of the package stands on one floor; a module imports only from its own floor or
the floors below, and no two modules import each other, directly or round a loop. An import is any `import gpumem.x`,
`from gpumem import x`, `from . import x` or `from .x import y`, at the top of a file or inside a function (a
function-level import is still a dependency; it only defers the cost). The floors, lowest first, are FLOORS below,
each with why it stands where it does.

The check also keeps files small: a module over 400 lines (SAY_LINES) is named, one over 450 (MAX_LINES) fails. 400
is the size we aim for (a file one can read through); 450 leaves room for a small fix to a file near 400 without
failing CI, so a split is decided when a file is written, not forced in the middle of another change.

  python3 native/python/tools/layers.py [PACKAGE_DIR]

Prints every module on its floor with its lines and what it imports, then one verdict line per check; exits 1 when
one fails. With GPUMEM_RESULTS set, also appends one line per check in the results format (Note [Results format] in
test/README.md). Standard library only: it runs wherever the package's tests run.
"""
import ast
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "allocator", "tools"))
from module_graph import cycles as strongly_connected  # noqa: E402

# (floor, why it stands there, its modules), lowest first. `gpumem` is the package's __init__.py (its public API).
FLOORS = [
    ("start-up", "what every tracked process loads before torch: settings, shared state, the native library's "
     "bindings, the capture format, the launch environment (the meter starts tracking in process with it)",
     ["_chain", "_format", "_hook", "_launch", "_mode", "_native", "_probe_off", "_session_folder", "_settings",
      "_state", "_where"]),
    ("capture", "recording into the capture: the observer of PyTorch's allocator and its parts, the lens "
     "allocator's shims and guards, the user's history view, the control client; needs start-up only",
     ["_backward_links", "_capture", "_control", "_guards", "_history", "_observer_api", "_observer_build", "_observer_figures",
      "_observer_history", "_observer_live", "_recorded_steps", "_shims", "_stats", "_summary"]),
    ("analyses", "what runs in the process over what is recorded: the leak keeper, tags, module paths, the "
     "capture read back by windows; they read the floors below and start nothing",
     ["_keeper", "_keeper_notice", "_keeper_search", "_keeper_site", "_modules", "_tags", "_window"]),
    ("hooks and starts", "the hooks on torch that drive the analyses (_markers: steps, phases, tags, modules) and "
     "what applies them: the lens install, the observer's start, the start-up at the first CUDA use, the bootstrap "
     "that arms it and the meter that starts it in process",
     ["_bootstrap", "_install", "_markers", "_meter", "_observe", "_startup"]),
    ("integrations", "the ways in from outside a launcher: the public API (gpumem), pytest, IPython, the notebook "
     "kernel; each enters through the meter or the hooks",
     ["gpumem", "_ipython", "_kernel", "_pytest"]),
    ("cli", "`python -m gpumem`: starts processes and builds, never runs inside a tracked one",
     ["__main__"]),
]
SAY_LINES = 400
MAX_LINES = 450


def module_name(filename):
    """gpumem/_x.py -> "_x"; gpumem/__init__.py -> the package's name."""
    return None if filename == "__init__.py" else filename[:-3]


def imports_of(path, package, modules):
    """The package's modules (`modules`: their names) that the file at `path` imports, anywhere in it. A name of the
    package's API (`from gpumem import step`) is an import of the package's __init__.py."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1 and node.module:  # from .x import y
                out.add(node.module.split(".")[0])
            elif node.level == 1:  # from . import x
                out.update(a.name if a.name in modules else package for a in node.names)
            elif node.level == 0 and node.module and node.module.split(".")[0] == package:
                parts = node.module.split(".")
                if len(parts) > 1:  # from gpumem.x import y
                    out.add(parts[1])
                else:  # from gpumem import x: a module, or a name of the package's API
                    out.update(a.name if a.name in modules else package for a in node.names)
        elif isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                if parts[0] == package:
                    out.add(parts[1] if len(parts) > 1 else package)
    return out


def read_package(pkg):
    """{module: (lines, the package's modules it imports)} for every .py file directly in `pkg`."""
    package = os.path.basename(os.path.normpath(pkg))
    files = sorted(f for f in os.listdir(pkg) if f.endswith(".py"))
    names = {module_name(f) or package for f in files}
    out = {}
    for f in files:
        path = os.path.join(pkg, f)
        with open(path, encoding="utf-8") as fh:
            lines = sum(1 for _ in fh)
        me = module_name(f) or package
        out[me] = (lines, {d for d in imports_of(path, package, names) if d in names and d != me})
    return out


def cycles(edges):
    """Strongly connected components of more than one module, each sorted; sorted. The allocator's module graph
    check finds them (Tarjan); one copy of it serves both houses' checks."""
    return sorted(strongly_connected(edges, edges))


def check(pkg, floors=FLOORS, max_lines=MAX_LINES):
    """The findings on the package folder `pkg`, as lists (empty: that check passes)."""
    modules = read_package(pkg)
    floor_of = {m: i for i, (_, _, ms) in enumerate(floors) for m in ms}
    upward = []
    for m, (_, deps) in sorted(modules.items()):
        for d in sorted(deps):
            if m in floor_of and d in floor_of and floor_of[d] > floor_of[m]:
                upward.append("%s (%s) imports %s (%s)" % (m, floors[floor_of[m]][0], d, floors[floor_of[d]][0]))
    return {
        "modules": modules,
        "cycles": cycles({m: deps for m, (_, deps) in modules.items()}),
        "upward": upward,
        "unplaced": ["not on a floor: " + m for m in sorted(modules) if m not in floor_of]
                    + ["on a floor but no such file: " + m for m in sorted(floor_of) if m not in modules],
        "large": sorted((m, n) for m, (n, _) in modules.items() if n > SAY_LINES),
        "too_large": ["%s: %d lines" % (m, n) for m, (n, _) in sorted(modules.items()) if n > max_lines],
    }


def verdicts(found):
    """(check name, passed, message) for each check, in the order they are printed."""
    return [
        ("no import cycle", not found["cycles"], "; ".join("cycle: " + " <-> ".join(c) for c in found["cycles"])),
        ("imports go down the floors", not found["upward"], "; ".join(found["upward"])),
        ("every module on one floor", not found["unplaced"], "; ".join(found["unplaced"])),
        ("no file over %d lines" % MAX_LINES, not found["too_large"], "; ".join(found["too_large"])),
    ]


def emit(name, ok, message, ms):
    """One line of the results format, when GPUMEM_RESULTS is set (one write, O_APPEND)."""
    path = os.environ.get("GPUMEM_RESULTS")
    if not path:
        return
    line = {"layer": os.environ.get("GPUMEM_RESULTS_LAYER") or "unknown", "name": "python-layers/" + name,
            "status": "pass" if ok else "fail", "ms": round(ms, 3)}
    if not ok:
        line["message"] = message[:2000]
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(line) + "\n").encode())
    finally:
        os.close(fd)


def main(argv):
    pkg = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "gpumem")
    t0 = time.perf_counter()
    found = check(pkg)
    ms = (time.perf_counter() - t0) * 1000
    for name, why, members in FLOORS:
        print("%s: %s" % (name, why))
        for m in members:
            if m in found["modules"]:
                lines, deps = found["modules"][m]
                print("  %-20s %4d lines -> %s" % (m, lines, ", ".join(sorted(deps)) or "(nothing)"))
    for m, n in found["large"]:
        print("note: %s has %d lines, over %d" % (m, n, SAY_LINES))
    failed = 0
    for name, ok, message in verdicts(found):
        print("%s %s%s" % ("ok  " if ok else "FAIL", name, "" if ok else ": " + message))
        emit(name, ok, message, ms)
        failed += not ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
