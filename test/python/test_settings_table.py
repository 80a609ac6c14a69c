"""The bootstrap hands every recording setting to the allocator under the key the settings table names
(Note [Settings table] in src/core/base/settings/table.ts; the table for Python is _settings.TABLE): whatever
builds gpumem_configure's JSON, each value read from its variable arrives as the table's `json` key.
test/unit/settings.test.mjs checks the rest of the chain (launchers, parsers, messages, both CLIs)."""
import json
import os
import sys
import unittest

import support

sys.path.insert(0, str(support.PY_DIR))
from gpumem import _settings  # noqa: E402

# A value other than the default for every setting the allocator reads (sim: the stub library records it all).
GIVEN = {"GPUMEM_SEGMENTS": "fixed", "GPUMEM_TRIM": "0", "GPUMEM_STACKS": "0", "GPUMEM_SAMPLE_MS": "50",
         "GPUMEM_BUDGET": "256MiB", "GPUMEM_BACKEND": "sim", "GPUMEM_SIM_CAPACITY": "2GiB"}


class SettingsReachTheAllocator(unittest.TestCase):
    def test_every_setting_the_allocator_reads_arrives_under_its_table_key(self):
        decls = [d for d in _settings.TABLE if d["json"]]
        self.assertEqual(sorted(d["env"] for d in decls), sorted(GIVEN), "a value for each setting the allocator reads")
        run = support.run_script("import torch; torch.cuda.init()", env=GIVEN)
        self.assertEqual(run.code, 0, run.err)
        config = json.loads(run.log()[0][len("configure "):])
        for d in decls:
            self.assertIn(d["json"], config, d["env"])
            self.assertEqual(config[d["json"]], _settings.parse_text(d, GIVEN[d["env"]], d["env"]), d["env"])

    def test_a_default_that_means_none_is_not_sent(self):
        # 0 is the table's "unbounded" budget: the allocator's absent key means the same
        run = support.run_script("import torch; torch.cuda.init()", env={"GPUMEM_BUDGET": "none"})
        self.assertEqual(run.code, 0, run.err)
        config = json.loads(run.log()[0][len("configure "):])
        self.assertNotIn("budget_bytes", config)
        self.assertNotIn("sim_capacity", config)

    def test_a_wrong_value_is_refused_with_the_tables_sentence_and_tracking_is_off(self):
        run = support.run_script("import torch; torch.cuda.init(); print('ran')", env={"GPUMEM_BUDGET": "1GB"})
        self.assertEqual(run.code, 0, run.err)
        self.assertEqual(run.out.strip(), "ran")
        self.assertIn("GPUMEM_BUDGET must be 0 (unbounded) or at least 1048576 bytes (1 MiB), got '1GB' "
                      "(GB is decimal; write GiB)", run.err)
        self.assertEqual([f for f in os.listdir(run.session) if f.endswith(".gpumem")], [], "no capture")


if __name__ == "__main__":
    unittest.main()
