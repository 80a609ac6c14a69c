"""Note [Choosing the mode] (gpumem/_mode.py): which allocator `auto` takes for real scripts, and that
comments, strings and switched-off features never trigger the PyTorch-allocator mode."""
import os
import sys
import tempfile
import textwrap
import unittest

import support

sys.path.insert(0, str(support.PY_DIR))
from gpumem import _mode  # noqa: E402

# The table is about what needs PyTorch's allocator: with the observer unavailable, `auto` takes the lens
# unless a feature needs PyTorch's; with it available, `auto` always keeps PyTorch's (ObserverTest).
NO_OBSERVER = (False, "no C++ compiler (c++) to build the observer of PyTorch's allocator")

# (name, script text, expected mode, expected line of the reason or None). Snippets are the shapes
# found in torchvision's/timm's references, the PyTorch docs and common training scripts.
CASES = [
    ("torchvision reference sets benchmark", """
        import torch
        import torchvision

        def main(args):
            if args.use_deterministic_algorithms:
                torch.backends.cudnn.benchmark = False
            else:
                torch.backends.cudnn.benchmark = True
        """, "pytorch", 9),
    ("from torch.backends import cudnn", """
        from torch.backends import cudnn
        cudnn.benchmark = True
        """, "pytorch", 3),
    ("benchmark from a flag", """
        import torch
        def setup(args):
            torch.backends.cudnn.benchmark = args.benchmark
        """, "pytorch", 4),
    ("benchmark explicitly off", """
        import torch
        torch.backends.cudnn.benchmark = False
        torch.backends.cudnn.deterministic = True
        """, "lens", None),
    ("benchmark only in a comment and a string", """
        import torch
        # torch.backends.cudnn.benchmark = True  (too slow to warm up here)
        HELP = "set torch.backends.cudnn.benchmark = True for speed"
        def f():
            '''torch.compile(model, mode="reduce-overhead") is an option.'''
            return HELP
        """, "lens", None),
    ("reduce-overhead compile", """
        import torch
        model = torch.nn.Linear(8, 8).cuda()
        opt_model = torch.compile(model, mode="reduce-overhead")
        """, "pytorch", 4),
    ("max-autotune compile, keyword after others", """
        import torch
        f = torch.compile(lambda x: x * 2, fullgraph=True, mode="max-autotune")
        """, "pytorch", 3),
    ("max-autotune-no-cudagraphs stays on the lens", """
        import torch
        f = torch.compile(lambda x: x * 2, mode="max-autotune-no-cudagraphs")
        """, "lens", None),
    ("default compile stays on the lens", """
        import torch
        f = torch.compile(torch.nn.Linear(4, 4))
        g = torch.compile(torch.nn.Linear(4, 4), mode="default")
        """, "lens", None),
    ("compile options triton.cudagraphs", """
        import torch
        f = torch.compile(torch.nn.Linear(4, 4), options={"triton.cudagraphs": True})
        """, "pytorch", 3),
    ("torch.cuda.graph capture", """
        import torch
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            y = x * 2
        """, "pytorch", 3),
    ("make_graphed_callables imported", """
        from torch.cuda import make_graphed_callables
        """, "pytorch", 2),
    ("torch.multiprocessing spawn", """
        import torch.multiprocessing as mp
        def worker(rank):
            pass
        if __name__ == "__main__":
            mp.spawn(worker, nprocs=2)
        """, "pytorch", 2),
    ("plain multiprocessing stays on the lens", """
        import multiprocessing as mp
        from torch.utils.data import DataLoader
        """, "lens", None),
    ("script sets PYTORCH_CUDA_ALLOC_CONF", """
        import os
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
        import torch
        """, "pytorch", 3),
    ("script mentions the variable only in a print", """
        import os
        print("try PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True")
        print(os.environ.get("PYTORCH_CUDA_ALLOC_CONF"))
        """, "lens", None),
    ("the first reason in line order wins", """
        import torch
        torch.backends.cudnn.benchmark = True
        m = torch.compile(torch.nn.Linear(2, 2), mode="reduce-overhead")
        """, "pytorch", 3),
    ("a file that does not parse is not a reason", """
        import torch
        def broken(:
            torch.backends.cudnn.benchmark = True
        """, "lens", None),
]


