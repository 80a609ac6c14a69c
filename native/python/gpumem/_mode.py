"""Which allocator tracks the run: `lens` (ours, swapped in) or `pytorch` (PyTorch's own, observed).

Note [Choosing the mode]: `auto` (the default) keeps the run as it is natively: it takes the
PyTorch-allocator mode (PyTorch's own caching allocator, observed, every line attributed as under the
lens: Note [Observer stacks] in native/allocator/src/observer.h) whenever the observer can run here,
i.e. its small extension is already built for this torch or can be built (a C++ compiler, ninja and
Python's headers; _observer_build.availability). Where it cannot, the lens allocator records every line at a
lower cost than PyTorch's history (the observer's fallback), unless the run needs PyTorch's allocator:
then it stays, observed through that history. The lens allocator would change the run when the entry
script or one of its LOCAL modules (imports that resolve to files next to the script or under the user
roots, followed statically; nothing is executed)
- turns on `cudnn.benchmark` (cuDNN's workspace sizing needs `cacheInfo`, which no pluggable allocator
  has: the lens keeps benchmark off);
- compiles with `mode="reduce-overhead"` or `"max-autotune"` (CUDA-graph trees need pool checkpoints;
  `max-autotune-no-cudagraphs` does not, and stays on the lens);
- captures CUDA graphs itself (`torch.cuda.graph`, `CUDAGraph`, `make_graphed_callables`);
- uses `torch.multiprocessing` (sharing CUDA tensors needs PyTorch's IPC handles);
- sets PYTORCH_CUDA_ALLOC_CONF / PYTORCH_ALLOC_CONF itself, or calls `_set_allocator_settings`;
- uses a private pool (`torch.cuda.MemPool`, `use_mem_pool`), annotates live allocations
  (`_annotate_memory`, `_annotate_tensor`: newer than PyTorch 2.11) or attaches an out-of-memory observer
  (`_cuda_attach_out_of_memory_observer`): PyTorch offers none of them to a pluggable allocator;
or when the environment's PYTORCH_CUDA_ALLOC_CONF (or PYTORCH_ALLOC_CONF) names any setting: a backend
(`backend:cudaMallocAsync`), `expandable_segments`, `max_split_size_mb`, … The lens allocator honours
none of them, and the user chose them on purpose; their run keeps its allocator.
Note [Labels and the mode]: labelling memory (`_set_memory_metadata`) made `auto` keep PyTorch's allocator until
the lens kept labels. Now both modes write them into the capture (REC_USER_METADATA, Note [User
metadata] in native/format/gpumem_format.h): the lens through its shim (Note [Memory labels under the lens] in
_shims.py, which also gives our _snapshot() the trace entries' user_metadata and _get_memory_metadata() the
thread's label), the PyTorch-allocator mode from the trace entries PyTorch stamps. So a label is no reason to keep
PyTorch's allocator, and the scan no longer counts it. Decided so because the only runs it changes are those where
the observer cannot be built (everywhere else `auto` takes PyTorch's allocator anyway): there the choice is the lens
against PyTorch's history (5–10 % slower, Note [Observing PyTorch's allocator] in native/python/README.md), and
labels come out the same in both, on the same allocations (the label is the allocating thread's in both; the lens
drops it only on segment events, which have no thread). Still counted: post-facto annotations of one live
allocation (`_annotate_memory`), which only PyTorch's allocator records.
The analysis reads Python's own syntax tree, so comments, strings and docstrings never trigger it;
`cudnn.benchmark = False` does not either. The first reason found (file:line) is the one reported: it
says why the run must keep PyTorch's allocator even where the observer cannot be built.
"""
import ast
import os
import sys

from ._settings import table_value

MODES = ("auto", "lens", "pytorch")
ALLOC_CONF_VARS = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")
GRAPH_COMPILE_MODES = ("reduce-overhead", "max-autotune")
MAX_FILES = 300  # local modules followed at most (a safety bound; real projects stay far below)


class Choice:
    __slots__ = ("mode", "reason", "where")

    def __init__(self, mode, reason, where=None):
        self.mode, self.reason, self.where = mode, reason, where

    def line(self):
        """The one line the run prints."""
        if self.mode == "pytorch":
            return "gpumem: allocator mode pytorch (PyTorch's own allocator, observed): %s%s" % (
                self.reason, " at %s" % self.where if self.where else "")
        return "gpumem: allocator mode lens (the lens allocator): %s%s" % (self.reason, " at %s" % self.where if self.where else "")

    def __repr__(self):
        return "Choice(%r, %r, %r)" % (self.mode, self.reason, self.where)


