"""Markers, backward brackets, the two un-shimmable features, and preserving the workload's
exit code, argv, cwd, stdio, __main__ and Ctrl-C."""
import json
import os
import signal
import subprocess
import sys
import unittest

import support

CUDNN = "torch.backends.cudnn.benchmark=True is kept off"


class MarkerTest(unittest.TestCase):
    def test_record_function_and_gpumem_mark_become_markers_in_order(self):
        run = support.run_script("""
            import gpumem, torch
            print(gpumem.active(), gpumem.mark("before cuda"))   # no capture yet: a no-op
            torch.cuda.init()
            gpumem.mark("step 1")
            with torch.profiler.record_function("forward"):
                with torch.autograd.profiler.record_function("inner"):
                    pass
            with gpumem.range("eval"):
                pass
            print(gpumem.active())
        """)
        self.assertEqual(run.code, 0, run.err)
        self.assertEqual(run.out.split(), ["False", "False", "True"])
        marks = [l for l in run.log() if l.startswith("mark ")]
        # kinds: 0 instant, 1 begin, 2 end (MarkerKind in gpumem_format.h)
        self.assertEqual(marks, ["mark 0 step 1", "mark 1 forward", "mark 1 inner", "mark 2 inner", "mark 2 forward",
                                 "mark 1 eval", "mark 2 eval"])

    def test_backward_and_grad_are_bracketed(self):
        run = support.run_script("""
            import torch
            x = torch.empty(512, device="cuda")
            x.backward()
            torch.autograd.grad(x, x)
        """)
        self.assertEqual(run.code, 0, run.err)
        log = [l for l in run.log() if not l.startswith(("configure", "init", "shutdown"))]
        # The stand-in autograd allocates on a worker thread; the allocator sees the bracket around it. Each call
        # begins a backward phase (MARK_PHASE 5) and ends with the "backward" step fact (MARK_STEP 4) that ends it.
        self.assertEqual(log[:13], ["malloc 512 backward=0",
                                    "mark 5 backward", "backward_begin", "malloc 4096 backward=1", "free 4096", "backward_end",
                                    "mark 4 backward",
                                    "mark 5 backward", "backward_begin", "malloc 2048 backward=1", "free 2048", "backward_end",
                                    "mark 4 backward"])


    def test_gpumem_step_writes_a_user_step_mark(self):
        run = support.run_script("""
            import gpumem, torch
            print(gpumem.step())
            torch.cuda.init()
            print(gpumem.step(), gpumem.step("epoch 2 end"))
        """)
        self.assertEqual(run.code, 0, run.err)
        self.assertEqual(run.out.split(), ["False", "True", "True"])
        self.assertEqual([l for l in run.log() if l.startswith("mark ")], ["mark 4 step", "mark 4 epoch 2 end"])


