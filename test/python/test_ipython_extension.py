"""The IPython extension (`%load_ext gpumem`, `%%gpumem`; gpumem/_ipython.py) in IPython's InteractiveShell, in a
subprocess per test (tracking is per process), on the stand-in torch with the real lens allocator on the simulated
device: per-cell figures, each cell's peak its own (what torch.cuda.max_memory_allocated() said inside it above what was
live at its start), the lines at a cell's peak its own, named by cell and line, and the observed mode when CUDA was
initialised before the extension."""
import json
import os
import subprocess
import sys
import textwrap
import unittest

import support

DRIVER = r'''
import json, sys
from IPython.core.interactiveshell import InteractiveShell
ip = InteractiveShell.instance()
cells = json.loads(sys.argv[1])
for src in cells:
    print("=== cell", flush=True)
    ip.run_cell(src, store_history=True)
from gpumem import _ipython
print("=== rows")
print(json.dumps(_ipython.CELLS))
import os
print(json.dumps(dict({k: ip.user_ns.get(k) for k in ("pk3", "pk4", "al3")}, mode=os.environ.get("GPUMEM_ALLOCATOR"))))
'''


def run_cells(cells, env=None):
    work = support.new_dir("ip")
    full = {k: v for k, v in os.environ.items() if not k.startswith(("GPUMEM_", "PYTHON"))}
    full.update({"PYTHONPATH": os.pathsep.join([str(support.PY_DIR), str(support.FAKE_TORCH)]), "HOME": work,
                 "IPYTHONDIR": os.path.join(work, ".ipython"), "GPUMEM_ALLOCATOR_SO": str(support.REAL_SO),
                 "GPUMEM_BACKEND": "sim", "GPUMEM_ALLOCATOR": "lens", "GPUMEM_SAMPLE_MS": "0"})
    full.update(env or {})
    proc = subprocess.run([sys.executable, "-c", DRIVER, json.dumps([textwrap.dedent(c).strip() for c in cells])], cwd=work,
                          env=full, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0 or "=== rows" not in proc.stdout:
        raise AssertionError("driver failed (%d)\n%s\n%s" % (proc.returncode, proc.stdout, proc.stderr))
    out, rows = proc.stdout.split("=== rows\n")
    rows, seen = rows.strip().splitlines()[-2:]
    return out.split("=== cell\n")[1:], json.loads(rows), json.loads(seen), work, proc.stderr


CELLS = [
    "%load_ext gpumem",
    "import torch\nkeep = []",
    """
    a = torch.empty(3 << 20, device="cuda")
    b = torch.empty(1 << 20, device="cuda")
    del a
    keep.append(b)
    pk3, al3 = torch.cuda.max_memory_allocated(), torch.cuda.memory_allocated()
    """,
    """
    %%gpumem
    x = torch.empty(2 << 20, device="cuda")
    y = torch.empty(5000, device="cuda")
    del x
    pk4 = torch.cuda.max_memory_allocated()
    """,
    "1 + 1",
]


class IPythonExtensionTest(unittest.TestCase):
    def setUp(self):
        support.real_so_or_skip(self)

    def test_per_cell_figures_and_the_cell_magic(self):
        outs, rows, seen, work, err = run_cells(CELLS)
        self.assertRegex(outs[0], r"^gpumem: session folder %s/\.gpumem/\d{8}-\d{6}-notebook\n" % work)
        # Cell 2 (the import) allocates nothing: no line. Cell 3: one line with its figures.
        self.assertNotIn("gpumem [", outs[1])
        self.assertEqual(outs[2].strip(), "gpumem [3]: peak allocated 4.00 MiB above the 0 B live at its start · "
                                          "allocated +1.00 MiB · reserved +22.0 MiB · top: cell [3] line 1 (3.00 MiB)")
        by_cell = {}
        for r in rows:
            by_cell.setdefault(r["cell"], r)  # the first row of a cell is the automatic one
        c3 = by_cell[3]
        self.assertEqual(c3["max_memory_allocated"], seen["pk3"])     # what the cell measured itself
        self.assertEqual(c3["capture_peak"], seen["pk3"])             # the capture's replay agrees
        self.assertEqual((c3["peak_allocated"], c3["added_allocated"], c3["allocated_after"]), (4 << 20, 1 << 20, seen["al3"]))
        self.assertEqual(c3["lines"], [["cell [3] line 1", "<module>", 3 << 20], ["cell [3] line 2", "<module>", 1 << 20]])
        # The lines point into the cell's own code (what IPython compiled cell 3 to).
        self.assertTrue(all(f.startswith("<ipython-input-3-") for f, _ in c3["line_files"]), c3["line_files"])

        # %%gpumem: the details, the top lines at the cell's peak. The 1 MiB kept from cell 3 is live there too, but
        # it is not the cell's: its peak is what it allocated itself, and the line says what was live at its start.
        magic = [r for r in rows if r.get("magic")]
        self.assertEqual(len(magic), 1)
        self.assertEqual(magic[0]["max_memory_allocated"], seen["pk4"])
        self.assertEqual((magic[0]["allocated_before"], magic[0]["max_memory_allocated"]), (1 << 20, (1 << 20) + (2 << 20) + 5120))
        self.assertEqual((magic[0]["peak_allocated"], magic[0]["peak_from"]), ((2 << 20) + 5120, "capture"))
        self.assertEqual(magic[0]["added_allocated"], 5120)
        text = outs[3]
        self.assertIn("gpumem [4]: peak allocated 2.00 MiB above the 1.00 MiB live at its start · allocated +5.00 KiB · "
                      "reserved +0 B\n", text)
        self.assertIn("top lines at the cell's peak (its own allocations):\n    2.00 MiB  cell [4] line 1\n"
                      "    5.00 KiB  cell [4] line 2\ncapture: ", text)
        self.assertRegex(text, r"capture: %s/\.gpumem/[^/]+/capture-\d+\.gpumem" % work)
        self.assertEqual(text.count("gpumem [4]"), 1)   # the automatic line does not repeat the magic's
        self.assertNotIn("gpumem [", outs[4])          # a cell that changes nothing prints nothing
        self.assertEqual(err, "")

    def test_cuda_initialised_before_the_extension_is_observed_from_then_on_and_said(self):
        outs, rows, seen, _work, err = run_cells([
            "import torch\ntorch.cuda.init()\nearly = torch.empty(4096, device='cuda')",
            "%load_ext gpumem",
            "x = torch.empty(1 << 20, device='cuda')",
        ], env={"GPUMEM_ALLOCATOR": "auto"})
        self.assertIn("CUDA was already initialised, so PyTorch's allocator is observed from now on", outs[1])
        self.assertNotIn("Traceback", "".join(outs) + err)
        # PyTorch's own counters (the stand-in's native allocator counts live bytes) give the cell's figures.
        self.assertEqual(seen["mode"], "pytorch")
        (c3,) = [r for r in rows if r["cell"] == 3]
        self.assertEqual(c3["added_allocated"], 1 << 20)


if __name__ == "__main__":
    unittest.main()
