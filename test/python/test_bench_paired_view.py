"""Note [Paired view] (test/gpu/bench_allocator.py) on a real run's rounds: ResNet-50 steps on an H200, native, a
second native process and recording the first 10 steps (test/fixtures/bench_steps_resnet50_h200.json)."""
import os
import statistics
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "gpu"))
import bench_allocator  # noqa: E402  (imports no torch at module level)
import support  # noqa: E402

RECORD, AA = support.BENCH_RECORD10, "native:GPUMEM_AA=1"


class PairedViewTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.rounds = support.bench_step_rounds()

    def test_host_deltas_are_each_rounds_difference(self):
        v = bench_allocator.paired_view(self.rounds, "native", RECORD, "resnet50", 10)
        want = [r[RECORD]["resnet50"]["host_ms"] - r["native"]["resnet50"]["host_ms"] for r in self.rounds]
        self.assertEqual(len(v["host_delta_ms"]["rounds"]), 5)
        for got, w in zip(v["host_delta_ms"]["rounds"], want):
            self.assertAlmostEqual(got, w, places=3)
        self.assertAlmostEqual(v["host_delta_ms"]["mean"], statistics.mean(want), places=2)
        # this run's recording process issued its steps in more host time than native in every round
        self.assertTrue(all(d > 0 for d in v["host_delta_ms"]["rounds"]))

    def test_turns_pair_the_kth_turn_of_each(self):
        v = bench_allocator.paired_view(self.rounds, "native", RECORD, "resnet50", 10)
        self.assertEqual(v["turns"]["n"], 50)  # 5 rounds × 100 steps in turns of 10
        r0 = self.rounds[0]
        a, b = r0["native"]["resnet50"]["times_ms"], r0[RECORD]["resnet50"]["times_ms"]
        first = statistics.median(b[0:10]) / statistics.median(a[0:10])
        one = bench_allocator.paired_view([r0], "native", RECORD, "resnet50", 10)
        self.assertEqual(one["turns"]["n"], 10)
        # one turn a side: the pair is that turn's ratio
        single = bench_allocator.paired_view([{"native": {"m": {"host_ms": 1.0, "times_ms": a[:10]}},
                                               RECORD: {"m": {"host_ms": 1.0, "times_ms": b[:10]}}}],
                                             "native", RECORD, "m", 10)
        self.assertAlmostEqual(single["turns"]["median"], round(first, 4))

    def test_against_itself_and_swapped(self):
        same = bench_allocator.paired_view(self.rounds, AA, AA, "resnet50", 10)
        self.assertEqual(same["turns"]["median"], 1.0)
        self.assertEqual(same["host_delta_ms"]["rounds"], [0.0] * 5)
        there = bench_allocator.paired_view(self.rounds, "native", AA, "resnet50", 10)
        back = bench_allocator.paired_view(self.rounds, AA, "native", "resnet50", 10)
        for x, y in zip(there["host_delta_ms"]["rounds"], back["host_delta_ms"]["rounds"]):
            self.assertAlmostEqual(x, -y, places=3)

    def test_a_round_without_the_configuration(self):
        rounds = [dict(r) for r in self.rounds]
        del rounds[2][RECORD]
        v = bench_allocator.paired_view(rounds, "native", RECORD, "resnet50", 10)
        self.assertIsNone(v["host_delta_ms"]["rounds"][2])
        self.assertEqual(v["turns"]["n"], 40)
        none = bench_allocator.paired_view([{"native": {}}], "native", RECORD, "resnet50", 10)
        self.assertIsNone(none["host_delta_ms"]["mean"])
        self.assertIsNone(none["turns"]["median"])


if __name__ == "__main__":
    unittest.main()
