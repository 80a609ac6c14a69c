"""Module paths for activations (gpumem/_modules.py, Note [Module paths]) on plain module objects: the marks the
global hooks write around nested forwards, paths under the root, _orig_mod dropped, modules not registered
under their caller, a forward that raised, other threads and Dynamo tracing."""
import sys
import threading
import unittest

import support

sys.path.insert(0, str(support.PY_DIR))
from gpumem._modules import MARK_MODULE_BEGIN, MARK_MODULE_END, ModulePaths  # noqa: E402


class Module:
    """What the hooks use of torch.nn.Module: _modules and named_modules() (same order and naming)."""

    def __init__(self, **children):
        self._modules = dict(children)

    def __getattr__(self, name):  # like nn.Module: children are attributes
        try:
            return self.__dict__["_modules"][name]
        except KeyError:
            raise AttributeError(name) from None

    def named_modules(self, prefix=""):
        yield prefix, self
        for name, m in self._modules.items():
            yield from m.named_modules(prefix + ("." if prefix else "") + name)

    def __call__(self, hooks, body=None):
        hooks.pre(self, ())
        try:
            if body:
                body()
        finally:
            hooks.post(self, (), None)


class GPT(Module):
    pass


class OptimizedModule(Module):
    pass


def run_model(hooks, model):
    blocks = model._modules["h"]._modules
    def block(b):
        b(hooks, lambda: (b._modules["attn"](hooks), b._modules["mlp"](hooks)))
    model(hooks, lambda: [block(b) for b in blocks.values()])


class ModulePathsTest(unittest.TestCase):
    def setUp(self):
        self.log = []
        self.hooks = ModulePaths(lambda path, kind: self.log.append((kind, path.decode())))

    def model(self):
        return GPT(h=Module(**{str(i): Module(attn=Module(), mlp=Module()) for i in range(2)}))

    def test_nested_forwards_write_paths_under_the_root(self):
        run_model(self.hooks, self.model())
        B, E = MARK_MODULE_BEGIN, MARK_MODULE_END
        self.assertEqual(self.log, [
            (B, "GPT"), (B, "h.0"), (B, "h.0.attn"), (E, "h.0.attn"), (B, "h.0.mlp"), (E, "h.0.mlp"), (E, "h.0"),
            (B, "h.1"), (B, "h.1.attn"), (E, "h.1.attn"), (B, "h.1.mlp"), (E, "h.1.mlp"), (E, "h.1"), (E, "GPT")])
        self.assertEqual(self.hooks.marks, 14)

    def test_compiled_root_drops_orig_mod(self):
        inner = self.model()
        compiled = OptimizedModule(_orig_mod=inner)
        compiled(self.hooks, lambda: inner(self.hooks, lambda: inner._modules["h"]._modules["1"]._modules["mlp"](self.hooks)))
        self.assertEqual([p for _, p in self.log], ["GPT", "GPT", "h.1.mlp", "h.1.mlp", "GPT", "GPT"])

    def test_unregistered_module_named_under_its_caller(self):
        model = self.model()
        loose = Module(inner=Module())
        model(self.hooks, lambda: loose(self.hooks, lambda: loose._modules["inner"](self.hooks)))
        self.assertEqual([p for _, p in self.log], ["GPT", "GPT.Module", "GPT.Module.inner", "GPT.Module.inner", "GPT.Module", "GPT"])

    def test_forward_that_raised_inside_ends_at_its_caller(self):
        model = self.model()
        mlp = model._modules["h"]._modules["0"]._modules["mlp"]

        def boom():
            self.hooks.pre(mlp, ())  # the inner forward raises: its post hook never runs
            raise RuntimeError("x")

        with self.assertRaises(RuntimeError):
            model(self.hooks, boom)
        self.assertEqual(self.log, [(MARK_MODULE_BEGIN, "GPT"), (MARK_MODULE_BEGIN, "h.0.mlp"), (MARK_MODULE_END, "GPT")])
        run_model(self.hooks, model)  # the next forward starts from an empty stack
        self.assertEqual(self.log[3], (MARK_MODULE_BEGIN, "GPT"))

    def test_other_threads_and_dynamo_tracing_write_nothing(self):
        model = self.model()
        t = threading.Thread(target=run_model, args=(self.hooks, model))
        t.start()
        t.join()
        self.assertEqual(self.log, [])
        tracing = ModulePaths(lambda p, k: self.log.append(p), is_compiling=lambda: True)
        run_model(tracing, model)
        self.assertEqual(self.log, [])

    def test_a_new_module_at_a_reused_id_is_named_again(self):
        model = self.model()
        run_model(self.hooks, model)
        other = GPT(h=Module())
        self.hooks._paths[id(other)] = self.hooks._paths[id(model)]  # as if `other` took a dead module's id
        self.hooks._paths[id(other)] = (lambda: None, b"stale")
        self.log.clear()
        other(self.hooks)
        self.assertEqual(self.log, [(MARK_MODULE_BEGIN, "GPT"), (MARK_MODULE_END, "GPT")])


if __name__ == "__main__":
    unittest.main()