class OptimizerTagTest(unittest.TestCase):
    def test_optimizer_steps_begin_a_phase_and_tag_each_new_storage_once(self):
        run = support.run_script("""
            import torch
            from torch.optim.optimizer import Optimizer
            w, b = torch.empty(4096, device="cuda"), torch.empty(1024, device="cuda")
            opt = Optimizer([w, b])
            for step in range(3):
                w.grad, b.grad = torch.empty(4096, device="cuda"), torch.empty(1024, device="cuda")
                opt.step()
                print(step, w.data_ptr(), b.data_ptr(), w.grad.data_ptr(), b.grad.data_ptr(),
                      opt.state[w]["exp_avg"].data_ptr(), opt.state[b]["exp_avg"].data_ptr(), flush=True)
                opt.zero_grad()
        """)
        self.assertEqual(run.code, 0, run.err)
        rows = [line.split() for line in run.out.splitlines()]
        self.assertEqual([r[0] for r in rows], ["0", "1", "2"])
        log = [l for l in run.log() if l.startswith(("mark", "tag"))]
        w, b, wg, bg, ws, bs = rows[0][1:]
        first = ["mark 5 optimizer",
                 "tag 1 %s 4096 0 -" % w, "tag 2 %s 4096 0 -" % wg, "tag 1 %s 1024 0 -" % b, "tag 2 %s 1024 0 -" % bg,
                 "tag 3 %s 4096 0 -" % ws, "tag 3 %s 1024 0 -" % bs,  # the CPU `step` counters are not tagged
                 "mark 4 optimizer.step"]
        # Later steps: parameters and state are the same storages (no tag); the gradients are new tensors after
        # zero_grad(), at whatever address the allocator gave them (possibly the same), and are tagged again.
        later = [["mark 5 optimizer", "tag 2 %s 4096 0 -" % r[3], "tag 2 %s 1024 0 -" % r[4], "mark 4 optimizer.step"]
                 for r in rows[1:]]
        self.assertEqual(log, first + later[0] + later[1])

    def test_gpumem_tags_0_turns_the_walk_off_keeps_the_phases_and_says_so_in_the_header(self):
        """Note [Not recorded]: GPUMEM_TAGS=0 is the switch for the optimizer walk."""
        source = """
            import torch
            from torch.optim.optimizer import Optimizer
            w = torch.empty(4096, device="cuda")
            opt = Optimizer([w])
            for step in range(2):
                w.grad = torch.empty(4096, device="cuda")
                opt.step()
                opt.zero_grad()
        """
        for value, tagged in (("0", False), ("1", True)):
            run = support.run_script(source, env={"GPUMEM_TAGS": value})
            self.assertEqual(run.code, 0, run.err)
            log = run.log()
            self.assertEqual(any(l.startswith("tag ") for l in log), tagged, log)
            self.assertEqual([l for l in log if l.startswith("mark ")],
                             ["mark 5 optimizer", "mark 4 optimizer.step"] * 2, "the phases and step facts stay")
            header = json.loads(next(l for l in log if l.startswith("configure "))[len("configure "):])["header"]
            self.assertIs(header["tags"], tagged)

    def test_figures_only_is_refused_by_the_lens_mode_in_one_line(self):
        """Note [Figures only] (gpumem/_observe.py): the lens allocator records every allocation whatever GPUMEM_EVENTS
        says; asked for, it says so once and its header keeps "events": true (the panels would say otherwise)."""
        source = """
            import torch
            torch.empty(4096, device="cuda")
        """
        run = support.run_script(source, env={"GPUMEM_EVENTS": "0", "GPUMEM_ALLOCATOR": "lens"})
        self.assertEqual(run.code, 0, run.err)
        self.assertEqual(run.err.count("figures only (GPUMEM_EVENTS=0) is for PyTorch's own allocator"), 1, run.err)
        header = json.loads(next(l for l in run.log() if l.startswith("configure "))[len("configure "):])["header"]
        self.assertEqual((header["allocator_mode"], header["events"]), ("lens", True))

    def test_recording_the_first_steps_only_is_refused_by_the_lens_mode_in_one_line(self):
        """Note [Recorded steps] (gpumem/_recorded_steps.py): the lens allocator records every allocation at every step; asked
        for, it says so once and its header says record_steps 0 (the panels would say otherwise)."""
        source = """
            import torch
            torch.empty(4096, device="cuda")
        """
        run = support.run_script(source, env={"GPUMEM_RECORD_STEPS": "3", "GPUMEM_ALLOCATOR": "lens"})
        self.assertEqual(run.code, 0, run.err)
        self.assertEqual(run.err.count("recording the first steps only (GPUMEM_RECORD_STEPS=3) is for PyTorch's own "
                                       "allocator"), 1, run.err)
        header = json.loads(next(l for l in run.log() if l.startswith("configure "))[len("configure "):])["header"]
        self.assertEqual((header["allocator_mode"], header["record_steps"]), ("lens", 0))


class ForkTest(unittest.TestCase):
    def test_forked_child_never_writes_into_the_parents_capture(self):
        run = support.run_script("""
            import os, sys, gpumem, torch
            torch.cuda.init()
            gpumem.mark("parent before fork")
            pid = os.fork()
            if pid == 0:
                print("child", gpumem.active(), gpumem.mark("from child"), flush=True)
                sys.exit(4)   # runs atexit in the child
            _, status = os.waitpid(pid, 0)
            gpumem.mark("parent after fork")
            print("child exit", os.waitstatus_to_exitcode(status), flush=True)
        """)
        self.assertEqual(run.code, 0, run.err)
        self.assertEqual(run.out.splitlines(), ["child False False", "child exit 4"])
        log = run.log()
        self.assertEqual([l for l in log if l.startswith(("mark", "shutdown"))],
                         ["mark 0 parent before fork", "mark 0 parent after fork", "shutdown 0"])


