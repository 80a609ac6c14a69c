#!/usr/bin/env python3
"""GPU check of Note [GIL-free walk]: a real PyTorch workload (workloads/stack_shapes.py) runs twice under
`python3 -m gpumem run`, once with every stack taken through CPython's public API with the GIL
(GPUMEM_GIL_FREE_WALK=0) and once with the GIL-free walk, and every allocation's stack (flags, and
file/function/line of each frame) must be the same. Needs torch and an NVIDIA GPU; the allocator .so
from `make -C native/allocator`.

    python3 test/gpu/stack_equivalence.py [--out DIR]
"""
import faulthandler
import os

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "280")), exit=True)  # a stall comes back as a stack (below the stage's limit)
import argparse
import collections
import glob
import json
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "test", "native", "recorder"))
import capture as cap  # noqa: E402


def run(out, gil_free):
    env = dict(os.environ, GPUMEM_GIL_FREE_WALK="1" if gil_free else "0",
               PYTHONPATH=os.path.join(ROOT, "native", "python"))
    d = os.path.join(out, "gil-free" if gil_free else "public-api")
    os.makedirs(d, exist_ok=True)
    p = subprocess.run([sys.executable, "-m", "gpumem", "run", "--allocator", "lens", "--out", d, "--",
                        os.path.join(HERE, "workloads", "stack_shapes.py")],
                       env=env, capture_output=True, text=True, timeout=300, cwd=HERE)
    if p.returncode != 0:
        raise SystemExit("workload failed (%d):\n%s\n%s" % (p.returncode, p.stdout[-3000:], p.stderr[-3000:]))
    info = json.loads([ln for ln in p.stdout.splitlines() if ln.startswith("STACK_INFO ")][-1][11:])
    captures = glob.glob(os.path.join(d, "**", "capture-*.gpumem"), recursive=True)
    assert len(captures) == 1, captures
    c = cap.Capture(captures[0])
    allocs = [(a["requested"], a["thread"] != 0, c.stacks.get(a["stack"], (0, []))) for a in c.blocks("alloc")]
    return info, [(req, bg, flags, tuple(tuple(f) for f in frames)) for req, bg, (flags, frames) in allocs]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    out = args.out or tempfile.mkdtemp(prefix="gpumem-stacks-")
    info_pub, pub = run(out, False)
    info_fast, fast = run(out, True)
    same_sequence = pub == fast
    same_multiset = collections.Counter(pub) == collections.Counter(fast)
    with_frames = sum(1 for a in fast if a[3])
    background = [a for a in fast if a[1]]
    result = {
        "allocations": [len(pub), len(fast)],
        "with_frames": with_frames,
        "autograd_thread_allocations": len(background),
        "autograd_thread_with_own_frames": sum(1 for a in background if a[2] == 0 and a[3]),
        "autograd_thread_backward_attributed": sum(1 for a in background if a[2] == 1),
        "same_sequence": same_sequence,
        "same_multiset": same_multiset,
        "stack_info_public_api": info_pub,
        "stack_info_gil_free": info_fast,
    }
    if not same_multiset:
        diff = (collections.Counter(pub) - collections.Counter(fast)) + (collections.Counter(fast) - collections.Counter(pub))
        result["first_differences"] = [list(map(str, k)) for k in list(diff)[:5]]
    ok = (same_multiset and with_frames > 0 and info_fast and info_fast["gil_free_walk"] and
          info_fast["mismatches"] == 0 and info_fast["gil_free_answers"] > 0 and not info_pub["gil_free_walk"])
    result["ok"] = bool(ok)
    print(json.dumps(result, indent=1))
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "stack_equivalence.json"), "w") as f:
            json.dump(result, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
