"""Note [Probe switches off] (native/python/gpumem/_probe_off.py): which parts GPUMEM_PROBE_OFF names."""
import contextlib
import io
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "native", "python"))
from gpumem import _probe_off  # noqa: E402


class PartsOffTest(unittest.TestCase):
    def setUp(self):
        _probe_off._said.clear()

    def test_plus_or_comma_separated_in_the_parts_order(self):
        self.assertEqual(_probe_off.parts_off({"GPUMEM_PROBE_OFF": "writer+poll"}), ["poll", "writer"])
        self.assertEqual(_probe_off.parts_off({"GPUMEM_PROBE_OFF": " hooks , writer "}), ["hooks", "writer"])
        self.assertEqual(_probe_off.parts_off({"GPUMEM_PROBE_OFF": "all"}), ["poll", "hooks", "writer"])
        self.assertEqual(_probe_off.parts_off({}), [])

    def test_an_unknown_part_is_said_once_and_switches_nothing(self):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            self.assertEqual(_probe_off.parts_off({"GPUMEM_PROBE_OFF": "pol+writer"}), ["writer"])
            self.assertEqual(_probe_off.parts_off({"GPUMEM_PROBE_OFF": "pol"}), [])
        self.assertEqual(err.getvalue().count("unknown part pol"), 1)


if __name__ == "__main__":
    unittest.main()
