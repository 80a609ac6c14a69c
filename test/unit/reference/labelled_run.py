#!/usr/bin/env python3
"""Memory labels (torch.cuda.memory._set_memory_metadata, Note [User metadata] in native/format/gpumem_format.h)
through the lens allocator's C API on the simulated device: what the bootstrap's shim does on each call
(gpumem_user_metadata on the calling thread), around allocations of known sizes.

    labelled_run.py LIB.so OUT.gpumem [--budget BYTES] [--churn N] [--mark-every K]

The run, on the main thread unless said otherwise:
  "stage=init"   8 MiB kept to the end (param)
  "stage=train"  N × 4 KiB allocated and freed (churn), 3 MiB and 5 MiB kept; the same label set again (no record)
  a worker thread with no label: 2 MiB kept; a worker thread labelled "worker": 6 MiB kept
  "stage=peak"   64 MiB allocated, then freed: the run's peak
  "stage=eval"   N × 4 KiB churn, 7 MiB kept
  ""             (cleared) 11 MiB kept
With --budget the capture is budgeted (FORMAT.md §5): the churn makes the writer compact, so the kept blocks and
the peak are restated allocations (Note [Labels of restated blocks] in native/allocator/src/compactor.cc); with
--mark-every K an instant marker every K churn allocations (markers stay verbatim) makes the compacted ranges
outgrow a quarter of the budget, so they are merged too (Note [Budget as a cap]).
Prints one JSON line: {"labels": {size: label or null} of the kept blocks and the peak, "records": how many label
changes were written (gpumem_user_metadata's 1s)}.
"""
import argparse
import json
import os
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "native", "recorder"))
import common  # noqa: E402

KiB, MiB = 1 << 10, 1 << 20


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("lib")
    ap.add_argument("capture")
    ap.add_argument("--budget", type=int, default=0)
    ap.add_argument("--churn", type=int, default=200)
    ap.add_argument("--mark-every", type=int, default=0)
    a = ap.parse_args()
    lib = common.load(a.lib)
    cfg = {"capture_path": a.capture, "sim_capacity": 1 << 30, "segments": "fixed", "stacks": False}
    if a.budget:
        cfg["budget_bytes"] = a.budget
    common.configure(lib, **cfg)
    written = 0

    def label(text):
        nonlocal written
        r = lib.gpumem_user_metadata(text.encode())
        assert r in (0, 1), r
        written += r

    def churn():
        for i in range(a.churn):
            p = lib.gpumem_malloc(4 * KiB, 0, None)
            lib.gpumem_free(p, 4 * KiB, 0, None)
            if a.mark_every and i % a.mark_every == 0:
                lib.gpumem_mark(b"churn", 0)

    kept = []

    def keep(size):
        kept.append((lib.gpumem_malloc(size, 0, None), size))

    label("stage=init")
    keep(8 * MiB)
    label("stage=train")
    churn()
    keep(3 * MiB)
    label("stage=train")  # unchanged: no record
    keep(5 * MiB)

    def worker(text, size):
        if text:
            label(text)
        keep(size)

    for text, size in (("", 2 * MiB), ("worker", 6 * MiB)):
        t = threading.Thread(target=worker, args=(text, size))
        t.start()
        t.join()
    label("stage=peak")
    peak = lib.gpumem_malloc(64 * MiB, 0, None)
    lib.gpumem_free(peak, 64 * MiB, 0, None)
    label("stage=eval")
    churn()
    keep(7 * MiB)
    label("")
    keep(11 * MiB)
    lib.gpumem_shutdown(0)
    labels = {8 * MiB: "stage=init", 3 * MiB: "stage=train", 5 * MiB: "stage=train", 2 * MiB: None, 6 * MiB: "worker",
              64 * MiB: "stage=peak", 7 * MiB: "stage=eval", 11 * MiB: None}
    print(json.dumps({"labels": {str(k): v for k, v in labels.items()}, "records": written}))


if __name__ == "__main__":
    main()
