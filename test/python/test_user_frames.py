"""Note [User frames]: gpumem._where.is_user_file against the one table of cases,
native/format/user_frames_cases.json, which the reader's C++ rule (native/addon/tests) and the
TypeScript side (test/unit/user-frames.test.mjs, through the reader) pass too, and so do the reference
scripts the reader's tests compare against (test/unit/reference/snapshot_summary.py, owners_at.py)."""
import importlib.util
import json
import os
import sys
import types
import unittest

from support import PY_DIR, ROOT

TABLE = ROOT / "native" / "format" / "user_frames_cases.json"


def load_where():
    # By file, so the test needs neither torch nor the package's __init__.
    spec = importlib.util.spec_from_file_location("gpumem_where_under_test", PY_DIR / "gpumem" / "_where.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def load_reference(name):
    # The reference scripts of the reader's unit tests, by file (their main runs only as a script).
    spec = importlib.util.spec_from_file_location("gpumem_reference_" + name, ROOT / "test" / "unit" / "reference" / (name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class UserFrames(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.where = load_where()
        with open(TABLE, encoding="utf-8") as f:
            cls.table = json.load(f)

    def test_every_case_of_the_table(self):
        internal = self.table["internalDirs"]
        self.assertGreaterEqual(len(self.table["cases"]), 20)
        for case in self.table["cases"]:
            with self.subTest(path=case["path"], why=case["why"]):
                self.assertIs(self.where.is_user_file(case["path"], internal), case["user"], case["why"])

    def test_the_reference_scripts_follow_the_same_table(self):
        # They once kept their own copies of the rule (site-packages as a substring, lib/python[0-9.]+):
        # a summary computed by a different rule than the reader's would make the byte-for-byte
        # comparisons of test/unit disagree on owner lines for reasons that are no bug in the reader.
        internal = self.table["internalDirs"]
        summary, owners = load_reference("snapshot_summary"), load_reference("owners_at")
        summary.NON_USER_DIRS[:] = internal
        try:
            for case in self.table["cases"]:
                with self.subTest(path=case["path"], why=case["why"]):
                    self.assertIs(summary.is_user(case["path"]), case["user"], "snapshot_summary.py: " + case["why"])
                    self.assertIs(owners.is_user(case["path"], internal), case["user"], "owners_at.py: " + case["why"])
        finally:
            summary.NON_USER_DIRS[:] = []

    def test_user_location_skips_the_tools_and_library_frames(self):
        # A chain of fake frames, innermost first: gpumem's own code, the standard library, then the user's.
        def frame(filename, line, name, back):
            return types.SimpleNamespace(f_code=types.SimpleNamespace(co_filename=filename, co_name=name),
                                         f_lineno=line, f_back=back)

        user = frame("/home/u/proj/train.py", 42, "step", None)
        stdlib = frame("/usr/lib/python3.12/contextlib.py", 81, "inner", user)
        ours = frame(os.path.join(self.where._OURS, "_install.py"), 64, "hook", stdlib)
        self.assertEqual(self.where.user_location(ours), "/home/u/proj/train.py:42 in step")
        only_ours = frame(os.path.join(self.where._OURS, "_install.py"), 64, "hook", None)
        self.assertEqual(self.where.user_location(only_ours), os.path.join(self.where._OURS, "_install.py") + ":64 in hook")
        self.assertEqual(self.where.user_location(None), "an unknown place")


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(__file__))
    unittest.main()