def write(folder, name, text):
    path = os.path.join(folder, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(textwrap.dedent(text))
    return path


class TableTest(unittest.TestCase):
    def test_cases(self):
        for name, text, mode, line in CASES:
            with self.subTest(name), tempfile.TemporaryDirectory() as d:
                # Line 1 is the empty line after the opening quotes, so the numbers above count as printed.
                script = write(d, "train.py", text)
                choice = _mode.decide("auto", script, env={}, roots=[d], observer=NO_OBSERVER)
                self.assertEqual(choice.mode, mode, "%s: %r" % (name, choice))
                if line is None:
                    self.assertIsNone(choice.where)
                else:
                    self.assertEqual(choice.where, "train.py:%d" % line, "%s: %r" % (name, choice))


class LocalModulesTest(unittest.TestCase):
    def test_follows_local_imports_not_installed_ones(self):
        with tempfile.TemporaryDirectory() as d:
            script = write(d, "train.py", "import torch\nfrom utils.setup import prepare\nimport models\nprepare()\n")
            write(d, "utils/__init__.py", "")
            write(d, "utils/setup.py", "import torch\n\ndef prepare():\n    torch.backends.cudnn.benchmark = True\n")
            write(d, "models/__init__.py", "from .net import Net\n")
            write(d, "models/net.py", "import torch\nclass Net(torch.nn.Module):\n    pass\n")
            c = _mode.decide("auto", script, env={}, roots=[d], observer=NO_OBSERVER)
            self.assertEqual((c.mode, c.where), ("pytorch", os.path.join("utils", "setup.py") + ":4"))

    def test_relative_import_inside_a_package(self):
        with tempfile.TemporaryDirectory() as d:
            script = write(d, "run.py", "from pkg import main\nmain.go()\n")
            write(d, "pkg/__init__.py", "")
            write(d, "pkg/main.py", "from . import graphs\n\ndef go():\n    graphs.build()\n")
            write(d, "pkg/graphs.py", "import torch\n\ndef build():\n    return torch.cuda.CUDAGraph()\n")
            c = _mode.decide("auto", script, env={}, roots=[d], observer=NO_OBSERVER)
            self.assertEqual((c.mode, c.where), ("pytorch", os.path.join("pkg", "graphs.py") + ":4"))

    def test_a_same_named_module_outside_the_roots_is_not_read(self):
        with tempfile.TemporaryDirectory() as d, tempfile.TemporaryDirectory() as other:
            script = write(d, "train.py", "import helpers\n")
            write(other, "helpers.py", "import torch\ntorch.backends.cudnn.benchmark = True\n")
            self.assertEqual(_mode.decide("auto", script, env={}, roots=[d], observer=NO_OBSERVER).mode, "lens")


class EnvironmentAndRequestTest(unittest.TestCase):
    def test_alloc_conf_in_the_environment(self):
        with tempfile.TemporaryDirectory() as d:
            script = write(d, "train.py", "import torch\n")
            for var, value in (("PYTORCH_CUDA_ALLOC_CONF", "backend:cudaMallocAsync"),
                               ("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"),
                               ("PYTORCH_ALLOC_CONF", "max_split_size_mb:128")):
                c = _mode.decide("auto", script, env={var: value}, roots=[d], observer=NO_OBSERVER)
                self.assertEqual(c.mode, "pytorch")
                self.assertIn("%s=%s" % (var, value), c.reason)
                self.assertIn(value, c.line())
            self.assertEqual(_mode.decide("auto", script, env={"PYTORCH_CUDA_ALLOC_CONF": "  "}, roots=[d], observer=NO_OBSERVER).mode, "lens")

    def test_settings_that_record_less_take_pytorchs_allocator(self):
        # Note [Figures only] (gpumem/_observe.py) and Note [Recorded steps] (gpumem/_recorded_steps.py): only PyTorch's
        # allocator has figures without per-allocation events, from the start or once we stop recording
        cases = (("GPUMEM_EVENTS", "0", "1", "figures only (--figures-only / gpuMemoryLens.recordAllocations)"),
                 ("GPUMEM_RECORD_STEPS", "20", "0", "first steps only (--record-steps / gpuMemoryLens.recordSteps)"))
        with tempfile.TemporaryDirectory() as d:
            script = write(d, "train.py", "import torch\n")
            for var, less, every, reason in cases:
                with self.subTest(var=var):
                    c = _mode.decide("auto", script, env={var: less}, roots=[d], observer=NO_OBSERVER)
                    self.assertEqual(c.mode, "pytorch")
                    self.assertIn(reason, c.reason)
                    self.assertEqual(_mode.decide("auto", script, env={var: every}, roots=[d], observer=NO_OBSERVER).mode,
                                     "lens")
                    self.assertEqual(_mode.decide("lens", script, env={var: less}).mode, "lens")  # asked for: refused later
            with self.assertRaisesRegex(ValueError, "GPUMEM_RECORD_STEPS must be a non-negative whole number"):
                _mode.decide("auto", script, env={"GPUMEM_RECORD_STEPS": "-1"}, roots=[d], observer=NO_OBSERVER)

    def test_explicit_modes_win(self):
        with tempfile.TemporaryDirectory() as d:
            script = write(d, "train.py", "import torch\ntorch.backends.cudnn.benchmark = True\n")
            self.assertEqual(_mode.decide("lens", script, env={}).mode, "lens")
            self.assertEqual(_mode.decide("pytorch", None, env={}).mode, "pytorch")
            with self.assertRaisesRegex(ValueError, "auto, lens, pytorch"):
                _mode.decide("/path/to/libgpumem_allocator.so", script, env={})

    def test_the_line_names_mode_and_place(self):
        with tempfile.TemporaryDirectory() as d:
            script = write(d, "train.py", "import torch\ntorch.backends.cudnn.benchmark = True\n")
            line = _mode.decide("auto", script, env={}, roots=[d], observer=NO_OBSERVER).line()
            self.assertRegex(line, r"^gpumem: allocator mode pytorch .*cudnn\.benchmark.* at train\.py:2$")
            line = _mode.decide("auto", write(d, "plain.py", "import torch\n"), env={}, roots=[d], observer=NO_OBSERVER).line()
            self.assertRegex(line, r"^gpumem: allocator mode lens \(the lens allocator\): no C\+\+ compiler .*plain\.py")

    def test_auto_keeps_pytorchs_allocator_when_the_observer_can_run(self):
        with tempfile.TemporaryDirectory() as d:
            plain = write(d, "plain.py", "import torch\nx = torch.ones(3, device='cuda')\n")
            c = _mode.decide("auto", plain, env={}, roots=[d], observer=(True, None))
            self.assertEqual((c.mode, c.reason, c.where), ("pytorch", _mode.KEEPS, None))
            self.assertEqual(c.line(), "gpumem: allocator mode pytorch (PyTorch's own allocator, observed): " + _mode.KEEPS)
            # A feature that needs PyTorch's allocator is named even when the observer cannot be built.
            pool = write(d, "pool.py", "import torch\npool = torch.cuda.MemPool()\n")
            c = _mode.decide("auto", pool, env={}, roots=[d], observer=NO_OBSERVER)
            self.assertEqual((c.mode, c.where), ("pytorch", "pool.py:2"))
            # Note [Labels and the mode]: a label is kept by both modes, so it needs no PyTorch allocator; a post-facto
            # annotation of a live allocation (newer PyTorch) still does.
            meta = write(d, "meta.py", "import torch\ntorch.cuda.memory._set_memory_metadata('x')\n")
            self.assertEqual(_mode.decide("auto", meta, env={}, roots=[d], observer=NO_OBSERVER).mode, "lens")
            note = write(d, "note.py", "import torch\nx = torch.ones(3, device='cuda')\ntorch.cuda.memory._annotate_tensor(x, 'kv')\n")
            self.assertEqual(_mode.decide("auto", note, env={}, roots=[d], observer=NO_OBSERVER).where, "note.py:3")

    def test_entry_script_from_argv(self):
        with tempfile.TemporaryDirectory() as d:
            script = write(d, "train.py", "")
            write(d, "pkg/__init__.py", "")
            mod = write(d, "pkg/cli.py", "")
            self.assertEqual(_mode.entry_script([script, "--epochs", "1"], d), script)
            self.assertEqual(_mode.entry_script(["/usr/bin/torchrun", "--nproc-per-node", "2", script], d), script)
            self.assertEqual(_mode.entry_script(["-m", "pkg.cli"], d), mod)
            self.assertIsNone(_mode.entry_script(["-c"], d))


if __name__ == "__main__":
    unittest.main()
