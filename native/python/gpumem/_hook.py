"""Call back right after a module finishes importing, without importing it ourselves.

A sys.meta_path finder that, for the watched names only, asks the other finders for the real spec
and wraps that spec's loader's exec_module on the instance. The module keeps its real loader
object (so inspect/linecache/isinstance checks behave), and unwatched imports cost one dict lookup.
"""
import sys


class PostImportHook:
    def __init__(self):
        self._callbacks = {}

    def watch(self, name, callback):
        """callback(module) runs once, after `name` is fully executed. Runs at once if already imported."""
        module = sys.modules.get(name)
        if module is not None:
            callback(module)
            return
        self._callbacks[name] = callback
        if self not in sys.meta_path:
            sys.meta_path.insert(0, self)

    def find_spec(self, fullname, path=None, target=None):
        callback = self._callbacks.get(fullname)
        if callback is None:
            return None
        spec = None
        for finder in sys.meta_path:
            if finder is self:
                continue
            find = getattr(finder, "find_spec", None)
            if find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                break
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        del self._callbacks[fullname]
        if not self._callbacks and self in sys.meta_path:
            sys.meta_path.remove(self)
        loader = spec.loader
        real_exec = loader.exec_module

        def exec_module(module):
            try:
                real_exec(module)
            finally:
                # The bound method was shadowed on this loader instance only; restore the class's.
                try:
                    del loader.exec_module
                except AttributeError:
                    pass
            callback(module)

        try:
            loader.exec_module = exec_module
        except (AttributeError, TypeError):
            return spec  # a loader with __slots__: cannot hook it, import proceeds untouched
        return spec
