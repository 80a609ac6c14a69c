"""Workload: what PyTorch offers its own allocator keeps working under `gpumem run` (auto takes the
PyTorch-allocator mode): a MemPool, memory metadata, an out-of-memory observer, memory_stats() as Lightning's
DeviceStatsMonitor reads it, and the user's own memory history. Prints one RESULT line of facts the check compares
with a native run."""
import faulthandler
import os

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "240")), exit=True)
import json  # noqa: E402

import torch  # noqa: E402


def main():
    facts = {"mode": os.environ.get("GPUMEM_ALLOCATOR")}
    x = torch.ones(1 << 20, device="cuda")
    # MemPool: allocations inside use_mem_pool land in the pool's own segments.
    pool = torch.cuda.MemPool()
    with torch.cuda.use_mem_pool(pool):
        y = torch.empty(8 << 20, device="cuda")
    snap = torch.cuda.memory._snapshot()
    facts["pool_segments"] = sum(1 for s in snap["segments"] if tuple(s.get("segment_pool_id", (0, 0))) == tuple(pool.id))
    del y
    # The user's own history, with metadata on the allocations.
    torch.cuda.memory._record_memory_history(max_entries=1000)
    torch.cuda.memory._set_memory_metadata("stage=eval")
    z = torch.empty(4 << 20, device="cuda")
    torch.cuda.memory._set_memory_metadata("")
    snap = torch.cuda.memory._snapshot()
    allocs = [e for e in snap["device_traces"][0] if e["action"] == "alloc" and e["size"] == z.numel() * 4]
    facts["history_allocs"] = len(allocs)
    facts["metadata"] = sorted({e.get("user_metadata", "") for e in allocs})
    facts["history_frames"] = bool(allocs and allocs[0].get("frames"))
    torch.cuda.memory._record_memory_history(enabled=None)
    facts["traces_after_off"] = len(torch.cuda.memory._snapshot()["device_traces"][0])
    # An out-of-memory observer.
    seen = []
    torch._C._cuda_attach_out_of_memory_observer(lambda *a: seen.append(a[0]))
    try:
        torch.empty(1 << 46, dtype=torch.uint8, device="cuda")
    except torch.OutOfMemoryError:
        facts["oom_caught"] = True
    facts["oom_observer_calls"] = len(seen)
    # DeviceStatsMonitor reads torch.cuda.memory_stats(device) every step.
    stats = torch.cuda.memory_stats(0)
    facts["stats_keys"] = len(stats)
    facts["allocated_equals_stats"] = stats["allocated_bytes.all.current"] == torch.cuda.memory_allocated()
    facts["backend"] = torch.cuda.memory.get_allocator_backend()
    del x, z
    print("RESULT " + json.dumps(facts), flush=True)


if __name__ == "__main__":
    main()
