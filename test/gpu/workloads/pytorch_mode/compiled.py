"""Workload: a model compiled with mode="reduce-overhead" (CUDA-graph trees and their private
pools). Saves its outputs to argv[1]; under the lens tool it also records a state (a snapshot) while the
graph pool is alive. Prints one RESULT line."""
import faulthandler
import os

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "240")), exit=True)
import json
import sys

import torch


def main():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.GELU(), torch.nn.Linear(2048, 512)).cuda().eval()
    fast = torch.compile(model, mode="reduce-overhead")
    x = torch.randn(64, 512, device="cuda", generator=torch.Generator("cuda").manual_seed(1))
    outs = []
    with torch.no_grad():
        for _ in range(6):
            outs.append(fast(x).clone())
    torch.cuda.synchronize()
    snap = torch.cuda.memory._snapshot()
    pools = sorted({tuple(s["segment_pool_id"]) for s in snap["segments"] if tuple(s.get("segment_pool_id", (0, 0))) != (0, 0)})
    offset = None
    if os.environ.get("GPUMEM_SESSION_DIR"):
        from gpumem._state import STATE

        offset = STATE.native.snapshot_to("")  # a REC_STATE now, while the graph pool holds memory
    torch.save([o.cpu() for o in outs], sys.argv[1])
    print("RESULT " + json.dumps({"graph_pools": [list(p) for p in pools], "state_offset": offset,
                                  "mode": os.environ.get("GPUMEM_ALLOCATOR")}))


if __name__ == "__main__":
    main()
