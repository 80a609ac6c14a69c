"""When and how the bootstrap installs the allocator, and what it leaves alone."""
import json
import os
import stat
import sys
import unittest

import support

PLUGIN = support.FAKE_TORCH / "fake_cuda_plugin" / "__init__.py"


class InstallTimingTest(unittest.TestCase):
    def test_lazy_configure_then_proc_file(self):
        run = support.run_script("""
            import json, os, sys, torch
            session = os.environ["GPUMEM_SESSION_DIR"]
            before = sorted(os.listdir(session))           # torch imported, CUDA not used yet
            t = torch.empty(1024, device="cuda")           # FIRST_CUDA_USE
            print(json.dumps({"before": before, "after": sorted(os.listdir(session)), "pid": os.getpid()}))
        """)
        self.assertEqual(run.code, 0, run.err)
        out = run.json_out()
        self.assertEqual(out["before"], [])
        pid = out["pid"]
        self.assertIn("capture-%d.gpumem" % pid, out["after"])
        self.assertIn("proc-%d.json" % pid, out["after"])
        with open(os.path.join(run.session, "proc-%d.json" % pid)) as f:
            proc = json.load(f)
        self.assertEqual(proc["pid"], pid)
        self.assertEqual((proc["rank"], proc["local_rank"], proc["world_size"]), (0, 0, 1))
        self.assertEqual(proc["capture"], os.path.join(run.session, "capture-%d.gpumem" % pid))
        self.assertEqual(proc["socket"], os.path.join(run.session, "ctl-%d.sock" % pid))
        self.assertEqual(proc["argv"], [run.script])
        log = run.log()
        config = json.loads(log[0][len("configure "):])
        self.assertEqual(config["capture_path"], proc["capture"])
        self.assertEqual(config["control_socket"], proc["socket"])
        self.assertEqual(config["segments"], "expandable")
        self.assertIs(config["stacks"], True)
        self.assertEqual(config["header"]["argv"], [run.script])
        self.assertEqual(config["header"]["torch_version"], "2.11.0+fake")
        self.assertEqual(config["header"]["bootstrap_dir"], str(support.PY_DIR))
        self.assertEqual((config["header"]["segments"], config["header"]["trim_on_growth"]), ("expandable", True))
        self.assertEqual(config["header"]["first_cuda_init"],
                         "%s:%d in <module>" % (run.script, support.line_of(run.script, "FIRST_CUDA_USE")))
        self.assertEqual(log[1:3], ["init 1", "malloc 1024 backward=0"])
        # atexit runs before module globals are torn down, so `t` is freed after the shutdown call
        # (the allocator must accept frees after gpumem_shutdown).
        self.assertEqual(log[3:], ["shutdown 0", "free 1024"])

    def test_concurrent_first_cuda_use_configures_once_and_unwraps(self):
        run = support.run_script("""
            import threading, torch, torch.cuda.memory as m
            wrapped = torch.cuda._lazy_init
            barrier = threading.Barrier(8)
            def first_use():
                barrier.wait()
                torch.cuda._lazy_init()
            threads = [threading.Thread(target=first_use) for _ in range(8)]
            [t.start() for t in threads]
            [t.join() for t in threads]
            # Unwrapped everywhere, back to PyTorch's own function (never None).
            print(torch.cuda._lazy_init is wrapped.__wrapped__, m._lazy_init is wrapped.__wrapped__)
        """)
        self.assertEqual(run.code, 0, run.err)
        self.assertEqual(run.out.split(), ["True", "True"])
        self.assertEqual(sum(l.startswith("configure ") for l in run.log()), 1)

    def test_rank_and_settings_reach_the_header(self):
        run = support.run_script("import torch; torch.cuda.init()",
                                 env={"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4", "GPUMEM_SEGMENTS": "fixed",
                                      "GPUMEM_STACKS": "0", "GPUMEM_SAMPLE_MS": "50", "GPUMEM_USER_ROOTS": "/a" + os.pathsep + "/b",
                                      "GPUMEM_TRIM": "0"})
        self.assertEqual(run.code, 0, run.err)
        config = json.loads(run.log()[0][len("configure "):])
        self.assertEqual((config["header"]["rank"], config["header"]["local_rank"], config["header"]["world_size"]), (3, 1, 4))
        self.assertEqual((config["segments"], config["stacks"], config["sample_interval_ms"]), ("fixed", False, 50))
        self.assertIs(config["trim_on_growth"], False)
        self.assertEqual(config["user_roots"], ["/a", "/b"])
        self.assertEqual(config["budget_bytes"], 1 << 30)  # Note [Capture budget]: 1 GiB unless GPUMEM_BUDGET says
        # The policy that made the capture, for readers' what-if questions (policy_replay.cpp).
        self.assertEqual((config["header"]["segments"], config["header"]["trim_on_growth"]), ("fixed", False))

    def test_too_late_message_names_the_line_and_workload_runs(self):
        run = support.run_script("""
            import torch
            t = torch.empty(100, device="cuda")
            print("allocated", torch.cuda.memory_allocated())
        """, env={"FAKE_TORCH_PLUGIN_INITS_CUDA": "1"})
        self.assertEqual(run.code, 0, run.err)
        line = support.line_of(PLUGIN, "PLUGIN_INITS_CUDA_HERE")
        off = [l for l in run.err.splitlines() if "memory tracking is OFF" in l]
        self.assertEqual(len(off), 1, run.err)
        self.assertIn("%s:%d" % (PLUGIN, line), off[0])
        # Untracked: PyTorch's own allocator and API (the stand-in's native path) serve the workload.
        self.assertEqual(run.out.strip(), "allocated 100")
        self.assertEqual(run.files(), [])

    def test_processes_without_torch_are_untouched(self):
        run = support.run_script("""
            import json, sys
            print(json.dumps({"torch": "torch" in sys.modules, "hooks": [type(f).__name__ for f in sys.meta_path]}))
        """)
        self.assertEqual(run.code, 0, run.err)
        out = run.json_out()
        self.assertFalse(out["torch"])
        self.assertEqual(run.files(), [])
        self.assertEqual(run.err, "")

    def test_torch_imported_but_cuda_never_used_leaves_nothing(self):
        # The torchrun agent and spawn-started DataLoader workers import torch but never touch CUDA.
        run = support.run_script("import torch\nprint(torch.cuda.memory_allocated())")
        self.assertEqual((run.code, run.out.strip(), run.files()), (0, "0", []))

    def test_bad_setting_is_reported_and_workload_runs(self):
        run = support.run_script("import torch; torch.cuda.init(); print('ran')", env={"GPUMEM_SEGMENTS": "huge"})
        self.assertEqual((run.code, run.out.strip()), (0, "ran"))
        self.assertIn("gpumem: memory tracking is off: GPUMEM_SEGMENTS must be 'expandable' or 'fixed', got 'huge'", run.err)
        self.assertEqual(run.files(), [])

    def test_bad_trim_setting_is_reported_and_workload_runs(self):
        run = support.run_script("import torch; torch.cuda.init(); print('ran')", env={"GPUMEM_TRIM": "yes"})
        self.assertEqual((run.code, run.out.strip()), (0, "ran"))
        self.assertIn("GPUMEM_TRIM must be '1' (trim on growth) or '0', got 'yes'", run.err)

    def test_capture_budget_setting_reaches_configure_or_is_refused(self):
        run = support.run_script("import torch; torch.cuda.init()", env={"GPUMEM_BUDGET": str(256 << 20)})
        self.assertEqual(run.code, 0, run.err)
        self.assertEqual(json.loads(run.log()[0][len("configure "):])["budget_bytes"], 256 << 20)
        run = support.run_script("import torch; torch.cuda.init()", env={"GPUMEM_BUDGET": "0"})
        self.assertNotIn("budget_bytes", json.loads(run.log()[0][len("configure "):]))  # 0: unbounded
        run = support.run_script("import torch; torch.cuda.init(); print('ran')", env={"GPUMEM_BUDGET": "4096"})
        self.assertEqual((run.code, run.out.strip()), (0, "ran"))
        self.assertIn("GPUMEM_BUDGET must be 0 (unbounded) or at least 1048576 bytes (1 MiB), got '4096'", run.err)

    def test_missing_allocator_is_reported_and_workload_runs(self):
        run = support.run_script("import torch; torch.cuda.init(); print('ran')", so="/nonexistent/libgpumem_allocator.so")
        self.assertEqual((run.code, run.out.strip()), (0, "ran"))
        self.assertIn("cannot load the lens allocator /nonexistent/libgpumem_allocator.so", run.err)


