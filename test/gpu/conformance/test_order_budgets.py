"""Budgets that must not depend on the order the tests run in (Note [pytest budgets] in native/python/gpumem/_pytest.py):
one test leaves 32 MiB live for the tests after it, which allocate their own. pytest_order_check.py runs this file
under `pytest -p gpumem` in file order and reversed, in both allocator modes; it is not part of any suite.

Each test writes what it measured itself to the JSON lines file named by ORDER_CHECK_SEEN: allocated at its first line
(what was live at its start) and the bytes it allocated (torch.cuda.memory_allocated() after its allocation minus
before). uint8 tensors of multiples of 512 bytes: what PyTorch's allocator and the lens count is the size asked for."""
import faulthandler
import json
import os

import pytest
import torch

# a stall comes back as a stack before the check's own limit on the run (RUN_TIMEOUT_S, 100 s)
faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "90")), exit=True)

KEEP = []  # what test_leaves_32mib leaves live for the tests after it


def record(name, start, before):
    torch.cuda.synchronize()
    with open(os.environ["ORDER_CHECK_SEEN"], "a") as f:
        f.write(json.dumps({"test": name, "start": start, "own": torch.cuda.memory_allocated() - before}) + "\n")


def test_leaves_32mib():
    start = torch.cuda.memory_allocated() if torch.cuda.is_initialized() else 0
    KEEP.append(torch.empty(32 << 20, dtype=torch.uint8, device="cuda"))  # LEAVES
    record("test_leaves_32mib", start, start)


@pytest.mark.gpu_memory(peak="64KiB")
def test_4kib():
    start = torch.cuda.memory_allocated() if torch.cuda.is_initialized() else 0
    x = torch.empty(4096, dtype=torch.uint8, device="cuda")  # SMALL
    record("test_4kib", start, start)
    del x


@pytest.mark.gpu_memory(peak="20MiB")
def test_16mib():
    start = torch.cuda.memory_allocated() if torch.cuda.is_initialized() else 0
    x = torch.empty(16 << 20, dtype=torch.uint8, device="cuda")  # MEDIUM
    record("test_16mib", start, start)
    del x


@pytest.mark.gpu_memory(peak="8MiB")
def test_over_budget():
    start = torch.cuda.memory_allocated() if torch.cuda.is_initialized() else 0
    x = torch.empty(24 << 20, dtype=torch.uint8, device="cuda")  # OVER
    record("test_over_budget", start, start)
    del x