class GuardTest(unittest.TestCase):
    def test_cudnn_benchmark_stays_off_with_one_warning_and_a_notice(self):
        run = support.run_script("""
            import torch
            torch.backends.cudnn.benchmark = True
            first = torch.backends.cudnn.benchmark
            torch.cuda.init()
            torch.backends.cudnn.benchmark = True
            with torch.backends.cudnn.flags(benchmark=True):
                inside = torch.backends.cudnn.benchmark
            print(first, inside, torch.backends.cudnn.benchmark)
        """)
        self.assertEqual(run.code, 0, run.err)
        self.assertEqual(run.out.split(), ["False", "False", "False"])
        warnings = [l for l in run.err.splitlines() if CUDNN in l]
        self.assertEqual(len(warnings), 1, run.err)
        self.assertTrue(warnings[0].startswith("gpumem: "))
        # Warned before the capture existed: the notice is written once the capture is configured.
        notices = [l for l in run.log() if l.startswith("notice ")]
        self.assertEqual(len(notices), 1)
        self.assertTrue(notices[0].startswith("notice 1 " + CUDNN), notices)

    def test_reduce_overhead_falls_back_with_a_message(self):
        run = support.run_script("""
            import json, torch
            a = torch.compile(object(), mode="reduce-overhead")
            b = torch.compile(mode="max-autotune")
            c = torch.compile(object(), options={"triton.cudagraphs": True, "x": 1})
            d = torch.compile(object(), mode="default")
            print(json.dumps([a["mode"], b["mode"], c["options"], d["mode"]]))
        """)
        self.assertEqual(run.code, 0, run.err)
        self.assertEqual(run.json_out(), ["default", "max-autotune-no-cudagraphs", {"triton.cudagraphs": False, "x": 1}, "default"])
        lines = run.err.splitlines()
        self.assertEqual(len(lines), 3, run.err)
        self.assertIn('torch.compile(mode="reduce-overhead")', lines[0])
        self.assertIn("checkPoolLiveAllocations", lines[0])

    def test_a_second_allocator_swap_names_the_conflict(self):
        run = support.run_script("""
            import os, torch
            other = torch.cuda.memory.CUDAPluggableAllocator(os.environ["GPUMEM_ALLOCATOR_SO"], "gpumem_malloc", "gpumem_free")
            for swap in (torch.cuda.memory.change_current_allocator, torch.cuda.change_current_allocator):
                try:
                    swap(other)
                except RuntimeError as exc:
                    print(exc)
        """)
        self.assertEqual(run.code, 0, run.err)
        lines = run.out.splitlines()
        self.assertEqual(len(lines), 2)
        for line in lines:
            self.assertTrue(line.startswith("gpumem: this workload installs its own CUDA allocator"), line)
            self.assertIn("GPUMEM_SESSION_DIR", line)

    def test_strict_compile_raises_naming_the_cause(self):
        run = support.run_script("""
            import torch
            torch.compile(object(), mode="reduce-overhead")
        """, env={"GPUMEM_STRICT_COMPILE": "1"})
        self.assertEqual(run.code, 1)
        self.assertIn('RuntimeError: gpumem: torch.compile(mode="reduce-overhead") cannot run under memory tracking', run.err)
        self.assertIn("checkPoolLiveAllocations", run.err)


class PreservationTest(unittest.TestCase):
    def test_exit_code_argv_cwd_main_and_stdin(self):
        cwd = support.new_dir("cwd")
        run = support.run_script("""
            import json, os, sys, torch
            torch.cuda.init()
            line = sys.stdin.readline().strip()
            if __name__ == "__main__":
                print(json.dumps({"argv": sys.argv, "cwd": os.getcwd(), "stdin": line}))
                sys.exit(7)
        """, args=["--lr", "0.1", "a b"], cwd=cwd, stdin="hello\n")
        self.assertEqual(run.code, 7, run.err)
        self.assertEqual(run.json_out(), {"argv": [run.script, "--lr", "0.1", "a b"], "cwd": cwd, "stdin": "hello"})
        self.assertEqual(run.err, "")
        self.assertIn("shutdown 7", run.log())

    def test_uncaught_exception_traceback_points_at_user_file(self):
        run = support.run_script("""
            import torch
            torch.cuda.init()
            def train():
                raise ValueError("diverged")  # RAISE_HERE
            train()
        """)
        self.assertEqual(run.code, 1)
        self.assertIn('File "%s", line %d, in train' % (run.script, support.line_of(run.script, "RAISE_HERE")), run.err)
        self.assertTrue(run.err.rstrip().endswith("ValueError: diverged"))
        self.assertIn("shutdown 1", run.log())

    def test_python_dash_m_runs_as_main(self):
        run = support.run_script("""
            import json, sys, torch
            torch.cuda.init()
            print(json.dumps({"name": __name__, "argv0": sys.argv[0], "rest": sys.argv[1:]}))
        """, module="trainmod", name="trainmod.py", args=["x"])
        self.assertEqual(run.code, 0, run.err)
        self.assertEqual(run.json_out(), {"name": "__main__", "argv0": run.script, "rest": ["x"]})

    def test_ctrl_c_raises_keyboardinterrupt_and_closes_the_capture(self):
        run = support.run_script("""
            import os, signal, time, torch
            torch.cuda.init()
            try:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(5)
            except KeyboardInterrupt:
                print("caught")
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)
        """)
        self.assertEqual(run.out.strip(), "caught")
        # Python re-raises an uncaught KeyboardInterrupt as SIGINT, as an untracked run would.
        self.assertEqual(run.code, -signal.SIGINT)
        self.assertIn("KeyboardInterrupt", run.err)
        self.assertIn("shutdown 130", run.log())