class ChainTest(unittest.TestCase):
    def _chain_dir(self, body):
        d = support.new_dir("chain")
        with open(os.path.join(d, "sitecustomize.py"), "w") as f:
            f.write(body)
        return d

    def test_existing_sitecustomize_still_runs(self):
        chained = self._chain_dir("import sys\nCHAINED = 'yes'\nsys.stderr.write('chained ran\\n')\n")
        run = support.run_script("""
            import sys
            print(sys.modules["_gpumem_chained_sitecustomize"].CHAINED, sys.modules["sitecustomize"].__file__)
        """, extra_paths=[chained])
        self.assertEqual(run.code, 0, run.err)
        self.assertEqual(run.err, "chained ran\n")
        value, ours = run.out.split()
        self.assertEqual(value, "yes")
        self.assertEqual(ours, str(support.PY_DIR / "sitecustomize.py"))

    def test_chained_sitecustomize_that_uses_cuda_is_tracked(self):
        chained = self._chain_dir("import torch\ntorch.cuda.init()\n")
        run = support.run_script("import torch; print(torch.cuda.memory_allocated())", extra_paths=[chained])
        self.assertEqual(run.code, 0, run.err)
        self.assertNotIn("OFF", run.err)
        self.assertEqual(run.log()[1], "init 1")

    def test_failing_chained_sitecustomize_is_reported_like_site_does(self):
        chained = self._chain_dir("raise ValueError('broken venv hook')\n")
        run = support.run_script("print('ran')", extra_paths=[chained])
        self.assertEqual((run.code, run.out.strip()), (0, "ran"))
        self.assertIn("Error in sitecustomize", run.err)
        self.assertIn("ValueError: broken venv hook", run.err)