KEEPS = "keeps the run as it is natively (PyTorch's own allocator, observed)"


def decide(requested, entry, env=None, roots=None, observer=None):
    """The mode for a run. `requested`: auto|lens|pytorch; `entry`: the entry script's path (or None);
    `roots`: folders whose modules are local (the script's folder is always one); `observer`: (can the
    observer of PyTorch's allocator run here, why not), from _observer_build.availability; None = it can."""
    env = os.environ if env is None else env
    if requested not in MODES:
        raise ValueError("allocator mode must be one of auto, lens, pytorch; got %r" % (requested,))
    if requested == "lens":
        return Choice("lens", "asked for (--allocator lens / gpuMemoryLens.allocator)")
    if requested == "pytorch":
        return Choice("pytorch", "asked for (--allocator pytorch / gpuMemoryLens.allocator)")
    if not table_value("events", env):  # Note [Figures only] in _observe.py: only PyTorch's allocator has them
        return Choice("pytorch", "figures only (--figures-only / gpuMemoryLens.recordAllocations): PyTorch's own "
                      "allocator has them without recording each allocation")
    if table_value("record_steps", env):  # Note [Recorded steps] in _recorded_steps.py: only PyTorch's allocator stops
        return Choice("pytorch", "allocations recorded for the first steps only (--record-steps / "
                      "gpuMemoryLens.recordSteps): PyTorch's own allocator keeps the figures after them")
    for var in ALLOC_CONF_VARS:
        conf = env.get(var, "").strip()
        if conf:
            return Choice("pytorch", "the environment sets %s=%s, which only PyTorch's allocator honours" % (var, conf))
    if entry:
        found = scan(entry, roots or [])
        if found:
            return Choice("pytorch", found[1], found[0])
    available, why = observer if observer is not None else (True, None)
    if available:
        return Choice("pytorch", KEEPS)
    return Choice("lens", "%s; nothing in %s or its local modules needs PyTorch's allocator" % (
        why, os.path.basename(entry) if entry else "the command"))


def entry_script(argv, cwd=None):
    """The user's entry script from a process's argv: the script itself, `-m mod` resolved under cwd, or
    the first .py argument of a launcher (torchrun train.py)."""
    cwd = cwd or os.getcwd()
    if not argv:
        return None
    first = argv[0]
    if first.endswith(".py") and os.path.isfile(first) and "site-packages" not in first:
        return os.path.abspath(first)
    for i, a in enumerate(argv):
        if a == "-m" and i + 1 < len(argv):
            path = _module_file(argv[i + 1], [cwd])
            if path:
                return path
        if a.endswith(".py") and os.path.isfile(a) and "site-packages" not in a:
            return os.path.abspath(a)
    return None


def scan(entry, roots):
    """(file:line, reason) of the first feature that needs PyTorch's allocator, or None."""
    entry = os.path.abspath(entry)
    search = [os.path.dirname(entry)] + [os.path.abspath(r) for r in roots]
    seen, queue = set(), [entry]
    while queue and len(seen) < MAX_FILES:
        path = queue.pop(0)
        if path in seen:
            continue
        seen.add(path)
        try:
            with open(path, "rb") as f:
                tree = ast.parse(f.read(), filename=path)
        except (OSError, SyntaxError, ValueError):
            continue
        found, imports = _visit(tree)
        if found:
            line, reason = found
            return "%s:%d" % (_show(path, roots), line), reason
        here = os.path.dirname(path)
        for name, level in imports:
            base = here if level else None
            if level > 1:
                for _ in range(level - 1):
                    base = os.path.dirname(base)
            target = _module_file(name, [base] if level else search)
            if target and target not in seen:
                queue.append(target)
    return None


def _show(path, roots):
    for r in roots:
        r = os.path.abspath(r)
        if path.startswith(r + os.sep):
            return os.path.relpath(path, r)
    return path


def _module_file(name, bases):
    parts = [p for p in (name or "").split(".") if p]
    for base in bases:
        if not base:
            continue
        p = os.path.join(base, *parts) if parts else base
        for cand in (p + ".py", os.path.join(p, "__init__.py")):
            if os.path.isfile(cand):
                return os.path.abspath(cand)
    return None


