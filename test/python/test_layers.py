"""The gpumem package's floors (Note [Python floors] in native/python/tools/layers.py): the check passes on the
package as it is, and fails, naming what broke, on small made-up packages with a cycle, an import up the floors, a
module on no floor and a file too long."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

import support

TOOL = support.PY_DIR / "tools" / "layers.py"
sys.path.insert(0, str(TOOL.parent))
import layers  # noqa: E402

FLOORS = [("low", "the bottom", ["_a", "_b"]), ("high", "the top", ["_c", "gpumem"])]


def fake_package(files):
    """A folder `gpumem` with the given {file name: source}."""
    pkg = os.path.join(tempfile.mkdtemp(prefix="gpumem-layers-"), "gpumem")
    os.makedirs(pkg)
    for name, text in files.items():
        with open(os.path.join(pkg, name), "w") as f:
            f.write(text)
    return pkg


class RealPackage(unittest.TestCase):
    def test_the_package_keeps_its_floors(self):
        # Run as CI runs it: its own result lines (with GPUMEM_RESULTS set) count in the python layer.
        p = subprocess.run([sys.executable, str(TOOL)], capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertRegex(p.stdout, r"(?m)^ok   no import cycle$")
        self.assertRegex(p.stdout, r"(?m)^ok   imports go down the floors$")
        self.assertRegex(p.stdout, r"(?m)^ok   every module on one floor$")
        # every module of the package is printed on its floor, under the floor's line
        printed = {line.split()[0] for line in p.stdout.splitlines() if line.startswith("  ")}
        files = {f[:-3] for f in os.listdir(support.PY_DIR / "gpumem") if f.endswith(".py")}
        self.assertEqual(printed, (files - {"__init__"}) | {"gpumem"})

    def test_results_lines_are_written_when_asked(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "python.jsonl")
            env = dict(os.environ, GPUMEM_RESULTS=out, GPUMEM_RESULTS_LAYER="python")
            subprocess.run([sys.executable, str(TOOL)], env=env, capture_output=True, text=True, timeout=60)
            with open(out) as f:
                lines = [json.loads(line) for line in f]
        self.assertEqual([(r["layer"], r["name"], r["status"]) for r in lines],
                         [("python", "python-layers/no import cycle", "pass"),
                          ("python", "python-layers/imports go down the floors", "pass"),
                          ("python", "python-layers/every module on one floor", "pass"),
                          ("python", "python-layers/no file over 450 lines", "pass")])


class MadeUpPackages(unittest.TestCase):
    def test_a_cycle_is_named_even_through_a_function_level_import(self):
        pkg = fake_package({"__init__.py": "", "_a.py": "from . import _b\n",
                            "_b.py": "def later():\n    from ._a import thing\n", "_c.py": "import gpumem._a\n"})
        found = layers.check(pkg, FLOORS)
        self.assertEqual(found["cycles"], [["_a", "_b"]])
        self.assertEqual(found["upward"], [])
        self.assertEqual(found["modules"]["_c"][1], {"_a"})
        verdict = {name: (ok, message) for name, ok, message in layers.verdicts(found)}
        self.assertEqual(verdict["no import cycle"], (False, "cycle: _a <-> _b"))

    def test_an_import_up_the_floors_is_named_with_both_floors(self):
        pkg = fake_package({"__init__.py": "from . import _c\n", "_a.py": "x = 1\n",
                            "_b.py": "def f():\n    from gpumem import _c\n", "_c.py": "from ._a import x\n"})
        found = layers.check(pkg, FLOORS)
        self.assertEqual(found["cycles"], [])
        self.assertEqual(found["upward"], ["_b (low) imports _c (high)"])

    def test_a_module_on_no_floor_and_a_long_file_are_named(self):
        pkg = fake_package({"__init__.py": "", "_a.py": "", "_b.py": "", "_c.py": "x = 1\n" * 460, "_new.py": ""})
        found = layers.check(pkg, FLOORS)
        self.assertEqual(found["unplaced"], ["not on a floor: _new"])
        self.assertEqual(found["too_large"], ["_c: 460 lines"])
        self.assertEqual(found["large"], [("_c", 460)])


if __name__ == "__main__":
    unittest.main()
