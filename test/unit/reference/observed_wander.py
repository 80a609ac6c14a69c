#!/usr/bin/env python3
"""A capture of PyTorch's allocator observed (the trace tracker's conversion, gpumem_observe_event) in which no
line keeps more tensors from step to step, yet a line's *blocks* grow at every step end: for test/unit/steps.test.mjs
(Note [Leak rule] in src/core/analyses/steps/leaks.ts).

    observed_wander.py LIB CAPTURE [--steps N]

Each step frees the last step's "gradient" (18 MiB asked) and a 2 MiB tensor from another line, then allocates the
2 MiB one further into the one 24 MiB segment than the step before, then the gradient at the segment's start. The
free run before the 2 MiB block is too little bigger than the gradient to be split (a remainder ≤ 1 MiB), so
PyTorch hands the gradient that whole run (Note [Observed block sizes] in native/allocator/src/observer.cc): its
block grows by 256 KiB a step while it asks for the same 18 MiB. A backward fact and an optimizer step end each step,
as the bootstrap writes them. Prints JSON: the lines and, per step, the gradient's block and request as the
observer recorded them.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "native", "python"))

MiB = 1 << 20
SEGMENT = 0x7F0000000000
USER = "/home/user/project/train.py"
ALLOC, FREE_REQUESTED, FREE_COMPLETED, SEGMENT_ALLOC = 0, 1, 2, 3


def main():
    from gpumem import _native, _observer_api

    lib, capture = sys.argv[1:3]
    steps = int(sys.argv[sys.argv.index("--steps") + 1]) if "--steps" in sys.argv else 6
    native = _native.Allocator(lib)
    native.configure({"capture_path": capture, "sample_interval_ms": 0, "user_roots": ["/home/user/project"],
                      "header": {"allocator_mode": "pytorch", "allocator_mode_reason": "test", "torch_version": "2.11.0"}})
    obs = _observer_api.Observer(native)
    obs.start(None, None)
    obs.device(0, "NVIDIA H100", 80 << 30, "")
    lines = {"grad": 40, "other": 33}
    grad_stack = obs.stack_of_frames([[USER, "train", lines["grad"]], [USER, "<module>", 60]])
    other_stack = obs.stack_of_frames([[USER, "train", lines["other"]], [USER, "<module>", 60]])
    obs.event(0, SEGMENT_ALLOC, SEGMENT, 24 * MiB, 0, grad_stack)
    recorded = []
    other_at = None
    for s in range(steps):
        if s:
            for addr in (SEGMENT, other_at):
                obs.event(0, FREE_REQUESTED, addr, 0, 0, 0)
                obs.event(0, FREE_COMPLETED, addr, 0, 0, 0)
        other_at = SEGMENT + 18 * MiB + 256 * 1024 * (s + 1)
        obs.event(0, ALLOC, other_at, 2 * MiB, 0, other_stack)
        obs.event(0, ALLOC, SEGMENT, 18 * MiB, 0, grad_stack)
        native.mark("backward", _native.MARK_STEP)
        native.mark("optimizer.step", _native.MARK_STEP)
        recorded.append(other_at - SEGMENT)
    native.shutdown(0)
    from gpumem import _format as F

    with open(capture, "rb") as f:
        data = f.read()
    _, _, _, off = F.read_header(data)
    grads = [F.BlockEvent.unpack_dict(p) for _, t, _, _, p in F.records(data, off)
             if t == F.REC_ALLOC and F.BlockEvent.unpack_dict(p)["addr"] == SEGMENT]
    print(json.dumps({"file": USER, "lines": lines,
                      "grad_blocks": [g["size"] for g in grads], "grad_requested": [g["requested"] for g in grads]}))


if __name__ == "__main__":
    main()
