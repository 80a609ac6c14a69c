"""Every GPU workload and check under test/gpu/ arms a watchdog (faulthandler.dump_traceback_later(N,
exit=True)), so a stall on the device comes back as every thread's stack instead of a spent device budget.
N comes from GPUMEM_WATCHDOG_S or a default below the file's stage limit in run_all.sh."""
import ast
import os
import re
import unittest

import support

GPU = support.ROOT / "test" / "gpu"


def stage_limits():
    """{script file name: its stage's `timeout` in run_all.sh} for scripts run_all.sh names."""
    text = (GPU / "run_all.sh").read_text()
    out = {}
    for m in re.finditer(r"run_stage \S+ (\d+) (.*)", text):
        for script in re.findall(r"test/gpu/([\w/]+\.py)", m.group(2)):
            out[os.path.basename(script)] = min(out.get(os.path.basename(script), 10 ** 6), int(m.group(1)))
    return out


def watchdog_default(path):
    """The default N of the file's dump_traceback_later call, or None when it has none."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "dump_traceback_later":
            kw = {k.arg: k.value for k in node.keywords}
            if not (isinstance(kw.get("exit"), ast.Constant) and kw["exit"].value is True):
                return None
            text = ast.get_source_segment(path.read_text(), node.args[0])
            # the default may sit in an option (`--watchdog`, default from GPUMEM_WATCHDOG_S)
            m = re.search(r'"GPUMEM_WATCHDOG_S", "(\d+)"', text or "") or re.search(r'"GPUMEM_WATCHDOG_S", "(\d+)"', path.read_text())
            return int(m.group(1)) if m else (node.args[0].value if isinstance(node.args[0], ast.Constant) else -1)
    return None


class WatchdogTest(unittest.TestCase):
    def test_every_gpu_script_arms_a_watchdog_below_its_stage_limit(self):
        limits = stage_limits()
        self.assertIn("pytorch_mode_check.py", limits)
        scripts = sorted(GPU.rglob("*.py"))
        self.assertGreater(len(scripts), 40)
        for path in scripts:
            with self.subTest(str(path.relative_to(support.ROOT))):
                n = watchdog_default(path)
                self.assertIsNotNone(n, "no faulthandler.dump_traceback_later(N, exit=True)")
                self.assertGreater(n, 0)
                if path.name in limits:
                    self.assertLess(n, limits[path.name], "the watchdog must fire before the stage's timeout")


if __name__ == "__main__":
    unittest.main()
