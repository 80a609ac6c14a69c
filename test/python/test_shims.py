"""The torch.cuda memory shims return the allocator's numbers in PyTorch 2.11's formats."""
import collections
import pickle
import unittest

import support

# PyTorch 2.11's memory_stats() keys, from the verified list in the allocator facts (§4): nine core
# stats × three pools × four metrics, two oversize stats × four metrics, six scalar counters.
_CORE = ["allocation", "segment", "active", "inactive_split", "allocated_bytes", "reserved_bytes",
         "active_bytes", "inactive_split_bytes", "requested_bytes"]
EXPECTED_KEYS = sorted(
    [f"{c}.{p}.{m}" for c in _CORE for p in ("all", "large_pool", "small_pool") for m in ("current", "peak", "allocated", "freed")]
    + [f"oversize_{o}.{m}" for o in ("allocations", "segments") for m in ("current", "peak", "allocated", "freed")]
    + ["num_alloc_retries", "num_ooms", "num_sync_all_streams", "num_device_alloc", "num_device_free", "max_split_size"]
)


def pytorch_memory_summary(stats, device=0, abbreviated=False):
    """PyTorch 2.11's torch.cuda.memory_summary formatting (torch/cuda/memory.py), applied to a stats
    dict: the reference our output must equal byte for byte."""
    def _format_size(sz, pref_sz):
        prefixes = ["B  ", "KiB", "MiB", "GiB", "TiB", "PiB"]
        prefix = prefixes[0]
        for new_prefix in prefixes[1:]:
            if pref_sz < 768 * 1024:
                break
            prefix = new_prefix
            sz //= 1024
            pref_sz /= 1024
        return f"{sz:6d} {prefix}"

    def _format_count(cnt, pref_cnt):
        prefixes = [" ", "K", "M"]
        prefix = prefixes[0]
        for new_prefix in prefixes[1:]:
            if pref_cnt < 750 * 1000:
                break
            prefix = new_prefix
            cnt //= 1000
            pref_cnt /= 1000
        return f"{cnt:7d} {prefix} "

    metrics_to_display = [
        ("allocated_bytes", "Allocated memory", _format_size),
        ("active_bytes", "Active memory", _format_size),
        ("requested_bytes", "Requested memory", _format_size),
        ("reserved_bytes", "GPU reserved memory", _format_size),
        ("inactive_split_bytes", "Non-releasable memory", _format_size),
        ("allocation", "Allocations", _format_count),
        ("active", "Active allocs", _format_count),
        ("segment", "GPU reserved segments", _format_count),
        ("inactive_split", "Non-releasable allocs", _format_count),
    ]
    lines = []
    lines.append("=" * 75)
    lines.append(" {_:16} PyTorch CUDA memory summary, device ID {device:<17d} ")
    lines.append("-" * 75)
    lines.append("  {_:9} CUDA OOMs: {num_ooms:<12d} | {_:6} cudaMalloc retries: {num_alloc_retries:<8d}  ")
    lines.append("=" * 75)
    lines.append("        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  ")
    for metric_key, metric_name, formatter in metrics_to_display:
        lines.append("-" * 75)
        submetrics = [("all", metric_name)]
        if not abbreviated:
            submetrics.append(("large_pool", "      from large pool"))
            submetrics.append(("small_pool", "      from small pool"))
        current_prefval, peak_prefval, allocated_prefval, freed_prefval = None, None, None, None
        for submetric_key, submetric_name in submetrics:
            prefix = metric_key + "." + submetric_key + "."
            current = stats[prefix + "current"]
            peak = stats[prefix + "peak"]
            allocated = stats[prefix + "allocated"]
            freed = stats[prefix + "freed"]
            if current_prefval is None:
                current_prefval = current
                peak_prefval = peak
                allocated_prefval = allocated
                freed_prefval = freed
            lines.append(
                f" {submetric_name:<21} | {formatter(current, current_prefval)} | {formatter(peak, peak_prefval)} | "
                f"{formatter(allocated, allocated_prefval)} | {formatter(freed, freed_prefval)} ",
            )
    metrics_to_display = [
        ("oversize_allocations", "Oversize allocations", _format_count),
        ("oversize_segments", "Oversize GPU segments", _format_count),
    ]
    for metric_key, metric_name, formatter in metrics_to_display:
        lines.append("-" * 75)
        prefix = metric_key + "."
        current = stats[prefix + "current"]
        peak = stats[prefix + "peak"]
        allocated = stats[prefix + "allocated"]
        freed = stats[prefix + "freed"]
        lines.append(
            f" {metric_name:<21} | {formatter(current, current)} | {formatter(peak, peak)} | "
            f"{formatter(allocated, allocated)} | {formatter(freed, freed)} ",
        )
    lines.append("=" * 75)
    fmt_dict = {"_": "", "device": device}
    for k, v in stats.items():
        fmt_dict[k.replace(".", "-")] = v
    return "|" + "|\n|".join(lines).format(**fmt_dict) + "|\n"


