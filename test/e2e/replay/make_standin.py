"""Write a stand-in capture of test/e2e/workspace/live_sample.py for the replay workload.

Until a capture recorded on a GPU with our allocator lands as test/fixtures/h200-e2e-train.capture, this
writes one with the same record layout (native/format/gpumem_format.h), modelling what the sample's
lines allocate on a caching allocator: parameters once, Adam state on the first step, activations and
gradients every step, 2 MiB-rounded large-pool segments reused from the cache, a device-memory sample
every 200 ms (CUDA context and libraries = 520 MiB), and a REC_STATS per step.

Usage: python3 make_standin.py OUT.gpumem [--sample PATH] [--steps N] [--step-ms MS]
Frames name the sample by the path it would have on the recording host (/home/user/project/…), so the
extension has to match it to the workspace copy by path suffix, as with a capture copied from a cluster.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpumem_records as R  # noqa: E402

MiB = 1 << 20
RECORDED_AS = "/home/user/project/live_sample.py"
STREAM = 0
CONTEXT_BYTES = 520 * MiB
DEVICE_TOTAL = 80 * 1024 * MiB


def find_line(lines, text):
    for i, line in enumerate(lines, 1):
        if text in line:
            return i
    raise SystemExit(f"make_standin: the sample has no line containing {text!r}; update make_standin.py with the sample")


class Writer:
    def __init__(self, out, sample_lines, t0_ns):
        self.out = out
        self.t = t0_ns
        self.strings = {}
        self.frames = {}
        self.stacks = {}
        self.lines = sample_lines
        self.next_addr = 0x7F0000000000
        self.segments = {}  # addr -> size
        self.free_cached = {}  # size -> [addr] (whole free segments in the cache)
        self.allocated = 0
        self.reserved = 0
        self.peak_alloc = 0
        self.peak_res = 0
        self.gap_us = 200  # capture time between two events

    def emit(self, rtype, payload, flags=0):
        self.out.write(R.record(rtype, payload, 0, flags))

    def string(self, s):
        if s not in self.strings:
            sid = len(self.strings) + 1
            self.strings[s] = sid
            b = s.encode()
            self.emit(R.REC_STRING, R.STRING.pack(sid, len(b)) + b)
        return self.strings[s]

    def frame(self, line, func):
        key = (line, func)
        if key not in self.frames:
            fid = len(self.frames) + 1
            self.frames[key] = fid
            self.emit(R.REC_FRAME, R.FRAME.pack(fid, self.string(RECORDED_AS), self.string(func), line))
        return self.frames[key]

    def stack(self, text, backward=False):
        """Stack of an allocation made on the sample's line containing `text`, called from main()."""
        inner = find_line(self.lines, text)
        outer = find_line(self.lines, "    main()")
        key = (inner, backward)
        if key not in self.stacks:
            fids = [self.frame(inner, "main"), self.frame(outer, "<module>")]
            sid = len(self.stacks) + 1
            self.stacks[key] = sid
            self.emit(R.REC_STACK, R.F.pack_stack(sid, R.STACK_BACKWARD if backward else 0, fids))
        return self.stacks[key]

    def tick(self, us):
        self.t += int(us * 1000)

    def alloc(self, size, text, backward=False):
        sid = self.stack(text, backward)
        seg = (size + 2 * MiB - 1) // (2 * MiB) * (2 * MiB)
        cached = self.free_cached.get(seg)
        if cached:
            addr = cached.pop()
        else:
            addr = self.next_addr
            self.next_addr += seg + 2 * MiB
            self.segments[addr] = seg
            self.reserved += seg
            self.emit(R.REC_SEGMENT_ALLOC, R.SEGMENT_EVENT.pack(self.t, addr, seg, STREAM, 0, 0, sid, 0), R.POOL_LARGE)
        self.emit(R.REC_ALLOC, R.BLOCK_EVENT.pack(self.t, addr, seg, size, STREAM, sid, 1 if backward else 0), R.POOL_LARGE)
        self.allocated += seg
        self.peak_alloc = max(self.peak_alloc, self.allocated)
        self.peak_res = max(self.peak_res, self.reserved)
        self.tick(self.gap_us)
        return (addr, seg, size)

    def free(self, block):
        addr, seg, size = block
        for rtype in (R.REC_FREE_REQUESTED, R.REC_FREE_COMPLETED):
            self.emit(rtype, R.BLOCK_EVENT.pack(self.t, addr, seg, size, STREAM, 0, 0), R.POOL_LARGE)
        self.allocated -= seg
        self.free_cached.setdefault(seg, []).append(addr)
        self.tick(self.gap_us / 2)

    def stats(self):
        self.emit(R.REC_STATS, R.STATS.pack(self.t, self.allocated, self.reserved, self.allocated, self.allocated, self.peak_alloc, self.peak_res, 0, 0))

    def sample(self):
        used = self.reserved + CONTEXT_BYTES
        self.emit(R.REC_DEVICE_SAMPLE, R.DEVICE_SAMPLE.pack(self.t, used, DEVICE_TOTAL, used))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--sample", default=os.path.join(here, "..", "workspace", "live_sample.py"))
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--step-ms", type=float, default=500.0)
    ap.add_argument("--oom", action="store_true", help="end with an out-of-memory at the forward pass (the process dies of it)")
    args = ap.parse_args()
    with open(args.sample, encoding="utf-8") as f:
        lines = f.read().splitlines()

    t0_ns = 1_000_000_000_000  # CLOCK_MONOTONIC of the recording host (arbitrary; anchors map it)
    wall0_ns = 1_795_000_000_000_000_000  # 2026-11-18, the wall clock at t0_ns
    # Same keys as the allocator's header (native/allocator/src/recorder.cc), plus a note saying what this is.
    header = {
        "producer": "gpumem-allocator",
        "allocator_version": "stand-in",
        "pid": 4242,
        "rank": 0,
        "local_rank": 0,
        "world_size": 1,
        "host": "gpu-host",
        "argv": ["live_sample.py"],
        "cwd": "/home/user/project",
        # the clock anchors, in their one spelling (FORMAT.md "Header JSON")
        "mono_anchor_ns": t0_ns,
        "wall_anchor_ns": wall0_ns,
        "backend": "cuda",
        "segments": "fixed",
        "stacks": True,
        "user_roots": ["/home/user/project"],
        "standin": "written by test/e2e/replay/make_standin.py, not recorded on a GPU",
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "wb") as out:
        out.write(R.file_header(header))
        w = Writer(out, lines, t0_ns)
        w.emit(R.REC_DEVICE, R.DEVICE.pack(w.t, DEVICE_TOTAL, w.string("NVIDIA H200 (stand-in)"), 0))
        w.sample()
        w4096 = 4096 * 4096 * 4  # 64 MiB of fp32 weights
        bias = 4096 * 4
        params = [w.alloc(n, "torch.nn.Linear(4096, 4096)") for n in (w4096, bias, w4096, bias)]
        data = w.alloc(2048 * 4096 * 4, 'data = torch.randn')
        adam = []
        step_us = args.step_ms * 1000
        last_sample = w.t
        # a step's ~24 events spread over most of it, so the figures move at any moment of the stream
        w.gap_us = step_us / 30
        for step in range(args.steps):
            t_step = w.t
            h = w.alloc(2048 * 4096 * 4, "out = model(data)")  # first Linear's output
            r = w.alloc(2048 * 4096 * 4, "out = model(data)")  # ReLU output
            out_ = w.alloc(2048 * 4096 * 4, "out = model(data)")
            sq = w.alloc(2048 * 4096 * 4, "loss = out.square()")
            loss = w.alloc(512, "loss = out.square()")
            w.free(sq)
            grad_out = w.alloc(2048 * 4096 * 4, "loss.backward()", backward=True)
            grads = [w.alloc(n, "loss.backward()", backward=True) for n in (w4096, bias, w4096, bias)]
            w.free(grad_out)
            for b in (h, r, out_):
                w.free(b)
            if step == 0:
                adam = [w.alloc(n, "opt.step()") for n in (w4096, bias, w4096, bias) for _ in range(2)]
            tmp = w.alloc(w4096, "opt.step()")
            w.free(tmp)
            for g in grads:
                w.free(g)
            w.free(loss)
            w.stats()
            # spread the step over step_ms of capture time, with device samples every 200 ms
            target_ns = t_step + int(step_us * 1000)
            while w.t < target_ns:
                w.tick(min(50_000, (target_ns - w.t) / 1000))  # µs
                if w.t - last_sample >= 200_000_000:
                    w.sample()
                    last_sample = w.t
        w.sample()
        w.stats()
        exit_code = 0
        if args.oom:
            # A batch far too large for the device: the allocator records the OOM (with the state it saw)
            # and the workload dies of the exception.
            largest_free = max((size for size, addrs in w.free_cached.items() if addrs), default=0)
            requested = 80 * 1024 * MiB
            w.emit(R.REC_OOM, R.OOM.pack(w.t, requested, DEVICE_TOTAL - w.reserved - CONTEXT_BYTES, DEVICE_TOTAL, w.reserved,
                                         w.allocated, largest_free, STREAM, 0, w.stack("out = model(data)"), 0))
            exit_code = 1
        del params, data, adam
        out.write(R.record(R.REC_END, R.END.pack(w.t, exit_code, 0)))
    print(f"wrote {args.out}: peak allocated {w.peak_alloc / MiB:.0f} MiB, reserved {w.reserved / MiB:.0f} MiB")


if __name__ == "__main__":
    main()
