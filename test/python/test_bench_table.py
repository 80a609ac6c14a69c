"""test/gpu/bench_table.py on a real run's rounds (test/fixtures/bench_steps_resnet50_h200.json: ResNet-50 on an
H200, native, a second native process and recording the first 10 steps; reduced to host, median and step times)."""
import os
import statistics
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
GPU = os.path.join(os.path.dirname(HERE), "gpu")
sys.path.insert(0, GPU)
import bench_allocator  # noqa: E402
import bench_table  # noqa: E402
import support  # noqa: E402

FIXTURE, RECORD = support.BENCH_STEPS_FIXTURE, support.BENCH_RECORD10


class BenchTableTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.rounds = support.bench_step_rounds()

    def test_settled_is_the_median_of_each_rounds_median_ratio(self):
        per_round = [r[RECORD]["resnet50"]["median_ms"] / r["native"]["resnet50"]["median_ms"] for r in self.rounds]
        got = bench_allocator.round_ratios(self.rounds, "native", RECORD, "resnet50", "median_ms")
        self.assertEqual(len(got["rounds"]), 5)
        for g, w in zip(got["rounds"], per_round):
            self.assertAlmostEqual(g, w, places=12)
        self.assertAlmostEqual(got["median"], statistics.median(per_round), places=12)
        # this run (H200, 2026-11-28) quoted ResNet-50 settled at ×1.018
        self.assertEqual("%.3f" % got["median"], "1.018")

    def test_a_figure_the_rounds_lack_is_none_not_zero(self):
        got = bench_allocator.round_ratios(self.rounds, "native", RECORD, "resnet50", "settling_ms")
        self.assertEqual(got, {"median": None, "rounds": [None] * 5})

    def test_rows_quote_each_configuration_against_the_first(self):
        rows = bench_table.rows(self.rounds, "H200")
        self.assertEqual(len(rows), 2)  # the second native process and the recording, against native
        aa, record = rows
        self.assertTrue(aa.startswith("| H200 | resnet50 | native:GPUMEM_AA=1 | **"))
        cells = [c.strip() for c in record.strip("|").split("|")]
        self.assertEqual(cells[:4], ["H200", "resnet50", RECORD, "**1.018**"])
        self.assertEqual(cells[4], "1.040 1.001 1.015 1.079 1.018")
        self.assertEqual(cells[5], "**–**")  # no settling times in the reduced fixture
        host = bench_allocator.paired_view(self.rounds, "native", RECORD, "resnet50", 10)["host_delta_ms"]["mean"]
        self.assertEqual(cells[8], "%+.2f" % host)
        self.assertEqual(cells[8], "+1.49")

    def test_the_command_prints_the_header_and_the_rows(self):
        out = subprocess.run([sys.executable, os.path.join(GPU, "bench_table.py"), FIXTURE, "--run", "H200"],
                             capture_output=True, text=True, check=True).stdout.splitlines()
        self.assertEqual(out[0], bench_table.HEADER.splitlines()[0])
        self.assertEqual(len(out), 4)
        self.assertIn("| **1.018** |", out[3])


if __name__ == "__main__":
    unittest.main()
