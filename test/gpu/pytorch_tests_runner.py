#!/usr/bin/env python3
"""Run one unittest file in this process and write one JSON outcome per test (used by
pytorch_memory_tests.py, natively and under `gpumem run`).

    python3 test/gpu/pytorch_tests_runner.py TESTFILE --json OUT.json

OUT.json: {"torch": version, "tests": {"Class.test": {"outcome": "pass|fail|error|skip", "detail": "…"}}}.
Exit status 0 whatever the outcomes (they are the data); non-zero only if the file cannot be loaded.
"""
import faulthandler
import os

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "270")), exit=True)  # a stall comes back as a stack (below the stage's limit)
import argparse
import importlib.util
import json
import sys
import time
import traceback
import unittest


class _Result(unittest.TestResult):
    def __init__(self):
        super().__init__()
        self.outcomes = {}
        self._t0 = {}

    @staticmethod
    def _name(test):
        return "%s.%s" % (type(test).__name__, test._testMethodName)

    def _put(self, test, outcome, detail=""):
        name = self._name(test)
        self.outcomes[name] = {"outcome": outcome, "detail": detail,
                               "seconds": round(time.monotonic() - self._t0.get(name, time.monotonic()), 2)}
        print("%-70s %s %s" % (name, outcome, detail[:160]), flush=True)

    def startTest(self, test):
        self._t0[self._name(test)] = time.monotonic()
        super().startTest(test)

    def addSuccess(self, test):
        self._put(test, "pass")

    def addFailure(self, test, err):
        self._put(test, "fail", _last_line(err))

    def addError(self, test, err):
        self._put(test, "error", _last_line(err))

    def addSkip(self, test, reason):
        self._put(test, "skip", reason)

    def addExpectedFailure(self, test, err):
        self._put(test, "pass", "expected failure")

    def addUnexpectedSuccess(self, test):
        self._put(test, "fail", "unexpected success")


def _last_line(err):
    text = "".join(traceback.format_exception_only(err[0], err[1])).strip()
    return " ".join(text.split())[:600]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("testfile")
    ap.add_argument("--json", required=True)
    args = ap.parse_args()
    path = os.path.abspath(args.testfile)
    sys.path.insert(0, os.path.dirname(path))
    spec = importlib.util.spec_from_file_location(os.path.splitext(os.path.basename(path))[0], path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    suite = unittest.defaultTestLoader.loadTestsFromModule(module)
    result = _Result()
    suite.run(result)
    import torch  # already imported by the tests

    with open(args.json, "w") as f:
        json.dump({"torch": torch.__version__, "cuda": torch.cuda.is_available(), "tests": result.outcomes}, f, indent=1)


if __name__ == "__main__":
    main()
