"""The notebook kernel process (`python3 -m gpumem._kernel`, Note [Kernel protocol]) over its line protocol, on the
stand-in torch with the real lens allocator on the simulated device, with IPython and with plain exec: the same
figures per cell (equal to what the cell measured itself), the cell's own file as the line at its peak, output and
errors as replies, and a kernel that survives a failing cell."""
import json
import os
import subprocess
import sys
import unittest

import support


def run_kernel(cells, shell=None):
    work = support.new_dir("kernel")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUMEM_", "PYTHON"))}
    env.update({"PYTHONPATH": os.pathsep.join([str(support.PY_DIR), str(support.FAKE_TORCH)]), "HOME": work,
                "IPYTHONDIR": os.path.join(work, ".ipython"), "GPUMEM_ALLOCATOR_SO": str(support.REAL_SO),
                "GPUMEM_BACKEND": "sim", "GPUMEM_ALLOCATOR": "lens", "GPUMEM_SAMPLE_MS": "0"})
    if shell:
        env["GPUMEM_KERNEL_SHELL"] = shell
    reqs = [{"op": "execute", "id": "c%d" % i, "code": c, "file": os.path.join(work, "cells", "cell-%d.py" % i)} for i, c in enumerate(cells, 1)]
    stdin = "".join(json.dumps(r) + "\n" for r in reqs) + '{"op":"shutdown"}\n'
    proc = subprocess.run([sys.executable, "-m", "gpumem._kernel"], input=stdin, cwd=work, env=env, capture_output=True,
                          text=True, timeout=120)
    if proc.returncode != 0:
        raise AssertionError("kernel failed (%d)\n%s\n%s" % (proc.returncode, proc.stdout, proc.stderr))
    return [json.loads(line) for line in proc.stdout.splitlines()], work


CELLS = [
    "import torch\nkeep = []\nprint('one')",
    "a = torch.empty(3 << 20, device='cuda')\nb = torch.empty(1 << 20, device='cuda')\ndel a\nkeep.append(b)\n"
    "pk = torch.cuda.max_memory_allocated()\npk",
    "raise ValueError('nope')",
    "print(len(keep))",
]


class KernelTest(unittest.TestCase):
    def setUp(self):
        support.real_so_or_skip(self)

    def check(self, shell):
        replies, work = run_kernel(CELLS, shell)
        self.assertEqual(replies[0]["type"], "ready")
        self.assertEqual(replies[0]["shell"], shell or "ipython")
        by = {}
        for r in replies[1:]:
            by.setdefault(r["id"], []).append(r)
        self.assertEqual("".join(r["text"] for r in by["c1"] if r["type"] == "stream"), "one\n")
        self.assertEqual([r["text"] for r in by["c2"] if r["type"] == "result"], [str(4 << 20)])
        err = [r for r in by["c3"] if r["type"] == "error"]
        self.assertEqual((err[0]["ename"], err[0]["evalue"]), ("ValueError", "nope"))
        self.assertEqual("".join(r["text"] for r in by["c4"] if r["type"] == "stream"), "1\n", "the kernel outlived the error")
        done = {k: v[-1] for k, v in by.items()}
        self.assertEqual([done[k]["ok"] for k in ("c1", "c2", "c3", "c4")], [True, True, False, True])
        self.assertEqual([done[k]["execution_count"] for k in ("c1", "c2", "c3", "c4")], [1, 2, 3, 4])
        self.assertIsNone(done["c1"]["figures"]["device"])
        f = done["c2"]["figures"]
        self.assertEqual((f["peak_allocated"], f["added_allocated"], f["added_reserved"]), (4 << 20, 1 << 20, 22 << 20))
        cell2 = os.path.join(work, "cells", "cell-2.py")
        self.assertEqual([(l["file"], l["line"], l["bytes"]) for l in f["lines"]], [(cell2, 1, 3 << 20), (cell2, 2, 1 << 20)])
        with open(cell2) as fh:
            self.assertEqual(fh.read(), CELLS[1])

    def test_ipython(self):
        self.check(None)

    def test_plain_exec(self):
        self.check("exec")


if __name__ == "__main__":
    unittest.main()
