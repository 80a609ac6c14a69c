#!/usr/bin/env python3
"""A training loop's allocation pattern, driven through the lens allocator's C API on the simulated device, with
the step facts the bootstrap writes (Note [Steps]): "backward" at each backward() end, "optimizer.step" at each
optimizer step end. Each kind of memory is allocated on its own line, so per-line figures are checkable.

    sim_training.py LIB.so OUT.gpumem STEPS [--leak BYTES] [--user-every K] [--accumulate K]

--leak BYTES     the loop keeps one BYTES tensor per step alive (history.append(loss) done wrong)
--user-every K   gpumem.step() (a MARK_STEP named "epoch-step") every K iterations: the override
--accumulate K   K backward() per optimizer step (gradient accumulation)
Prints one JSON line: the lines each kind was allocated on and the allocated bytes at each step end.
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "native", "recorder"))
import common  # noqa: E402

MARK_STEP = 4
MiB = 1 << 20


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("lib")
    ap.add_argument("capture")
    ap.add_argument("steps", type=int)
    ap.add_argument("--leak", type=int, default=0)
    ap.add_argument("--user-every", type=int, default=0)
    ap.add_argument("--accumulate", type=int, default=1)
    a = ap.parse_args()
    lib = common.load(a.lib)
    common.configure(lib, capture_path=a.capture, sim_capacity=1 << 30, segments="expandable", stacks=True)
    live = {}
    lines = {}

    def keep(p, size, kind):
        # the allocation is made on the caller's line (the innermost user frame is what the tool attributes)
        live[p] = size
        lines[kind] = sys._getframe(1).f_lineno
        return p

    def free(p):
        lib.gpumem_free(p, live.pop(p), 0, None)

    def mark(name):
        # a real loop spends microseconds between a step fact and its next allocation; the capture's times
        # are microseconds (Note [Step table])
        time.sleep(0.0002)
        lib.gpumem_mark(name, MARK_STEP)
        time.sleep(0.0002)

    m = lib.gpumem_malloc
    params = [keep(m(4 * MiB, 0, None), 4 * MiB, "param") for _ in range(3)]
    grads, state, history = [], [], []
    for it in range(a.steps * a.accumulate):
        acts = [keep(m(6 * MiB, 0, None), 6 * MiB, "act") for _ in range(4)]
        loss = keep(m(512, 0, None), 512, "loss")
        if a.leak:
            history.append(keep(m(a.leak, 0, None), a.leak, "leak"))
        lib.gpumem_backward_begin()
        tmp = keep(m(2 * MiB, 0, None), 2 * MiB, "tmp")
        if not grads:
            grads = [keep(m(4 * MiB, 0, None), 4 * MiB, "grad") for _ in range(3)]
        free(tmp)
        for p in acts:
            free(p)
        free(loss)
        lib.gpumem_backward_end()
        mark(b"backward")
        if (it + 1) % a.accumulate == 0:
            if not state:
                state = [keep(m(8 * MiB, 0, None), 8 * MiB, "state") for _ in range(3)]
            mark(b"optimizer.step")
            if a.user_every and ((it + 1) // a.accumulate) % a.user_every == 0:
                mark(b"epoch-step")
    lib.gpumem_shutdown(0)
    print(json.dumps({"lines": lines, "params": len(params), "history": len(history)}))


if __name__ == "__main__":
    main()
