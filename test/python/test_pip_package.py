"""`pip install native/python` (Note [Installed package] in native/python/build_backend/gpumem_build.py), as a user
does it, offline: a fresh `python3 -m venv` (with the system's packages, for pytest and IPython, as a GPU machine's
venv has torch), its pip builds the wheel from native/python with no build isolation and no index, installs it,
and then everything runs from the installed package with no PYTHONPATH: the `gpumem` command (the same options as
`python3 -m gpumem`, and a real `gpumem run` on the simulated device), the pytest plugin through its entry point
(dormant without a marker, a budget that holds and one that fails), `%load_ext gpumem` in IPython. The stand-in
torch sits beside each script and test file, where Python finds it first. Also: the wheel's Python files are
native/python's own (one copy of the Python side), its allocator is within the binary floor, and an sdist carries
every file its own build needs."""
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import unittest
import zipfile

import support

PY = support.PY_DIR
BACKEND_DIR = PY / "build_backend"
CHECK_FLOOR = support.ROOT / "native" / "floor" / "check_floor.py"


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUMEM_", "PYTHON", "PIP_"))}
    env.update({"PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1", "GPUMEM_SAMPLE_MS": "0"})
    env.update(extra)
    return env


def run(cmd, cwd=None, env=None, timeout=600):
    return subprocess.run([str(c) for c in cmd], cwd=cwd, env=env or clean_env(), capture_output=True, text=True,
                          timeout=timeout)


def work_with_torch(prefix):
    work = support.new_dir(prefix)
    shutil.copytree(str(support.FAKE_TORCH / "torch"), os.path.join(work, "torch"))
    return work


