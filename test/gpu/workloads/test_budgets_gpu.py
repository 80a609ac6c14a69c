"""Budgets on a real GPU, for the installed pytest plugin (`pip install native/python`, then `pytest -q` here with no
`-p gpumem`: the package's entry point wakes at the gpu_memory markers, Note [Dormant plugin] in
native/python/gpumem/_pytest.py). Expected: test_fits passes, test_over_budget fails with
"gpu_memory: peak allocated 64.0 MiB exceeds the budget peak=32.0 MiB by 32.0 MiB" naming its BIG line, and
test_unmarked passes unjudged. Native/floor/README.md (Note [ARM64]) gives the command for a Grace machine."""
import faulthandler
import os

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "120")), exit=True)  # a stall comes back as a stack
import pytest  # noqa: E402
import torch  # noqa: E402


@pytest.mark.gpu_memory(peak="40MiB", leak="0")
def test_fits():
    a = torch.empty(16 << 20, dtype=torch.uint8, device="cuda")
    b = torch.empty(16 << 20, dtype=torch.uint8, device="cuda")
    del a, b


@pytest.mark.gpu_memory(peak="32MiB")
def test_over_budget():
    big = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")  # BIG
    del big


def test_unmarked():
    assert torch.cuda.is_available()
