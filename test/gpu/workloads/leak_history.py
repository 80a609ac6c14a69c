"""Issue 17's leak workload: a training loop that keeps its losses with their graphs (history.append(loss)).
Prints RESULT {...}: allocated memory at every step end (torch.cuda.memory_allocated(), the lens's own figure
under `gpumem run`) and the forward line's number, so the check can compare the tool's finding with it.

    python3 leak_history.py [--steps N]
"""
import faulthandler
import os

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "240")), exit=True)  # a stall comes back as a stack (below the stage's limit)
import argparse
import gc
import inspect
import json

import torch
import torch.nn.functional as F


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=12)
    a = ap.parse_args()
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(1024, 1024) for _ in range(4)]).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(256, 1024, device="cuda")
    y = torch.randn(256, 1024, device="cuda")
    history = []
    at_end = []
    forward_line = inspect.currentframe().f_lineno + 3
    for _ in range(a.steps):
        opt.zero_grad(set_to_none=True)
        loss = F.mse_loss(model(x), y)  # the forward line: its loss is kept below, graph and all
        history.append(loss)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        at_end.append(torch.cuda.memory_allocated())
    # the line the bootstrap's leak keeper must name (Note [Leak keeper search]): where history is appended to
    keeper_line = next(i for i, l in enumerate(inspect.getsource(inspect.getmodule(main)).splitlines(), 1)
                       if l.strip().startswith("history.append(loss)"))
    print("RESULT " + json.dumps({"forward_line": forward_line, "keeper_line": keeper_line, "allocated_at_step_end": at_end,
                                  "steps": a.steps, "kept": len(history)}), flush=True)
    try:  # under `gpumem run`: what the keeper search's passes took (arm, confirm), in ms
        from gpumem import _keeper
    except ImportError:
        return
    w = _keeper._WATCH
    if w is not None:
        print("KEEPER " + json.dumps({"passes_ms": [round(s * 1000, 3) for s in w.seconds], "found": len(w.results),
                                      "gc_objects": len(gc.get_objects())}), flush=True)


if __name__ == "__main__":
    main()
