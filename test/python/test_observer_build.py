"""The observer's build watchdog (Note [Observer build watchdog] in gpumem/_observer_build.py): the tracker is built in
a child Python under a time limit, so a hanging compiler or a lock file left by a killed build can never stall
the workload at its first CUDA use. A tiny stand-in torch.utils.cpp_extension plays the compiler: it hangs,
fails, or builds (writes the .so) and says in which process it ran."""
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

import support

# A stand-in torch package with only what build_tracker touches. load() reads its sources from disk as torch's does
# (a missing source fails), and honours the lock file the way torch's FileBaton does (waits while it exists), so a
# stale lock really would hang without the watchdog.
CPP_EXTENSION = r'''
import hashlib, os, sys, time
def load(name, sources, with_cuda, build_directory, verbose, extra_cflags=None):
    text = "".join(open(s).read() for s in sources)
    lock = os.path.join(build_directory, "lock")
    while os.path.exists(lock):
        time.sleep(0.05)
    behaviour = os.environ.get("FAKE_BUILD", "ok")
    built = os.path.join(build_directory, name + ".so")
    # torch hashes the build flags with the sources: other flags or sources than the built module's mean a rebuild;
    # so does a source of another path or a newer time (ninja's rule).
    flags = " ".join(extra_cflags or []) or "-"
    stamp = "%s %s %s" % (flags, hashlib.sha1(text.encode()).hexdigest(), " ".join(sources))
    same = os.path.exists(built) and open(built).read() == stamp and all(
        os.stat(s).st_mtime <= os.stat(built).st_mtime for s in sources)
    with open(os.path.join(build_directory, "calls.log"), "a") as f:
        f.write("%d %s %s\n" % (os.getpid(), "import" if same else "build", flags))
    if not same:
        if behaviour == "hang":
            time.sleep(3600)
        if behaviour == "fail":
            sys.stderr.write("x.cpp:1: error: something the compiler said\n")
            raise RuntimeError("Error building extension '%s'" % name)
        with open(built, "w") as f:
            f.write(stamp)
    class Module:
        source = text
    return Module
'''

# Runs build_tracker in a fresh process (its own stand-in torch), prints what came back.
DRIVER = r'''
import json, os, sys, time
import torch
from gpumem import _observer_build
t0 = time.monotonic()
mod, why = _observer_build.build_tracker(torch)
folder, name = _observer_build._build_dir(torch)
log = os.path.join(folder, "calls.log")
calls = [l.split() for l in open(log).read().splitlines()] if os.path.exists(log) else []
print(json.dumps({"built": mod is not None, "why": why, "secs": time.monotonic() - t0, "pid": os.getpid(),
                  "calls": [[int(c[0]), c[1], " ".join(c[2:])] for c in calls],
                  "source_is_tracker": mod is not None and mod.source == _observer_build.TRACKER_SRC,
                  "lock_left": os.path.exists(os.path.join(folder, "lock")), "folder": folder}))
'''


