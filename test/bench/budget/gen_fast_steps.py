#!/usr/bin/env python3
"""A fast-step training loop on the simulated device, recorded by the real lens allocator:

    gen_fast_steps.py LIB.so OUT.gpumem STEPS [BUDGET_BYTES]

Few allocations a step and many records that a compaction cannot drop as block events: per step a phase begin for
backward and for the optimizer, the step facts that end them, module forward begins/ends around each of 12 blocks,
a gradient tag for each of 48 new .grad tensors, and parameter/optimizer-state tags on the first 3 steps and every
16th, as the bootstrap writes them (Note [Categories]); device samples every 2 ms. Such a run outgrew any budget
before Note [Budget as a cap]. Deterministic in its records but for the samples (times aside). Prints one JSON line.
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "native", "recorder"))
import common  # noqa: E402

KiB, MiB = 1 << 10, 1 << 20
PARAMS = 48
MARK_STEP, MARK_PHASE, MARK_MODULE_BEGIN, MARK_MODULE_END = 4, 5, 6, 7
TAG_PARAMETER, TAG_GRADIENT, TAG_OPTIMIZER_STATE = 1, 2, 3


def main():
    lib_path, out, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
    budget = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    lib = common.load(lib_path)
    cfg = dict(capture_path=out, sim_capacity=8 << 30, segments="fixed", stacks=True, sample_interval_ms=2,
               buffer_limit_bytes=1 << 30, user_roots=[os.path.dirname(os.path.abspath(__file__))])
    if budget:
        cfg["budget_bytes"] = budget
    common.configure(lib, **cfg)
    m, free, mark, tag = lib.gpumem_malloc, lib.gpumem_free, lib.gpumem_mark, lib.gpumem_tag
    params = [m(1 * MiB, 0, None) for _ in range(PARAMS)]  # line: parameters
    state = [m(2 * MiB, 0, None) for _ in range(PARAMS)]  # line: optimizer state
    names = [f"blocks.{k // 4}.w{k % 4}".encode() for k in range(PARAMS)]
    grads = []
    t0 = time.time()
    for s in range(steps):
        scale = 3 if s == (steps * 85) // 100 else 1  # the late peak
        acts = []
        for b in range(12):
            path = f"blocks.{b}".encode()
            mark(path, MARK_MODULE_BEGIN)
            acts.append(m(256 * KiB * scale, 0, None))  # line: block activations
            mark(path, MARK_MODULE_END)
        mark(b"backward", MARK_PHASE)
        for g in grads:
            free(g, 0, 0, None)
        grads = [m(1 * MiB, 0, None) for _ in range(PARAMS)]  # line: gradients
        for a in acts:
            free(a, 0, 0, None)
        mark(b"backward", MARK_STEP)
        mark(b"optimizer", MARK_PHASE)
        tmp = m(64 * KiB, 0, None)  # line: optimizer temporaries
        free(tmp, 0, 0, None)
        mark(b"optimizer.step", MARK_STEP)
        for k, g in enumerate(grads):
            tag(g, 1 * MiB, TAG_GRADIENT, names[k], 0)
        if s < 3 or s % 16 == 0:
            for k in range(PARAMS):
                tag(params[k], 1 * MiB, TAG_PARAMETER, names[k], 0)
                tag(state[k], 2 * MiB, TAG_OPTIMIZER_STATE, names[k], 0)
    for p in params + state + grads:
        free(p, 0, 0, None)
    lib.gpumem_shutdown(0)
    print(json.dumps({"steps": steps, "seconds": round(time.time() - t0, 1), "bytes": os.path.getsize(out)}))


if __name__ == "__main__":
    main()
