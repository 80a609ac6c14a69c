"""GPU Memory Lens's sample budget tests: a GPU memory budget on each test. Run them from the Testing view
(GPU Memory budgets), or with `pytest` where gpumem is installed. A test fails when its peak allocated memory
is over `peak`; the failure names the lines that held the memory at the peak."""
import pytest
import torch


@pytest.mark.gpu_memory(peak="2MiB")
def test_small_batch_fits():
    batch = torch.empty(64 << 10, device="cuda")  # well under the budget
    del batch


@pytest.mark.gpu_memory(peak="2MiB")
def test_large_batch_over_budget():
    batch = torch.empty(4 << 20, device="cuda")  # over the budget: the failure names this line
    del batch