class ObserverBuildWatchdog(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="gpumem-obsbuild-")
        pkg = os.path.join(self.tmp, "pkgs", "torch")
        os.makedirs(os.path.join(pkg, "utils"))
        with open(os.path.join(pkg, "__init__.py"), "w") as f:
            f.write('__version__ = "9.9.9+standin"\n')
        open(os.path.join(pkg, "utils", "__init__.py"), "w").close()
        with open(os.path.join(pkg, "utils", "cpp_extension.py"), "w") as f:
            f.write(CPP_EXTENSION)

    def run_driver(self, behaviour, timeout_s, prepare=None):
        env = dict(os.environ, XDG_CACHE_HOME=os.path.join(self.tmp, "cache"), FAKE_BUILD=behaviour,
                   GPUMEM_OBSERVER_BUILD_TIMEOUT=str(timeout_s), GPUMEM_SESSION_DIR=os.path.join(self.tmp, "session"),
                   PYTHONPATH=os.pathsep.join([os.path.join(self.tmp, "pkgs"), str(support.PY_DIR)]))
        env.pop("GPUMEM_RESULTS", None)
        if prepare:
            prepare(env)
        p = subprocess.run([sys.executable, "-S", "-c", DRIVER], env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        return json.loads(p.stdout), p.stderr

    def build_ahead(self, *args, **env_extra):
        """`python -m gpumem build-observer ARGS` with the stand-in torch, as VS Code and the launchers run it."""
        env = dict(os.environ, XDG_CACHE_HOME=os.path.join(self.tmp, "cache"), FAKE_BUILD="ok",
                   PYTHONPATH=os.pathsep.join([str(support.PY_DIR), os.path.join(self.tmp, "pkgs")]), **env_extra)
        env.pop("GPUMEM_SESSION_DIR", None)
        return subprocess.run([sys.executable, "-m", "gpumem", "build-observer", *args], env=env, capture_output=True,
                              text=True, timeout=60), env

    def folder(self, env):
        # _build_dir's folder for the stand-in torch (same key as the driver computes).
        out = subprocess.run([sys.executable, "-S", "-c", "import torch; from gpumem import _observer_build; print(_observer_build._build_dir(torch)[0])"],
                             env=env, capture_output=True, text=True, check=True)
        return out.stdout.strip()

    def test_a_hanging_compiler_falls_back_within_the_limit(self):
        r, err = self.run_driver("hang", 2)
        self.assertFalse(r["built"])
        self.assertEqual(r["why"], "building the observer took longer than 2 s (GPUMEM_OBSERVER_BUILD_TIMEOUT)")
        self.assertLess(r["secs"], 10)
        # the compiler ran in a child, never in the workload's process
        self.assertEqual([c[1] for c in r["calls"]], ["build"])
        self.assertNotEqual(r["calls"][0][0], r["pid"])
        self.assertIn("gpumem: building the observer, first run only", err)

    def test_a_failed_build_says_the_compilers_last_line(self):
        r, _ = self.run_driver("fail", 30)
        self.assertFalse(r["built"])
        self.assertTrue(r["why"].startswith("building the observer failed: RuntimeError: Error building extension 'gpumem_observer_"), r["why"])

    def test_a_finished_build_is_imported_and_the_next_run_does_not_build(self):
        r, _ = self.run_driver("ok", 30)
        self.assertTrue(r["built"], r["why"])
        self.assertTrue(r["source_is_tracker"])
        self.assertEqual([c[1] for c in r["calls"]], ["build", "import"])
        self.assertNotEqual(r["calls"][0][0], r["pid"])  # built in the child
        self.assertEqual(r["calls"][1][0], r["pid"])  # imported here
        # Note [Observer build flags]: optimized, and the same flags in both processes (else torch rebuilds here)
        self.assertEqual([c[2] for c in r["calls"]], ["-O2", "-O2"])
        r2, err2 = self.run_driver("ok", 30)
        self.assertTrue(r2["built"])
        self.assertEqual([c[1] for c in r2["calls"]][2:], ["import"])
        self.assertNotIn("building the observer", err2)

    def test_a_lock_left_by_a_killed_build_is_removed_once_older_than_the_limit(self):
        def stale_lock(env):
            folder = self.folder(env)
            os.makedirs(folder, exist_ok=True)
            lock = os.path.join(folder, "lock")
            open(lock, "w").close()
            old = time.time() - 600
            os.utime(lock, (old, old))

        r, err = self.run_driver("ok", 30, prepare=stale_lock)
        self.assertTrue(r["built"], r["why"])
        self.assertFalse(r["lock_left"])
        self.assertRegex(err, r"gpumem: removed a stale observer build lock \(6\d\d s old")

    def test_a_fresh_lock_is_another_build_in_progress_and_is_kept(self):
        # A lock younger than the limit belongs to a build that may still finish: kept, and this run waits
        # for it no longer than the limit, then falls back.
        def fresh_lock(env):
            folder = self.folder(env)
            os.makedirs(folder, exist_ok=True)
            open(os.path.join(folder, "lock"), "w").close()

        r, err = self.run_driver("ok", 2, prepare=fresh_lock)
        self.assertFalse(r["built"])
        self.assertTrue(r["lock_left"])
        self.assertIn("took longer than 2 s", r["why"])
        self.assertNotIn("stale", err)


    def test_build_observer_ahead_builds_once_then_says_it_is_built(self):
        # Note [Observer build ahead]: what VS Code and the launchers run beside (or before) a workload.
        first, env = self.build_ahead("--json")
        self.assertEqual(first.returncode, 0, first.stderr)
        start, end = [json.loads(line) for line in first.stdout.splitlines()]
        self.assertEqual((start["building"], start["torch"]), (True, "9.9.9+standin"))  # said before the build
        r = end
        self.assertEqual((r["built"], r["already"], r["torch"]), (True, False, "9.9.9+standin"))
        self.assertEqual(r["folder"], self.folder(env))
        with open(os.path.join(r["folder"], "calls.log")) as f:
            self.assertEqual([line.split()[1] for line in f], ["build"])  # built in its child, not imported here
        again, _ = self.build_ahead()
        self.assertEqual(again.returncode, 0, again.stderr)
        self.assertEqual(again.stdout.strip(), "gpumem: the observer is built for torch 9.9.9+standin (%s)" % r["folder"])
        # A workload started now imports what was built ahead and never compiles.
        w, err = self.run_driver("fail", 30)
        self.assertTrue(w["built"], w["why"])
        self.assertEqual([c[1] for c in w["calls"]], ["build", "import"])
        self.assertNotIn("building the observer", err)

    def test_build_observer_without_a_compiler_says_why_in_one_line(self):
        p, _ = self.build_ahead(CXX="no-such-compiler-xyz", PATH=os.path.dirname(sys.executable))
        self.assertEqual(p.returncode, 1)
        self.assertEqual(p.stdout.strip(), "gpumem: the observer cannot be built here: no C++ compiler (no-such-compiler-xyz) to "
                                           "build the observer of PyTorch's allocator; runs record from PyTorch's history instead")

    def test_a_cpu_only_torch_has_nothing_to_build_and_no_compile_starts(self):
        # VS Code builds ahead at activation (a workspace with test files activates it): a torch without CUDA has no
        # allocator to observe, so the answer comes at once, with no compile and no "building" line.
        with open(os.path.join(self.tmp, "pkgs", "torch", "version.py"), "w") as f:
            f.write("cuda = None\nhip = None\n")
        with open(os.path.join(self.tmp, "pkgs", "torch", "__init__.py"), "a") as f:
            f.write("from . import version\n")
        p, _ = self.build_ahead("--json")
        self.assertEqual(p.returncode, 1, p.stderr)
        [r] = [json.loads(line) for line in p.stdout.splitlines()]
        self.assertEqual((r["built"], r["no_cuda"], r["why"]),
                         (False, True, "this torch (9.9.9+standin) is built without CUDA: there is no CUDA allocator to observe"))
        self.assertFalse(os.path.exists(os.path.join(r["folder"], "calls.log")))  # the stand-in compiler never ran
        text = self.build_ahead()[0].stdout.strip()
        self.assertEqual(text, "gpumem: no observer to build: this torch (9.9.9+standin) is built without CUDA: there is no "
                               "CUDA allocator to observe")
        # the same torch with CUDA builds as before
        with open(os.path.join(self.tmp, "pkgs", "torch", "version.py"), "w") as f:
            f.write("cuda = '13.0'\nhip = None\n")
        p, _ = self.build_ahead("--json")
        self.assertEqual(json.loads(p.stdout.splitlines()[-1])["built"], True, p.stdout + p.stderr)


class ObserverSource(unittest.TestCase):
    """Note [Observer source in the build folder]: the extension's C++ is a file of the package; its text is the cache
    key, and its binding block is what load_inline once generated from the function names."""

    KEY = ("import sys; sys.path.insert(0, sys.argv[1]); import types; torch = types.SimpleNamespace(__version__='9.9')\n"
           "from gpumem import _observer_build; print(_observer_build._build_dir(torch)[1])")

    def key_of(self, python_dir):
        return subprocess.run([sys.executable, "-S", "-c", self.KEY, python_dir], capture_output=True, text=True,
                              check=True, env=dict(os.environ, XDG_CACHE_HOME="/nonexistent")).stdout.strip()

    def test_the_cache_key_changes_with_the_cpp_text(self):
        import shutil

        tmp = tempfile.mkdtemp(prefix="gpumem-obskey-")
        shutil.copytree(support.PY_DIR / "gpumem", os.path.join(tmp, "gpumem"))
        same = self.key_of(tmp)
        self.assertEqual(same, self.key_of(str(support.PY_DIR)))  # the folder's path is not in the key
        self.assertRegex(same, r"^gpumem_observer_[0-9a-f]{12}$")
        with open(os.path.join(tmp, "gpumem", "_observer_ext.cpp"), "a") as f:
            f.write("// one more line\n")
        self.assertNotEqual(self.key_of(tmp), same)

    def test_the_module_binds_the_functions_the_bootstrap_calls(self):
        import re

        text = (support.PY_DIR / "gpumem" / "_observer_ext.cpp").read_text()
        bound = re.findall(r'm\.def\("(\w+)", torch::wrap_pybind_function\((\w+)\), "(\w+)"\);', text)
        self.assertEqual([b[0] for b in bound], ["attach", "record", "events_off", "figures"])
        self.assertTrue(all(a == b == c for a, b, c in bound), bound)


if __name__ == "__main__":
    unittest.main()