WORKLOAD = """
import json, torch
before = {"allocated": torch.cuda.memory_allocated(), "stats": dict(torch.cuda.memory_stats()),
          "nested": torch.cuda.memory_stats_as_nested_dict()}
a = torch.empty(3000, device="cuda")
b = torch.empty(5 << 20, device="cuda")
b.free()
stats = torch.cuda.memory_stats()
print(json.dumps({
    "before": before,
    "allocated": torch.cuda.memory_allocated(),
    "allocated_m": torch.cuda.memory.memory_allocated(0),
    "reserved": torch.cuda.memory_reserved("cuda:0"),
    "max_allocated": torch.cuda.max_memory_allocated(),
    "max_reserved": torch.cuda.memory.max_memory_reserved(),
    "ordered": type(stats).__name__,
    "keys": list(stats.keys()),
    "stats": stats,
    "nested_peak": torch.cuda.memory_stats_as_nested_dict()["allocated_bytes"]["all"]["peak"],
    "summary": torch.cuda.memory_summary(),
    "summary_abbrev": torch.cuda.memory.memory_summary(abbreviated=True),
}))
"""


class ShimTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.run_ = support.run_script(WORKLOAD)
        if cls.run_.code != 0:
            raise AssertionError(cls.run_.err)
        cls.out = cls.run_.json_out()

    def test_before_cuda_init_like_pytorch(self):
        # PyTorch returns 0 / {} before CUDA initialises; so must we (no allocator call yet).
        self.assertEqual(self.out["before"], {"allocated": 0, "stats": {}, "nested": {}})

    def test_numbers_are_the_allocators(self):
        self.assertEqual(self.out["allocated"], 3000)
        self.assertEqual(self.out["allocated_m"], 3000)
        self.assertEqual(self.out["max_allocated"], 3000 + (5 << 20))
        # The stub reserves whole 2 MiB segments: ceil((3000 + 5 MiB) / 2 MiB) = 3 segments.
        self.assertEqual(self.out["max_reserved"], 3 * (2 << 20))
        self.assertEqual(self.out["reserved"], 3 * (2 << 20))
        self.assertEqual(self.out["nested_peak"], self.out["max_allocated"])

    def test_memory_stats_has_exactly_the_2_11_keys_in_pytorch_order(self):
        self.assertEqual(len(EXPECTED_KEYS), 122)
        self.assertEqual(self.out["ordered"], "OrderedDict")
        self.assertEqual(self.out["keys"], EXPECTED_KEYS)
        self.assertNotIn("not_a_2_11_key", self.out["stats"])
        self.assertEqual(self.out["stats"]["allocated_bytes.all.freed"], 5 << 20)
        self.assertEqual(self.out["stats"]["active_bytes.all.current"], 0)  # not reported by the stub → 0

    def test_memory_summary_is_pytorchs_layout(self):
        stats = collections.OrderedDict(self.out["stats"])
        self.assertEqual(self.out["summary"], pytorch_memory_summary(stats))
        self.assertEqual(self.out["summary_abbrev"], pytorch_memory_summary(stats, abbreviated=True))
        # And the values really are ours: 3000 B current, peak in KiB (5 MiB + 3000 B ≥ 768 KiB).
        row = next(l for l in self.out["summary"].splitlines() if l.startswith("| Allocated memory"))
        self.assertEqual(row, "| Allocated memory      |   3000 B   |   %4d KiB |   %4d KiB |   %4d KiB |"
                         % ((3000 + (5 << 20)) // 1024, (3000 + (5 << 20)) // 1024, (5 << 20) // 1024))


class SnapshotAndResetTest(unittest.TestCase):
    def test_snapshot_dump_reset_fraction_history(self):
        run = support.run_script("""
            import json, pickle, torch, warnings
            torch.cuda.memory._record_memory_history(max_entries=100)   # accepted, no-op
            t = torch.empty(4096, device="cuda")
            torch.cuda.memory._dump_snapshot("snap.pickle")
            snap = torch.cuda.memory._snapshot()
            segs = torch.cuda.memory_snapshot()
            torch.cuda.reset_peak_memory_stats()
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                torch.cuda.reset_max_memory_allocated()
            torch.cuda.reset_accumulated_memory_stats(0)
            torch.cuda.set_per_process_memory_fraction(0.5)
            torch.cuda.empty_cache()
            print(json.dumps({"snap": snap, "segs": segs, "fraction": torch.cuda.get_per_process_memory_fraction(),
                              "fraction_m": torch.cuda.memory.get_per_process_memory_fraction(0),
                              "warned": [str(x.category.__name__) for x in w]}))
        """)
        self.assertEqual(run.code, 0, run.err)
        out = run.json_out()
        with open(run.script.replace("script.py", "snap.pickle"), "rb") as f:
            dumped = pickle.load(f)
        self.assertEqual(dumped, {"segments": [], "device_traces": [[]], "allocated": 4096})
        self.assertEqual(out["snap"], dumped)
        self.assertEqual(out["segs"], [])
        self.assertEqual(out["fraction"], 0.5)
        self.assertEqual(out["fraction_m"], 0.5)
        self.assertEqual(out["warned"], ["FutureWarning"])
        log = run.log()
        # The hooks reached the allocator: init at CUDA init, fraction (×1000) and reset (empty_cache).
        self.assertIn("init 1", log)
        self.assertIn("fraction 500", log)
        self.assertIn("reset", log)
        self.assertEqual([l for l in log if l.startswith("reset_")], ["reset_peak 0", "reset_peak 0", "reset_accumulated 0"])


if __name__ == "__main__":
    unittest.main()


class SummaryFormatTest(unittest.TestCase):
    """Our formatter against PyTorch's over many magnitudes (B/KiB/…/PiB sizes, K/M counts, the
    'all' row choosing the unit for the pool rows)."""

    def test_matches_pytorch_for_random_stats(self):
        import random
        import sys

        sys.path.insert(0, str(support.PY_DIR))
        try:
            from gpumem import _stats, _summary
        finally:
            sys.path.remove(str(support.PY_DIR))
        rng = random.Random(5)
        for _ in range(300):
            raw = {k: rng.choice([0, rng.randrange(1 << 10), rng.randrange(1 << 30), rng.randrange(1 << 52), rng.randrange(10 ** 9)])
                   for k in EXPECTED_KEYS}
            stats = _stats.flat_stats(raw)
            device = rng.randrange(8)
            for abbreviated in (False, True):
                self.assertEqual(_summary.format_summary(stats, device, abbreviated),
                                 pytorch_memory_summary(stats, device, abbreviated))


ACCELERATOR_WORKLOAD = """
import json, torch
before = {"stats": dict(torch.accelerator.memory_stats()), "allocated": torch.accelerator.memory_allocated(),
          "max_reserved": torch.accelerator.max_memory_reserved()}
a = torch.empty(3000, device="cuda")
b = torch.empty(5 << 20, device="cuda")
b.free()
try:
    torch.accelerator.memory_allocated(device_index=0)
    kw_error = None
except TypeError as e:
    kw_error = "TypeError"
out = {
    "before": before,
    "same_as_cuda": torch.accelerator.memory_stats() == torch.cuda.memory_stats(),
    "keys": len(torch.accelerator.memory.memory_stats(0)),
    "allocated": torch.accelerator.memory_allocated(),
    "allocated_m": torch.accelerator.memory.memory_allocated(0),
    "allocated_dev": torch.accelerator.memory_allocated("cuda:0"),
    "reserved": torch.accelerator.memory_reserved(),
    "max_allocated": torch.accelerator.max_memory_allocated(0),
    "max_reserved": torch.accelerator.memory.max_memory_reserved(),
    "freed": torch.accelerator.memory_stats()["allocated_bytes.all.freed"],
    "meminfo": list(torch.accelerator.get_memory_info(0)),
    "kw_error": kw_error,
    "is_shim": torch.accelerator.memory_stats is torch.accelerator.memory.memory_stats,
}
torch.accelerator.reset_peak_memory_stats()
torch.accelerator.memory.reset_accumulated_memory_stats(0)
torch.accelerator.empty_cache()
print(json.dumps(out))
"""


class AcceleratorShimTest(unittest.TestCase):
    """torch.accelerator.* report PyTorch's idle native allocator under a pluggable one:
    the shims give our allocator's numbers under both spellings, with PyTorch's signatures."""

    @classmethod
    def setUpClass(cls):
        cls.run_ = support.run_script(ACCELERATOR_WORKLOAD)
        if cls.run_.code != 0:
            raise AssertionError(cls.run_.err)
        cls.out = cls.run_.json_out()

    def test_before_cuda_init_like_pytorch(self):
        self.assertEqual(self.out["before"], {"stats": {}, "allocated": 0, "max_reserved": 0})

    def test_numbers_are_the_allocators(self):
        out = self.out
        self.assertTrue(out["same_as_cuda"])
        self.assertEqual(out["keys"], 122)
        self.assertEqual([out["allocated"], out["allocated_m"], out["allocated_dev"]], [3000, 3000, 3000])
        self.assertEqual(out["max_allocated"], 3000 + (5 << 20))
        self.assertEqual(out["reserved"], 3 * (2 << 20))  # the stub's three 2 MiB segments
        self.assertEqual(out["max_reserved"], 3 * (2 << 20))
        self.assertEqual(out["freed"], 5 << 20)
        self.assertTrue(out["is_shim"])

    def test_memory_info_is_the_drivers_and_signatures_are_positional_only(self):
        # get_memory_info goes to torch.cuda.mem_get_info (the fake's 79/80 GiB), not PyTorch's allocator.
        self.assertEqual(self.out["meminfo"], [79 << 30, 80 << 30])
        self.assertEqual(self.out["kw_error"], "TypeError")

    def test_resets_and_empty_cache_reach_our_allocator(self):
        log = self.run_.log()
        self.assertEqual([l for l in log if l.startswith("reset_")], ["reset_peak 0", "reset_accumulated 0"])
        self.assertIn("reset", log)  # empty_cache → the reset hook


class FeatureDetectionTest(unittest.TestCase):
    """A torch without an API is not given one (torch 2.4–2.7 have no torch.accelerator memory APIs)."""

    def _names(self, accelerator):
        run = support.run_script("""
            import json, torch
            acc = getattr(torch, "accelerator", None)
            print(json.dumps({"has_accelerator": acc is not None,
                              "get_memory_info": hasattr(acc, "get_memory_info"),
                              "stats_module": getattr(getattr(acc, "memory_stats", None), "__module__", None),
                              "cuda_allocated": (torch.empty(512, device="cuda"), torch.cuda.memory_allocated())[1]}))
        """, env={"FAKE_TORCH_ACCELERATOR": accelerator})
        self.assertEqual(run.code, 0, run.err)
        return run.json_out()

    def test_torch_2_8_has_no_get_memory_info_and_gets_none(self):
        out = self._names("2.8")
        self.assertEqual(out["has_accelerator"], True)
        self.assertEqual(out["get_memory_info"], False)
        self.assertEqual(out["stats_module"], "gpumem._shims")
        self.assertEqual(out["cuda_allocated"], 512)

    def test_torch_without_accelerator_gets_none(self):
        out = self._names("none")
        self.assertEqual(out["has_accelerator"], False)
        self.assertEqual(out["cuda_allocated"], 512)


class MemPoolTest(unittest.TestCase):
    def test_mempool_says_why_and_which_mode(self):
        run = support.run_script("""
            import json, torch
            try:
                torch.cuda.MemPool()
                err = None
            except RuntimeError as e:
                err = str(e)
            print(json.dumps({"err": err, "same": torch.cuda.MemPool is torch.cuda.memory.MemPool,
                              "base": torch.cuda.MemPool.__mro__[1].__module__}))
        """)
        self.assertEqual(run.code, 0, run.err)
        out = run.json_out()
        self.assertTrue(out["err"].startswith("gpumem: torch.cuda.MemPool cannot be created under the lens allocator"),
                        out["err"])
        self.assertIn("createOrIncrefPool", out["err"])
        self.assertIn('gpuMemoryLens.allocator: "pytorch"', out["err"])
        self.assertTrue(out["same"])
        self.assertEqual(out["base"], "torch.cuda.memory")  # still a subclass of PyTorch's class