def _dotted(node):
    """'torch.backends.cudnn.benchmark' for an Attribute/Name chain, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _truthy(node):
    """Could this value turn a switch on? Only literal False/0/None are certainly off."""
    if isinstance(node, ast.Constant):
        return bool(node.value)
    return True


def _str(node):
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _visit(tree):
    """((line, reason) of the first trigger or None, [(module, level) imported])."""
    hits, imports = [], []

    def hit(node, reason):
        hits.append((getattr(node, "lineno", 0), reason))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                imports.append((a.name, 0))
                if a.name == "torch.multiprocessing" or a.name.startswith("torch.multiprocessing."):
                    hit(node, "uses torch.multiprocessing (CUDA tensors shared between processes need PyTorch's IPC)")
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            imports.append((mod, node.level))
            for a in node.names:  # `from pkg import mod` may name a submodule
                if a.name != "*":
                    imports.append(((mod + "." if mod else "") + a.name, node.level))
            if node.level == 0 and (mod == "torch.multiprocessing" or (mod == "torch" and any(a.name == "multiprocessing" for a in node.names))):
                hit(node, "uses torch.multiprocessing (CUDA tensors shared between processes need PyTorch's IPC)")
            if node.level == 0 and any(a.name in ("make_graphed_callables", "CUDAGraph", "graph") for a in node.names) and mod in ("torch.cuda", "torch.cuda.graphs"):
                hit(node, "captures CUDA graphs (imports %s from %s)" % (
                    ", ".join(a.name for a in node.names if a.name in ("make_graphed_callables", "CUDAGraph", "graph")), mod))
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            value = node.value
            for t in targets:
                name = _dotted(t)
                if name and (name == "cudnn.benchmark" or name.endswith(".cudnn.benchmark")) and value is not None and _truthy(value):
                    hit(node, "turns on cudnn.benchmark (cuDNN sizes its workspaces through PyTorch's allocator)")
                if isinstance(t, ast.Subscript) and _dotted(t.value) in ("os.environ", "environ") and _str(t.slice) in ALLOC_CONF_VARS:
                    hit(node, "sets %s itself (only PyTorch's allocator honours it)" % _str(t.slice))
        elif isinstance(node, ast.Call):
            fn = _dotted(node.func) or ""
            last = fn.rsplit(".", 1)[-1]
            if last == "compile":
                for kw in node.keywords:
                    if kw.arg == "mode" and _str(kw.value) in GRAPH_COMPILE_MODES:
                        hit(node, 'compiles with mode="%s" (CUDA-graph trees need PyTorch\'s allocator)' % _str(kw.value))
                    if kw.arg == "options" and isinstance(kw.value, ast.Dict):
                        for k, v in zip(kw.value.keys, kw.value.values):
                            if k is not None and _str(k) == "triton.cudagraphs" and _truthy(v):
                                hit(node, "compiles with triton.cudagraphs (CUDA-graph trees need PyTorch's allocator)")
            elif last in ("CUDAGraph", "make_graphed_callables") or fn in ("torch.cuda.graph", "cuda.graph"):
                hit(node, "captures CUDA graphs (%s)" % fn)
            elif last in ("setdefault", "putenv", "update") and node.args and _str(node.args[0]) in ALLOC_CONF_VARS:
                hit(node, "sets %s itself (only PyTorch's allocator honours it)" % _str(node.args[0]))
            elif last == "_set_allocator_settings":
                hit(node, "changes PyTorch's allocator settings (%s)" % fn)
            elif last in ("MemPool", "use_mem_pool"):
                hit(node, "uses a private memory pool (%s; PyTorch offers pools to its own allocator only)" % fn)
            elif last in ("_annotate_memory", "_annotate_tensor"):
                hit(node, "annotates live allocations with %s (only PyTorch's allocator records them)" % fn)
            elif last == "_cuda_attach_out_of_memory_observer":
                hit(node, "attaches an out-of-memory observer (only PyTorch's allocator calls it)")
        elif isinstance(node, ast.Attribute):
            fn = _dotted(node) or ""
            if fn == "torch.multiprocessing" or fn.startswith("torch.multiprocessing."):
                hit(node, "uses torch.multiprocessing (CUDA tensors shared between processes need PyTorch's IPC)")
    return (min(hits) if hits else None), imports


def main(argv=None):
    """`python3 -m gpumem._mode [--allocator auto|lens|pytorch] script.py`: prints the line (for tools)."""
    import argparse
    import json

    ap = argparse.ArgumentParser(prog="python3 -m gpumem._mode")
    ap.add_argument("--allocator", default="auto", choices=MODES)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("script", nargs="?")
    a = ap.parse_args(argv)
    c = decide(a.allocator, a.script, roots=[os.getcwd()])
    print(json.dumps({"mode": c.mode, "reason": c.reason, "where": c.where}) if a.json else c.line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
