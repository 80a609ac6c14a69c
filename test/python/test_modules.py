"""Module paths (gpumem/_modules.py, Note [Module paths]): the names PathTable gives the modules of a chain of
running forwards (outermost first), as the allocator asks for them; paths under the root, _orig_mod dropped,
modules not registered under their caller, objects that are no module, and entries taken back when a module is
collected. test_module_paths.py runs the whole path through the real allocator."""
import gc
import sys
import unittest

import support

sys.path.insert(0, str(support.PY_DIR))
from gpumem._modules import PathTable  # noqa: E402


class Module:
    """What the table uses of torch.nn.Module: _modules and named_modules() (same order and naming)."""

    def __init__(self, **children):
        self._modules = dict(children)

    def __getattr__(self, name):  # like nn.Module: children are attributes (OptimizedModule._orig_mod)
        try:
            return self.__dict__["_modules"][name]
        except KeyError:
            raise AttributeError(name) from None

    def named_modules(self, prefix=""):
        yield prefix, self
        for name, m in self._modules.items():
            yield from m.named_modules(prefix + ("." if prefix else "") + name)

    def child(self, *names):
        m = self
        for n in names:
            m = m._modules[n]
        return m


class GPT(Module):
    pass


class OptimizedModule(Module):
    pass


class PathTableTest(unittest.TestCase):
    def setUp(self):
        self.learned, self.forgotten = {}, []
        self.table = PathTable(lambda obj, path: self.learned.__setitem__(id(obj), path),
                               self.forgotten.append, lambda obj: isinstance(obj, Module))

    def model(self):
        return GPT(h=Module(**{str(i): Module(attn=Module(), mlp=Module()) for i in range(2)}))

    def names(self, *objs):
        return [self.learned.get(id(o)) for o in objs]

    def test_a_new_root_names_its_whole_tree_at_once(self):
        m = self.model()
        self.table.resolve([m, m.child("h", "1"), m.child("h", "1", "mlp")])
        self.assertEqual(self.names(m, m.child("h"), m.child("h", "0", "attn"), m.child("h", "1", "mlp")),
                         [b"GPT", b"h", b"h.0.attn", b"h.1.mlp"])
        self.assertEqual(self.table.learned, 8)
        self.table.resolve([m, m.child("h", "0")])  # known: nothing new
        self.assertEqual(self.table.learned, 8)

    def test_compiled_root_drops_orig_mod(self):
        inner = self.model()
        compiled = OptimizedModule(_orig_mod=inner)
        self.table.resolve([compiled, inner.child("h", "1", "mlp")])
        self.assertEqual(self.names(compiled, inner, inner.child("h", "1", "mlp")), [b"GPT", b"GPT", b"h.1.mlp"])

    def test_unregistered_module_named_under_its_caller(self):
        m = self.model()
        loose = Module(inner=Module())
        self.table.resolve([m, loose, loose.child("inner")])
        self.assertEqual(self.names(loose, loose.child("inner")), [b"GPT.Module", b"GPT.Module.inner"])

    def test_an_object_that_is_no_module_is_said_so_and_not_kept(self):
        m = self.model()

        class Head:
            pass

        head = Head()
        self.table.resolve([m, head])
        self.assertEqual(self.names(m, head), [b"GPT", None])
        self.assertIn(id(head), self.learned)  # told (as None), so the allocator stops reading its code's frames
        self.assertIsNone(self.table.path(head))

    def test_a_collected_module_is_forgotten_before_its_address_can_be_reused(self):
        m = self.model()
        self.table.resolve([m])
        addresses = {id(x) for _, x in m.named_modules()}
        del m
        gc.collect()
        self.assertEqual(set(self.forgotten), addresses)
        other = GPT(h=Module())  # may take a freed address: named afresh
        self.table.resolve([other])
        self.assertEqual(self.names(other), [b"GPT"])


if __name__ == "__main__":
    unittest.main()