class LauncherTest(unittest.TestCase):
    def _launch(self, *args, env=None, cwd=None):
        out = support.new_dir("out")
        e = {k: v for k, v in os.environ.items() if not k.startswith(("GPUMEM_", "PYTHON"))}
        e["PYTHONPATH"] = str(support.PY_DIR)
        e.update(env or {})
        proc = subprocess.run([sys.executable, "-m", "gpumem", "run", "--out", out, "--allocator", "lens", "--allocator-so", support.stub_so(),
                               "--sample-ms", "0"] + list(args), env=e, capture_output=True, text=True, cwd=cwd, timeout=60)
        return proc, out

    def test_run_creates_a_private_session_and_returns_the_exit_code(self):
        work = support.new_dir("w")
        script = os.path.join(work, "my train.py")
        with open(script, "w") as f:
            f.write("import sys, torch\ntorch.cuda.init()\nprint(sys.argv[1:])\nsys.exit(3)\n")
        proc, out = self._launch("--", script, "--epochs", "1",
                                 env={"PYTHONPATH": os.pathsep.join([str(support.PY_DIR), str(support.FAKE_TORCH)])})
        self.assertEqual(proc.returncode, 3, proc.stderr)
        self.assertEqual(proc.stdout.strip(), "['--epochs', '1']")
        (session,) = os.listdir(out)
        self.assertRegex(session, r"^\d{8}-\d{6}-my-train$")
        sdir = os.path.join(out, session)
        self.assertEqual(os.stat(sdir).st_mode & 0o777, 0o700)
        with open(os.path.join(sdir, "session.json")) as f:
            info = json.load(f)
        self.assertEqual(info["command"], [sys.executable, script, "--epochs", "1"])
        captures = [f for f in os.listdir(sdir) if f.endswith(".gpumem")]
        self.assertEqual(len(captures), 1)
        self.assertIn("gpumem: capture %s" % os.path.join(sdir, captures[0]), proc.stderr)

    def test_run_dash_m_and_workload_flags_that_look_like_ours(self):
        work = support.new_dir("w")
        with open(os.path.join(work, "mod_x.py"), "w") as f:
            f.write("import sys\nprint(__name__, sys.argv[1:])\n")
        env = {"PYTHONPATH": os.pathsep.join([str(support.PY_DIR), work])}
        proc, _ = self._launch("-m", "mod_x", "--out", "y", env=env)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout.strip(), "__main__ ['--out', 'y']")

    def test_user_switches_reach_the_workload_and_stale_session_variables_do_not(self):
        work = support.new_dir("w")
        with open(os.path.join(work, "show_env.py"), "w") as f:
            f.write("import json, os\nprint(json.dumps({k: v for k, v in os.environ.items() if k.startswith('GPUMEM_')}))\n")
        # the switches that turn a recording part off (Note [Not recorded]) too: README's environment contract
        switches = {"GPUMEM_MODULE_PATHS": "0", "GPUMEM_TAGS": "0", "GPUMEM_KEEPER": "0", "GPUMEM_KEEPER_MS": "50"}
        env = {"PYTHONPATH": os.pathsep.join([str(support.PY_DIR), work]), "GPUMEM_GIL_FREE_WALK": "0",
               "GPUMEM_STRICT_COMPILE": "1", "GPUMEM_SESSION_DIR": "/stale/outer/session", "GPUMEM_FOO": "x", **switches}
        proc, out = self._launch("--", os.path.join(work, "show_env.py"), env=env)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        seen = json.loads(proc.stdout.strip().splitlines()[-1])
        self.assertEqual((seen["GPUMEM_GIL_FREE_WALK"], seen["GPUMEM_STRICT_COMPILE"]), ("0", "1"))
        self.assertEqual({k: seen.get(k) for k in switches}, switches)
        self.assertNotIn("GPUMEM_FOO", seen)
        self.assertTrue(seen["GPUMEM_SESSION_DIR"].startswith(out), seen["GPUMEM_SESSION_DIR"])

    def test_run_without_command_says_how(self):
        proc, _ = self._launch()
        self.assertEqual(proc.returncode, 1)
        self.assertIn("nothing to run", proc.stderr)

    def test_control_command_without_workload_is_clear(self):
        e = dict(os.environ, PYTHONPATH=str(support.PY_DIR))
        empty = support.new_dir("s")
        proc = subprocess.run([sys.executable, "-m", "gpumem", "ping", "--session", empty], env=e, capture_output=True, text=True)
        self.assertEqual(proc.returncode, 2)
        self.assertIn("no running workload process in %s" % empty, proc.stderr)


if __name__ == "__main__":
    unittest.main()