class PipPackageTest(unittest.TestCase):
    venv = wheel = site = None

    @classmethod
    def setUpClass(cls):
        if not support.REAL_SO.exists():
            raise unittest.SkipTest("dist/native/libgpumem_allocator.so is not built (npm run build): the wheel's "
                                    "allocator is linked from the same objects")
        top = support.new_dir("pip")
        cls.venv = os.path.join(top, "venv")
        made = run([sys.executable, "-m", "venv", "--system-site-packages", cls.venv], timeout=300)
        if made.returncode != 0:
            raise AssertionError("python3 -m venv failed (apt-get install -y python3-venv):\n%s" % made.stderr)
        cls.python = os.path.join(cls.venv, "bin", "python")
        wheels = os.path.join(top, "wheels")
        built = run([cls.python, "-m", "pip", "wheel", "--no-build-isolation", "--no-index", "--no-deps", "-w", wheels, PY])
        if built.returncode != 0:
            raise AssertionError("pip wheel native/python failed:\n%s\n%s" % (built.stdout[-3000:], built.stderr[-3000:]))
        (name,) = os.listdir(wheels)
        cls.wheel = os.path.join(wheels, name)
        installed = run([cls.python, "-m", "pip", "install", "--no-index", "--no-deps", cls.wheel])
        if installed.returncode != 0:
            raise AssertionError("pip install of %s failed:\n%s" % (name, installed.stderr[-3000:]))
        where = run([cls.python, "-c", "import gpumem, os; print(os.path.dirname(gpumem.__file__))"])
        cls.site = where.stdout.strip()

    def test_the_wheel_holds_native_pythons_own_files_and_an_allocator_within_the_floor(self):
        self.assertRegex(os.path.basename(self.wheel), r"^gpu_memory_lens-\d+\.\d+\.\d+-py3-none-linux_[a-z0-9_]+\.whl$")
        with zipfile.ZipFile(self.wheel) as z:
            names = set(z.namelist())
            ours = sorted(p.relative_to(PY).as_posix() for p in (PY / "gpumem").rglob("*")
                          if p.suffix in (".py", ".cpp") and "__pycache__" not in p.parts)
            self.assertGreater(len(ours), 30)
            self.assertIn("gpumem/_observer_ext.cpp", ours)  # the observer's C++, built by the workload at first use
            for rel in ours:
                self.assertEqual(z.read(rel), (PY / rel).read_bytes(), rel)
            self.assertEqual(z.read("gpumem/_site/sitecustomize.py"), (PY / "sitecustomize.py").read_bytes())
            extra = names - set(ours) - {"gpumem/_site/sitecustomize.py", "gpumem/libgpumem_allocator.so"}
            self.assertEqual({n.split("/")[1] for n in extra}, {"METADATA", "WHEEL", "RECORD", "entry_points.txt", "top_level.txt"})
            info = next(n.split("/")[0] for n in extra)
            entry_points = z.read(info + "/entry_points.txt").decode()
        self.assertIn("[console_scripts]\ngpumem = gpumem.__main__:script\n", entry_points)
        self.assertIn("[pytest11]\ngpumem = gpumem\n", entry_points)
        so = os.path.join(self.site, "libgpumem_allocator.so")
        floor = run([sys.executable, CHECK_FLOOR, so])
        self.assertEqual(floor.returncode, 0, floor.stdout)
        self.assertRegex(floor.stdout, r"ok   .*libgpumem_allocator\.so: GLIBC_2\.\d+ GLIBCXX_3\.4\.\d+")

    def test_the_gpumem_command_has_the_options_of_python3_m_gpumem_and_runs_a_workload(self):
        gpumem = os.path.join(self.venv, "bin", "gpumem")
        installed = run([gpumem, "run", "--help"])
        from_source = run([sys.executable, "-m", "gpumem", "run", "--help"], env=clean_env(PYTHONPATH=str(PY)))
        self.assertEqual(installed.returncode, 0, installed.stderr)
        self.assertIn("--allocator-so PATH", installed.stdout)
        self.assertEqual(installed.stdout, from_source.stdout)
        self.assertEqual(run([gpumem, "--help"]).stdout,
                         run([sys.executable, "-m", "gpumem", "--help"], env=clean_env(PYTHONPATH=str(PY))).stdout)

        work = work_with_torch("run")
        with open(os.path.join(work, "train.py"), "w") as f:
            f.write("import json, os, sys, torch, gpumem\n"
                    "x = torch.empty(1 << 20, device='cuda')\n"
                    "print(json.dumps({'so': os.environ['GPUMEM_ALLOCATOR_SO'], 'gpumem': gpumem.__file__,\n"
                    "                  'active': gpumem.active(), 'pythonpath': os.environ['PYTHONPATH'],\n"
                    "                  'peak': torch.cuda.max_memory_allocated()}))\n")
        proc = run([gpumem, "run", "--backend", "sim", "--allocator", "lens", "--out", "runs", "--", "train.py"], cwd=work)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        seen = json.loads(proc.stdout.strip().splitlines()[-1])
        self.assertEqual(seen["so"], os.path.join(self.site, "libgpumem_allocator.so"))
        self.assertEqual(seen["gpumem"], os.path.join(self.site, "__init__.py"))
        self.assertEqual(seen["pythonpath"], os.path.join(self.site, "_site"))
        self.assertTrue(seen["active"])
        self.assertEqual(seen["peak"], 1 << 20)  # the stand-in torch: one byte an element
        m = re.search(r"gpumem: capture (\S+\.gpumem)", proc.stderr)
        self.assertIsNotNone(m, proc.stderr)
        header, records = support.read_capture(m.group(1))
        self.assertEqual(header["bootstrap_dir"], os.path.dirname(self.site))
        self.assertGreater(len(records), 3)

    def test_the_pytest_plugin_is_dormant_without_a_marker_and_judges_budgets_with_one(self):
        work = work_with_torch("pt")
        with open(os.path.join(work, "test_plain.py"), "w") as f:
            f.write("import sys\n\n"
                    "def test_dormant(pytestconfig):\n"
                    "    pm = pytestconfig.pluginmanager\n"
                    "    assert pm.has_plugin('gpumem') and pm.has_plugin('gpumem._pytest')\n"
                    "    assert not pm.has_plugin('gpumem-budgets')\n"
                    "    assert 'torch' not in sys.modules and 'gpumem._bootstrap' not in sys.modules\n")
        env = clean_env(GPUMEM_BACKEND="sim", GPUMEM_ALLOCATOR="lens")
        pytest = [self.python, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        dormant = run(pytest + ["test_plain.py"], cwd=work, env=env)
        self.assertEqual(dormant.returncode, 0, dormant.stdout + dormant.stderr)
        self.assertFalse(os.path.exists(os.path.join(work, ".gpumem")))
        self.assertNotIn("gpumem", dormant.stderr)

        with open(os.path.join(work, "test_budgets.py"), "w") as f:
            f.write("import pytest, torch\n\n"
                    "@pytest.mark.gpu_memory(peak='2MiB', leak='0')\n"
                    "def test_fits():\n"
                    "    a = torch.empty(300000, device='cuda')\n"
                    "    del a\n\n"
                    "@pytest.mark.gpu_memory(peak='1MiB')\n"
                    "def test_over_budget():\n"
                    "    a = torch.empty(3 << 20, device='cuda')  # BIG\n")
        judged = run(pytest + ["test_budgets.py"], cwd=work, env=env)
        out = judged.stdout
        self.assertEqual(judged.returncode, 1, out + judged.stderr)
        self.assertRegex(out, r"1 failed, 1 passed")
        self.assertIn("gpu_memory: peak allocated 3.00 MiB exceeds the budget peak=1.00 MiB by 2.00 MiB", out)
        self.assertRegex(out, r"3\.00 MiB  test_budgets\.py:%d in test_over_budget" % support.line_of(
            os.path.join(work, "test_budgets.py"), "# BIG"))
        self.assertIn("gpumem: session folder %s/.gpumem/" % work, judged.stderr)

        # Named as before it was installed: the entry point's registration is the one, nothing twice.
        named = run(pytest + ["-p", "gpumem", "--gpumem-report", "test_budgets.py"], cwd=work, env=env)
        self.assertEqual(named.returncode, 1, named.stdout + named.stderr)
        self.assertRegex(named.stdout, r"1 failed, 1 passed")
        self.assertIn("GPU memory per test", named.stdout)
        self.assertNotIn("already registered", named.stdout + named.stderr)

    def test_load_ext_gpumem_in_ipython(self):
        work = work_with_torch("ip")
        driver = ("import sys; sys.path.insert(0, %r)\n"
                  "from IPython.core.interactiveshell import InteractiveShell\n"
                  "ip = InteractiveShell.instance()\n"
                  "for src in ['%%load_ext gpumem', 'import torch',\n"
                  "            'a = torch.empty(3 << 20, device=\"cuda\")\\nb = torch.empty(1 << 20, device=\"cuda\")\\ndel a']:\n"
                  "    ip.run_cell(src, store_history=True)\n"
                  "import gpumem; print('from', gpumem.__file__)\n") % work
        proc = run([self.python, "-c", driver], cwd=work, env=clean_env(
            HOME=work, IPYTHONDIR=os.path.join(work, ".ipython"), GPUMEM_BACKEND="sim", GPUMEM_ALLOCATOR="lens"))
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertRegex(proc.stdout, r"gpumem \[3\]: peak allocated 4\.00 MiB [^\n]*· allocated \+1\.00 MiB [^\n]*"
                                      r"top: cell \[3\] line 1 \(3\.00 MiB\)")
        self.assertIn("from %s" % os.path.join(self.site, "__init__.py"), proc.stdout)

    def test_pyproject_reads_the_same_without_tomllib(self):
        sys.path.insert(0, str(BACKEND_DIR))
        try:
            import gpumem_build
        finally:
            sys.path.remove(str(BACKEND_DIR))
        text = (PY / "pyproject.toml").read_text()
        try:
            import tomllib
        except ImportError:
            self.skipTest("this Python has no tomllib to compare with")
        self.assertEqual(gpumem_build.read_toml(text), tomllib.loads(text))
        with self.assertRaises(ValueError):
            gpumem_build.read_toml("[project]\nname = {text = 'x'}\n")

    def test_an_sdist_carries_what_its_build_needs(self):
        out = support.new_dir("sdist")
        made = run([sys.executable, "-c", "import sys; sys.path.insert(0, %r); import gpumem_build; "
                    "print(gpumem_build.build_sdist(%r))" % (str(BACKEND_DIR), out)])
        self.assertEqual(made.returncode, 0, made.stderr)
        name = made.stdout.strip()
        with tarfile.open(os.path.join(out, name)) as tar:
            tar.extractall(out)
        root = os.path.join(out, name[:-len(".tar.gz")])
        native = support.ROOT / "native"
        self.assertEqual(sorted(os.listdir(os.path.join(root, "native", "allocator", "src"))),
                         sorted(p.name for p in (native / "allocator" / "src").iterdir()))
        # make -n names every command of the library's build and fails on a missing source, header or flag file.
        dry = run(["make", "-n", "-C", os.path.join(root, "native", "allocator"), "OUT=" + out,
                   os.path.join(out, "libgpumem_allocator.so")])
        self.assertEqual(dry.returncode, 0, dry.stdout[-2000:] + dry.stderr)
        self.assertIn("floor_shims.cc", dry.stdout)
        self.assertTrue(os.path.isfile(os.path.join(root, "gpumem", "__init__.py")))
        self.assertTrue(os.path.isfile(os.path.join(root, "gpumem", "_observer_ext.cpp")))
        self.assertTrue(os.path.isfile(os.path.join(root, "build_backend", "gpumem_build.py")))


if __name__ == "__main__":
    unittest.main()
