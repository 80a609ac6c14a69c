"""Tags through the C API (Note [Tags] in native/format/gpumem_format.h; Note [Batched tags] in
native/python/gpumem/_tags.py): gpumem_tags writes one REC_TAG per item, in order, as gpumem_tag would; a batch
with a bad item writes nothing and says which item.
Run: python3 test/native/recorder/test_tag_records.py"""
import ctypes
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import capture as cap  # noqa: E402
import common  # noqa: E402

F = cap.F
BATCH = [(0x7F0000001000, 4096, 1, 0), (0x7F0000200000, 1 << 20, 2, 0), (0x7E0000000000, 512, 3, 1)]


def scenario_tags(path):
    lib = common.load()
    lib.gpumem_tags.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
    lib.gpumem_tags.restype = ctypes.c_int
    common.configure(lib, capture_path=path, sim_devices=2)
    flat = [v for item in BATCH for v in item]
    ok = lib.gpumem_tags((ctypes.c_uint64 * len(flat))(*flat), len(BATCH))
    bad = [0x1000, 64, 2, 0, 0x2000, 64, 9, 0]  # item 1: no such category
    refused = lib.gpumem_tags((ctypes.c_uint64 * len(bad))(*bad), 2)
    error = lib.gpumem_last_error().decode()
    empty = lib.gpumem_tags(None, 0)
    single = lib.gpumem_tag(0x3000, 128, 2, None, 0)
    lib.gpumem_shutdown(0)
    print(json.dumps({"ok": ok, "refused": refused, "error": error, "empty": empty, "single": single}))


class TagRecords(unittest.TestCase):
    def test_a_batch_writes_each_tag_in_order_and_a_bad_batch_nothing(self):
        with tempfile.TemporaryDirectory(prefix="gpumem-tags-") as folder:
            path = os.path.join(folder, "c.gpumem")
            out = json.loads(common.run_scenario(__file__, "tags", path).strip().splitlines()[-1])
            tags = [(dev, F.TagRec.unpack_from(p)) for name, dev, _, p, _ in cap.Capture(path).records if name == "tag"]
        self.assertEqual((out["ok"], out["refused"], out["empty"], out["single"]), (0, -1, 0, 0))
        self.assertIn("item 1", out["error"])
        got = [(r[1], r[2], r[3], dev) for dev, r in tags]  # TagRec: t_ns, addr, size, category, name
        self.assertEqual(got, BATCH + [(0x3000, 128, 2, 0)], "the batch's tags, then the single one; none of the bad batch")
        times = [r[0] for _, r in tags]
        self.assertEqual(times, sorted(times))


if __name__ == "__main__":
    common.main({"tags": scenario_tags})