class SessionPathTest(unittest.TestCase):
    def setUp(self):
        sys.path.insert(0, str(support.PY_DIR))
        from gpumem import _session_folder as _session
        self.session = _session

    def tearDown(self):
        sys.path.remove(str(support.PY_DIR))

    def test_short_session_keeps_socket_inside(self):
        d = support.new_dir("s")
        self.assertEqual(self.session.socket_path(d, 12345, env={}), os.path.join(d, "ctl-12345.sock"))

    def test_long_session_moves_socket_to_private_runtime_dir(self):
        long_dir = os.path.join(support.new_dir("s"), "x" * 120)
        runtime = support.new_dir("rt")
        path = self.session.socket_path(long_dir, 12345, env={"XDG_RUNTIME_DIR": runtime})
        self.assertTrue(path.startswith(os.path.join(runtime, "gpumem") + os.sep), path)
        self.assertLessEqual(len(path.encode()), 107)
        self.assertTrue(path.endswith("-12345.sock"))
        mode = stat.S_IMODE(os.stat(os.path.join(runtime, "gpumem")).st_mode)
        self.assertEqual(mode, 0o700)
        # Stable per session (clients never guess it, but the extension may show it).
        self.assertEqual(path, self.session.socket_path(long_dir, 12345, env={"XDG_RUNTIME_DIR": runtime}))

    def test_unsafe_runtime_dir_is_refused(self):
        long_dir = os.path.join(support.new_dir("s"), "x" * 120)
        runtime = support.new_dir("rt")
        os.makedirs(os.path.join(runtime, "gpumem"))
        os.chmod(os.path.join(runtime, "gpumem"), 0o777)
        path = self.session.socket_path(long_dir, 7, env={"XDG_RUNTIME_DIR": runtime})
        self.assertFalse(path is not None and path.startswith(runtime), path)


if __name__ == "__main__":
    unittest.main()
