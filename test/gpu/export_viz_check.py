#!/usr/bin/env python3
"""What `gpumem export` writes is what PyTorch's own memory_viz of this torch reads.

    python3 test/gpu/export_viz_check.py [--out DIR] [--node NODE]      (stage `export-viz` of run_all.sh)

For each of the snapshot fixtures (protocols 5 and 2, user_metadata as strings and dicts, annotations, private
pools, pinned host segments) and the H100 captures (labels under both modes, the leaky convnet), exports a pickle with
`node dist/cli.js export FILE --pickle OUT` and feeds it to torch.cuda._memory_viz of the installed torch: stats()
where it exists (older torch; it asserts each segment's total_size equals its blocks' sizes), segsum(), trace() (every trace entry),
trace_plot() and segment_plot() (the HTML memory_viz draws). PASS per file when none raises and the exported trace
keeps the source's alloc entries and labels (user_metadata on the labelled allocations). Results in
OUT/export_viz.json. Needs dist/ and Node ($GPUMEM_NODE or .carry/node/node.xz via run_all.sh)."""
import faulthandler
import os

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "150")), exit=True)  # a stall comes back as a stack
import argparse  # noqa: E402
import json  # noqa: E402
import pickle  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SNAPS = os.path.join(ROOT, "test", "fixtures", "pytorch-snapshots")
INPUTS = [os.path.join(SNAPS, n + ".pickle") for n in ("mlp-expandable-proto5", "mlp-expandable-proto2", "mlp-user-metadata",
                                                       "mlp-annotations", "mlp-pools", "mlp-host-segments")] + \
         [os.path.join(ROOT, "test", "fixtures", n) for n in ("h100-labels-lens.capture", "h100-labels-pytorch.capture",
                                                              "h100-leaky-convnet.capture")]


def labels(snap):
    """(alloc entries, {size: user_metadata} of the labelled ones) over every device's trace."""
    n, out = 0, {}
    for trace in snap.get("device_traces", []):
        for e in trace:
            if e.get("action") == "alloc":
                n += 1
                if e.get("user_metadata"):
                    out[str(e["size"])] = e["user_metadata"]
    return n, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp/gpumem-export-viz"))
    ap.add_argument("--node", default=os.environ.get("GPUMEM_NODE", "node"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    import torch
    from torch.cuda import _memory_viz as mv

    print("torch %s: _memory_viz offers %s" % (torch.__version__, sorted(n for n in dir(mv) if not n.startswith("_") and callable(getattr(mv, n)))), flush=True)
    results, failed = {}, []
    for src in INPUTS:
        name = os.path.basename(src)
        out = os.path.join(a.out, name + ".exported.pickle")
        r = {"torch": torch.__version__}
        try:
            p = subprocess.run([a.node, os.path.join(ROOT, "dist", "cli.js"), "export", src, "--pickle", out],
                               capture_output=True, text=True, timeout=120)
            if p.returncode != 0:
                raise RuntimeError("export failed: " + p.stderr[-800:])
            with open(out, "rb") as f:
                snap = pickle.load(f)
            if hasattr(mv, "stats"):  # older torch: asserts each segment's total_size equals its blocks' sizes
                r["segments"] = mv.stats(snap)["segments"]
            r["segsum_chars"] = len(mv.segsum(snap))
            r["trace_chars"] = len(mv.trace(snap))
            r["trace_plot_chars"] = len(mv.trace_plot(snap))
            r["segment_plot_chars"] = len(mv.segment_plot(snap))
            allocs, labelled = labels(snap)
            r["alloc_entries"], r["labelled"] = allocs, labelled
            if src.endswith(".pickle"):
                with open(src, "rb") as f:
                    orig = pickle.load(f)
                want_allocs, want_labels = labels(orig)
                # a dict label is exported as its JSON text (memory_viz shows strings)
                want_labels = {k: (v if isinstance(v, str) else json.dumps(v, separators=(",", ":"), sort_keys=False))
                               for k, v in want_labels.items()}
                r["source_alloc_entries"] = want_allocs
                ok = allocs == want_allocs and set(labelled) == set(want_labels)
            elif "labels" in name:
                ok = labelled == {str(12 << 20): "stage=train", str(14 << 20): "stage=train", str(18 << 20): "stage=eval"}
            else:
                ok = allocs > 0
            r["ok"] = ok
        except Exception as exc:  # noqa: BLE001
            r["ok"], r["error"] = False, "%s: %s" % (type(exc).__name__, str(exc)[-800:])
        results[name] = r
        if not r["ok"]:
            failed.append(name)
        print("%s %s %s" % ("PASS" if r["ok"] else "FAIL", name, json.dumps({k: v for k, v in r.items() if k != "labelled"})[:400]), flush=True)
    with open(os.path.join(a.out, "export_viz.json"), "w") as f:
        json.dump(results, f, indent=1)
    print("RESULT %s (%d of %d files)" % ("PASS" if not failed else "FAIL", len(INPUTS) - len(failed), len(INPUTS)))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
