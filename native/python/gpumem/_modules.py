"""Module paths for activations (issue 17): global module forward hooks write a MARK_MODULE_BEGIN/END pair,
named by the module's path, around every module forward on the main thread.

Note [Module paths]: the reader gives each activation the innermost module whose forward was running when it was
allocated (native/addon/src/categories.cpp), so "activations of transformer.h.3.mlp" needs only the begin and
end of each forward, in order with the allocations: two C calls per module call, nothing per allocation.
- A path is the module's name under the root module that was called with no other module running (its
  named_modules()), the root itself by its class name ("GPT2LMHeadModel"). Each path is computed once per
  module object (a weak reference checks the id was not reused) and kept as bytes for the C call. A module
  that is not a registered child of the running one is named under it by its attribute name or class name.
- torch.compile: `_orig_mod` is dropped from paths (a compiled model and its original have the same paths).
  Inside a compiled region the hooks return at once when Dynamo traces them (torch.compiler.is_compiling()),
  so they add no graph breaks; the compiled region runs no hooks, and its activations count under the
  compiled module: coarser, and the UI says so.
- Only the thread that installed the hooks writes marks (the begins and ends of one thread nest; forwards on
  other threads, e.g. nn.DataParallel replicas, keep the coarser class names by stack frame).
- The forward hook is registered with always_call=True where PyTorch has it, so a forward that raises still
  ends; the reader also closes inner begins left open when an outer end arrives.
- Capture size: one marker record (16 bytes and its header) per begin and end (the path is an interned string), ≈ 8 KiB per
  GPT-2 step, against ≈ 100 KiB of allocation events per step.
- Cost, measured by test/gpu/probes/categories_cost.py ("module-hooks+ctypes"): about ×1.02 per step on GPT-2
  and ResNet-50 (≈ 2 × 160 hook calls per step); GPUMEM_MODULE_PATHS=0 turns it off (activations then fall
  back to module classes from forward frames).
"""
import threading
import weakref

MARK_MODULE_BEGIN, MARK_MODULE_END = 6, 7


def _clean(name):
    return ".".join(part for part in name.split(".") if part != "_orig_mod")


def _root_label(module):
    return type(getattr(module, "_orig_mod", module)).__name__


class ModulePaths:
    def __init__(self, mark, is_compiling=lambda: False):
        # mark(path_bytes, kind) writes one marker record
        self._mark = mark
        self._compiling = is_compiling
        self._main = threading.get_ident()
        self._open = []   # (module, path bytes) of the forwards running now, outermost first
        self._paths = {}  # id(module) → (weak reference to it, path bytes)
        self.marks = 0    # records written, for tests and the probe

    def _remember(self, module, path):
        key = id(module)
        try:
            ref = weakref.ref(module, lambda _, k=key, paths=self._paths: paths.pop(k, None))
        except TypeError:
            return
        self._paths[key] = (ref, path)

    def _index(self, module, prefix):
        # module and everything under it; prefix is the module's own path (str)
        for name, sub in module.named_modules():
            if id(sub) in self._paths and self._paths[id(sub)][0]() is sub:
                continue
            path = _clean(name)
            full = prefix if not path else (path if prefix is None else prefix + "." + path)
            self._remember(sub, (full if full else _root_label(module)).encode("utf-8", "replace"))

    def path_of(self, module):
        entry = self._paths.get(id(module))
        if entry is not None and entry[0]() is module:
            return entry[1]
        if not self._open:
            self._index(module, None)
        else:
            parent, parent_path = self._open[-1]
            name = next((n for n, m in getattr(parent, "_modules", {}).items() if m is module), None)
            self._index(module, parent_path.decode("utf-8", "replace") + "." + (name or type(module).__name__))
        entry = self._paths.get(id(module))
        return entry[1] if entry is not None else _root_label(module).encode()

    def pre(self, module, args):
        if self._compiling() or threading.get_ident() != self._main:
            return None
        path = self.path_of(module)
        self._open.append((module, path))
        self._mark(path, MARK_MODULE_BEGIN)
        self.marks += 1
        return None

    def post(self, module, args, output):
        # returns None: a forward hook's return value would replace the module's output
        if self._compiling() or threading.get_ident() != self._main:
            return None
        # pop back to this module (a forward that raised inside may have left inner ones open)
        while self._open:
            m, path = self._open.pop()
            if m is module:
                self._mark(path, MARK_MODULE_END)
                self.marks += 1
                break
        return None


def install(torch, mark):
    """Registers the global hooks; returns the ModulePaths, or None where PyTorch has no global module hooks."""
    mm = getattr(getattr(torch, "nn", None), "modules", None)
    mm = getattr(mm, "module", None)
    pre = getattr(mm, "register_module_forward_pre_hook", None)
    post = getattr(mm, "register_module_forward_hook", None)
    if not callable(pre) or not callable(post):
        return None
    compiler = getattr(torch, "compiler", None)
    is_compiling = getattr(compiler, "is_compiling", None) or (lambda: False)
    paths = ModulePaths(mark, is_compiling)
    paths.handles = [pre(paths.pre)]  # RemovableHandles (the probe takes them off again)
    try:
        paths.handles.append(post(paths.post, always_call=True))
    except TypeError:  # PyTorch before always_call
        paths.handles.append(post(paths.post))
    return paths
