"""Module paths for activations, with nothing running per module call.

Note [Module paths]: the reader gives each activation the innermost module whose forward was running when it was
allocated (native/addon/src/categories.cpp), from MARK_MODULE_BEGIN/END records named by the module's path. The
allocator writes them itself from the frames its stack capture already walks (Note [Module paths from frames] in
native/allocator/src/module_marks.h): the `self` of each running forward, outermost first, mapped to a path
through a table this module fills, once per module object, when the allocator meets a module it does not know
(the resolver below, called with the GIL on the allocating thread).
- A path is the module's name under the root module, the outermost forward running (its named_modules()), the
  root itself by its class name ("GPT2LMHeadModel"). A root's whole tree is named at once; a module that is not a
  registered child of the forward around it is named under it by its attribute name or class name.
- torch.compile: `_orig_mod` is dropped from paths (a compiled model and its original have the same paths).
  Inside a compiled region the inner modules' forwards are not frames of their own, so its activations count
  under the compiled module: coarser, and the UI says so.
- Only the thread that enabled it (the bootstrap's) writes marks, as the hooks before it did.
- Each table entry goes when its module is collected (weakref.finalize), before CPython can reuse its address.
- Replaces global module forward hooks (two Python calls per module call, ≈ ×1.02–1.05 per step, a second
  firing of every hook and a UserWarning under torch.compile). GPUMEM_MODULE_PATHS=0 turns it off; so does a
  Python whose frames the allocator cannot read (3.10, free-threaded builds): activations then fall back to
  module classes from forward frames, and one notice says so.
"""
import ctypes
import weakref


def _clean(name):
    return ".".join(part for part in name.split(".") if part != "_orig_mod")


def _root_label(module):
    return type(getattr(module, "_orig_mod", module)).__name__


class PathTable:
    """Paths of module objects. learn(obj, path bytes or None) tells the allocator; forget(address) takes an
    entry back when its module is collected; is_module(obj) says what counts as a module."""

    def __init__(self, learn, forget, is_module, on_root=None):
        self._learn = learn
        self._forget = forget
        self._is_module = is_module
        self._on_root = on_root  # called once with each new root module (Note [Weights from the first forward])
        self._paths = {}  # id(module) → (weak reference, path bytes)
        self.learned = 0  # modules named, for tests and the probe

    def path(self, module):
        entry = self._paths.get(id(module))
        return entry[1] if entry is not None and entry[0]() is module else None

    def resolve(self, chain):
        """`chain`: the objects whose forwards run, outermost first. Names every module in it (and the tree of a
        new root); says which are not modules."""
        parent, parent_path = None, None
        for obj in chain:
            if not self._is_module(obj):
                self._learn(obj, None)
                continue
            path = self.path(obj)
            if path is None:
                if parent is None:
                    self._index(obj, None)
                    if self._on_root is not None:
                        self._on_root(obj)
                else:
                    name = next((n for n, m in getattr(parent, "_modules", {}).items() if m is obj), None)
                    self._index(obj, parent_path.decode("utf-8", "replace") + "." + (name or type(obj).__name__))
                path = self.path(obj) or _root_label(obj).encode()
            parent, parent_path = obj, path

    def _index(self, module, prefix):
        # module and everything under it; prefix is the module's own path (str), None for a root
        for name, sub in module.named_modules():
            if self.path(sub) is not None:
                continue
            rel = _clean(name)
            full = prefix if not rel else (rel if prefix is None else prefix + "." + rel)
            self._remember(sub, (full if full else _root_label(module)).encode("utf-8", "replace"))

    def _remember(self, module, path):
        key = id(module)
        try:
            ref = weakref.ref(module)
            weakref.finalize(module, self._gone, key)
        except TypeError:
            return  # not weak-referenceable: never cached, named again each time
        self._paths[key] = (ref, path)
        self._learn(module, path)
        self.learned += 1

    def _gone(self, key):
        self._paths.pop(key, None)
        try:
            self._forget(key)
        except Exception:  # interpreter shutdown: the library may be gone already
            pass


_RESOLVER = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int)
_keep = []  # the ctypes callback must outlive every allocation


def _calibrate(obj, lib):
    # `obj` is this frame's first local: the allocator checks it finds it there (Note [First local]).
    return lib.gpumem_modules_calibrate(id(obj))


def install(torch, lib, on_root=None):
    """Enables module marks on this thread (Note [Module paths from frames]). Returns the PathTable; None when the
    library or torch offers no module paths (a stand-in library, a torch without nn); False when this Python's
    frames cannot be read without the GIL. on_root(module) is called once for each new root module."""
    c = ctypes
    for name, res, args in (("gpumem_modules_calibrate", c.c_int, [c.c_void_p]),
                            ("gpumem_modules_enable", None, [_RESOLVER]),
                            ("gpumem_modules_learn", None, [c.c_void_p, c.c_char_p]),
                            ("gpumem_modules_forget", None, [c.c_void_p])):
        fn = getattr(lib, name, None)
        if fn is None:
            return None
        fn.restype, fn.argtypes = res, args
    module_type = getattr(getattr(torch, "nn", None), "Module", None)
    if module_type is None:
        return None
    if not _calibrate(object(), lib):
        return False
    table = PathTable(lambda obj, path: lib.gpumem_modules_learn(id(obj), path),
                      lambda key: lib.gpumem_modules_forget(key),
                      lambda obj: isinstance(obj, module_type), on_root)

    def resolve(selves, n):
        try:
            table.resolve([c.cast(selves[i], c.py_object).value for i in range(n)])
        except Exception:  # never disturb the allocation; the chain is simply not named
            pass
        return 0

    callback = _RESOLVER(resolve)
    _keep.append(callback)
    lib.gpumem_modules_enable(callback)
    return table
