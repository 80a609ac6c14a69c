#!/usr/bin/env python3
"""Runs `unittest discover` and writes the results format (Note [Results format] in test/README.md): one JSON
line per test appended to $GPUMEM_RESULTS (nothing when it is unset). Output for people is unittest's -v text.

    python3 test/tools/results_unittest.py START_DIR [PATTERN]
"""
import json
import os
import sys
import time
import unittest


class JsonLinesResult(unittest.TextTestResult):
    # A script that runs its own tests (unittest.main) names them "__main__.Class.test"; set this to the
    # script's name so the lines of several scripts in one layer stay unique (test/native/recorder/common.py).
    main_module = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._file = os.environ.get("GPUMEM_RESULTS")
        self._layer = os.environ.get("GPUMEM_RESULTS_LAYER") or "unknown"
        self._t0 = {}

    def _emit(self, test, status, message=None):
        if not self._file:
            return
        start = self._t0.pop(test.id(), None)
        name = test.id()
        if self.main_module and name.startswith("__main__."):
            name = self.main_module + name[len("__main__"):]
        line = {"layer": self._layer, "name": name, "status": status,
                "ms": round((time.perf_counter() - start) * 1000, 3) if start is not None else 0}
        if message:
            line["message"] = message[:2000]
        with open(self._file, "a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")

    @staticmethod
    def _why(err):
        etype, value, _ = err
        text = "%s: %s" % (etype.__name__, value)
        return text.strip()

    def startTest(self, test):
        self._t0[test.id()] = time.perf_counter()
        super().startTest(test)

    def addSuccess(self, test):
        super().addSuccess(test)
        self._emit(test, "pass")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._emit(test, "fail", self._why(err))

    def addError(self, test, err):  # also setUpClass/module errors (test is an _ErrorHolder)
        super().addError(test, err)
        self._emit(test, "fail", self._why(err))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._emit(test, "skip", reason)

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._emit(test, "pass", "expected failure")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._emit(test, "fail", "unexpected success (the test is marked expectedFailure)")

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:  # a failing subtest fails its test; passing ones are part of it
            self._emit(subtest, "fail", self._why(err))


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: results_unittest.py START_DIR [PATTERN]")
    start = sys.argv[1]
    pattern = sys.argv[2] if len(sys.argv) > 2 else "test*.py"
    sys.path.insert(0, os.path.abspath(start))
    suite = unittest.defaultTestLoader.discover(start, pattern=pattern, top_level_dir=start)
    result = unittest.TextTestRunner(verbosity=2, resultclass=JsonLinesResult).run(suite)
    sys.exit(0 if result.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
