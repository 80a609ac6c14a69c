"""PyTorch APIs a pluggable allocator breaks, used the way user code uses them (check (e)):
cudnn benchmark mode, torch.compile(mode="reduce-overhead"), snapshots, history, peak reset,
memory fraction, empty_cache. Prints one RESULT line."""
import faulthandler
import os

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "240")), exit=True)  # a stall comes back as a stack (below the stage's limit)
import json
import pickle
import sys

import torch

out = {}
torch.backends.cudnn.benchmark = True  # would crash in cuDNN's autotuner ("cacheInfo") if left on
out["benchmark_after_set"] = torch.backends.cudnn.benchmark
conv = torch.nn.Conv2d(16, 32, 3, padding=1).cuda()
x = torch.randn(8, 16, 64, 64, device="cuda", requires_grad=True)
y = conv(x)
y.sum().backward()
out["conv_shape"] = list(y.shape)


def f(a, b):
    return torch.nn.functional.gelu(a @ b) + 1


compiled = torch.compile(f, mode="reduce-overhead")
a = torch.randn(256, 256, device="cuda")
b = torch.randn(256, 256, device="cuda")
out["compiled_matches"] = bool(torch.allclose(compiled(a, b), f(a, b), atol=1e-4))
out["compiled_matches_again"] = bool(torch.allclose(compiled(a, b), f(a, b), atol=1e-4))

torch.cuda.memory._record_memory_history(max_entries=1000)  # accepted (recording is always on)
torch.cuda.memory._dump_snapshot(sys.argv[1])
with open(sys.argv[1], "rb") as fh:
    out["dump_keys"] = sorted(pickle.load(fh))
out["snapshot_segments"] = len(torch.cuda.memory_snapshot())

big = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")
del big
before = torch.cuda.memory_reserved()
torch.cuda.empty_cache()
out["empty_cache"] = [before, torch.cuda.memory_reserved()]
torch.cuda.reset_peak_memory_stats()
out["peak_after_reset_is_current"] = torch.cuda.max_memory_allocated() == torch.cuda.memory_allocated()
torch.cuda.set_per_process_memory_fraction(0.5)
out["fraction"] = torch.cuda.get_per_process_memory_fraction()
out["nested_peak"] = torch.cuda.memory_stats_as_nested_dict()["allocated_bytes"]["all"]["peak"]
out["backend"] = torch.cuda.memory.get_allocator_backend()
print("RESULT " + json.dumps(out))
