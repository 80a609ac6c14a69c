#!/usr/bin/env python3
"""A GPT-2-size training loop on the simulated device, recorded by the real lens allocator:

    gen_stream.py LIB.so OUT.gpumem EVENTS [BUDGET_BYTES]

Per step about 1,450 allocations (embedding, 12 blocks of attention and MLP activations and temporaries, loss,
gradients), all freed by the step's end except a slow leak (one 256 KiB block every 16 steps, kept), one late peak
(a long batch at 85 % of the run, activations ×1.5), a step fact marker per step, an empty_cache at 50 % and a
snapshot at 90 %. Deterministic: the same EVENTS give the same stream of records (times aside).
Prints one JSON line: events, steps, seconds.
"""
import ctypes
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "native", "recorder"))
import common  # noqa: E402

KiB, MiB = 1 << 10, 1 << 20
EVENTS_PER_ALLOC = 3  # alloc + free_requested + free_completed


class Loop:
    def __init__(self, lib):
        self.lib = lib
        self.malloc, self.free = lib.gpumem_malloc, lib.gpumem_free
        self.leak = []

    def alloc(self, size):
        return (self.malloc(size, 0, None), size)

    def release(self, blocks):
        free = self.free
        for p, s in blocks:
            free(p, s, 0, None)

    # Call sites: each is its own source line, so the summary's lines are these.
    def embedding(self, scale):
        return [self.malloc(int(6 * MiB * scale), 0, None)]  # line: embedding

    def attention(self, scale):
        m = self.malloc
        out = [m(int(2.25 * MiB * scale), 0, None) for _ in range(8)]  # line: attention qkv
        tmp = [m(int(3 * MiB * scale), 0, None) for _ in range(20)]  # line: attention scores
        for p in tmp:
            self.free(p, 0, 0, None)
        return out

    def mlp(self, scale):
        m = self.malloc
        out = [m(int(9 * MiB * scale), 0, None) for _ in range(6)]  # line: mlp hidden
        small = [m(64 * KiB, 0, None) for _ in range(20)]  # line: mlp bias
        for p in small:
            self.free(p, 0, 0, None)
        return out

    def backward(self, acts):
        m = self.malloc
        grads = [m(int(4.5 * MiB), 0, None) for _ in range(200)]  # line: backward grads
        for p in acts:
            self.free(p, 0, 0, None)
        return grads

    def step(self, scale, leak):
        acts = self.embedding(scale)
        for _ in range(12):
            acts += self.attention(scale)
            acts += self.mlp(scale)
        tmp = [self.malloc(512, 0, None) for _ in range(600)]  # line: loss scalars
        for p in tmp:
            self.free(p, 0, 0, None)
        grads = self.backward(acts)
        for p in grads:
            self.free(p, 0, 0, None)
        if leak:
            self.leak.append(self.malloc(256 * KiB, 0, None))  # line: slow leak
        self.lib.gpumem_mark(b"optimizer.step", 4)


ALLOCS_PER_STEP = 1 + 12 * (8 + 20 + 6 + 20) + 600 + 200  # 1,449 + the leak now and then


def main():
    lib_path, out, events = sys.argv[1], sys.argv[2], int(sys.argv[3])
    budget = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    lib = common.load(lib_path)
    cfg = dict(capture_path=out, sim_capacity=80 << 30, segments="fixed", stacks=True,
               buffer_limit_bytes=1 << 30, user_roots=[os.path.dirname(os.path.abspath(__file__))])
    if budget:
        cfg["budget_bytes"] = budget
    common.configure(lib, **cfg)
    loop = Loop(lib)
    weights = [lib.gpumem_malloc(int(2.25 * MiB), 0, None) for _ in range(148)]  # line: parameters
    steps = max(1, events // (ALLOCS_PER_STEP * EVENTS_PER_ALLOC))
    t0 = time.time()
    for s in range(steps):
        if s == steps // 2:
            lib.gpumem_empty_cache(-1, None, None, 0)
        if s == (steps * 9) // 10:
            lib.gpumem_snapshot(None)
        loop.step(1.5 if s == (steps * 85) // 100 else 1.0, s % 16 == 15)
    for p in weights + loop.leak:
        lib.gpumem_free(p, 0, 0, None)
    lib.gpumem_shutdown(0)
    print(json.dumps({"steps": steps, "events": steps * ALLOCS_PER_STEP * EVENTS_PER_ALLOC,
                      "seconds": round(time.time() - t0, 1), "bytes": os.path.getsize(out)}))


if __name__ == "__main__":
    main()
