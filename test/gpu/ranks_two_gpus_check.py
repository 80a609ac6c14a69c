#!/usr/bin/env python3
"""On a 2-GPU machine: a torchrun DDP job (NCCL, one rank per GPU) under `gpumem run`, then
`gpumem summary SESSION_DIR` (text and --json) puts both ranks side by side.

    python3 test/gpu/ranks_two_gpus_check.py [--node PATH] [--out DIR] [--steps 30]

Needs 2 GPUs, dist/ built here (cli.js, native/) and Node (--node, $GPUMEM_NODE, .carry/node/node.xz, or PATH).
Expectations (PASS/FAIL lines, exit 1 on any FAIL; JSON result in OUT/ranks-2gpu/result.json):
  - the job succeeds under gpumem run and leaves one capture per rank;
  - the rank table has rank 0 and rank 1 of 2, on cuda:0 and cuda:1, each naming its GPU;
  - each rank's peak allocated equals what that rank measured itself (torch.cuda.max_memory_allocated);
  - rank 1 peaks higher by its extra 512 MiB tensor (within 2 MiB) and is flagged "high"
    (Note [Rank flags]); the text shows "0/2" and "1/2" and the ▲ sentence;
  - the top line at rank 1's peak is the extra tensor's line (# EXTRA_LINE in the workload).
"""
import faulthandler
import os

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "460")), exit=True)  # a stall comes back as a stack (below the stage's limit)
import argparse
import glob
import json
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from summaries_check import FAILED, ROOT, check, env, find_node, lens  # noqa: E402

WORKLOAD = os.path.join(ROOT, "test", "gpu", "workloads", "ddp_two_gpus.py")
MiB = 1 << 20


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--node", default=None)
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp/gpumem-ranks-2gpu"))
    ap.add_argument("--steps", type=int, default=30)
    args = ap.parse_args()
    dest = os.path.join(args.out, "ranks-2gpu")
    os.makedirs(dest, exist_ok=True)
    result = {"failed": FAILED}
    try:
        import torch
        n = torch.cuda.device_count()
        check("2 GPUs present", n >= 2, "torch.cuda.device_count() = %d: run this stage on the 2-GPU machine" % n)
        if n < 2:
            raise SystemExit(1)
        node = find_node(args.node)
        work = tempfile.mkdtemp(prefix="gpumem-ranks-2gpu-")
        session = os.path.join(work, "session")
        measured = os.path.join(work, "measured")
        os.makedirs(measured)
        argv = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master_port=29655", WORKLOAD, measured, str(args.steps)]
        r = subprocess.run(lens(session, argv), env=env(), capture_output=True, text=True, timeout=400)
        with open(os.path.join(dest, "run.log"), "w") as f:
            f.write(r.stdout + r.stderr)
        check("torchrun --nproc-per-node 2 (DDP, NCCL) under gpumem run succeeds", r.returncode == 0, "rc=%d %s" % (r.returncode, r.stderr[-1500:]))
        caps = sorted(glob.glob(os.path.join(session, "**", "*.gpumem"), recursive=True))
        check("one capture per rank", len(caps) == 2, str(caps))
        me = {}
        for p in glob.glob(os.path.join(measured, "rank*.json")):
            d = json.load(open(p))
            me[d["rank"]] = d
        check("both ranks measured themselves", sorted(me) == [0, 1], str(sorted(me)))
        cli = os.path.join(ROOT, "dist", "cli.js")
        text = subprocess.run([node, cli, "summary", session], capture_output=True, text=True)
        js = subprocess.run([node, cli, "summary", session, "--json"], capture_output=True, text=True)
        with open(os.path.join(dest, "summary.txt"), "w") as f:
            f.write(text.stdout + text.stderr)
        with open(os.path.join(dest, "summary.json"), "w") as f:
            f.write(js.stdout + js.stderr)
        print("---- gpumem summary SESSION_DIR\n" + text.stdout, flush=True)
        check("gpumem summary SESSION_DIR succeeds (text and --json)", text.returncode == 0 and js.returncode == 0, (text.stderr + js.stderr)[-800:])
        table = json.loads(js.stdout)
        rows = {row["rank"]: row for row in table["ranks"]}
        result["ranks"] = table["ranks"]
        result["measured"] = me
        check("the table has rank 0 and rank 1 of 2", sorted(rows) == [0, 1] and all(x["world_size"] == 2 for x in rows.values()), json.dumps(table["ranks"])[:600])
        for k in (0, 1):
            row, m = rows.get(k), me.get(k)
            if not row or not m:
                continue
            check("rank %d is on cuda:%d and names its GPU" % (k, k), row["device"] == k and bool(row["device_name"]), "device %s name %s" % (row["device"], row["device_name"]))
            check("rank %d: peak allocated equals the rank's own torch.cuda.max_memory_allocated" % k,
                  row["peak_allocated_bytes"] == m["max_memory_allocated"], "table %d, measured %d" % (row["peak_allocated_bytes"], m["max_memory_allocated"]))
            check("rank %d: peak reserved ≥ peak allocated" % k, row["peak_reserved_bytes"] >= row["peak_allocated_bytes"])
        if 0 in rows and 1 in rows:
            diff = rows[1]["peak_allocated_bytes"] - rows[0]["peak_allocated_bytes"]
            check("rank 1 peaks higher by its extra 512 MiB (within 2 MiB)", abs(diff - 512 * MiB) <= 2 * MiB, "difference %d B" % diff)
            check("rank 1 is flagged high, rank 0 not", rows[1]["flag"] == "high" and rows[0]["flag"] is None, "%s / %s" % (rows[0]["flag"], rows[1]["flag"]))
            line = next(i + 1 for i, l in enumerate(open(WORKLOAD)) if l.rstrip().endswith("# EXTRA_LINE"))
            top = rows[1]["top_line"] or {}
            check("rank 1's top line at the peak is the extra tensor's line", str(top.get("file", "")).endswith("ddp_two_gpus.py") and top.get("line") == line,
                  "%s:%s (expected line %d)" % (top.get("file"), top.get("line"), line))
        check("the text shows both ranks and the outlier sentence", "0/2" in text.stdout and "1/2" in text.stdout and "▲ rank 1 peaks at" in text.stdout, text.stdout[:600])
    except SystemExit:
        pass
    except Exception as e:  # report, never hide
        check("ran", False, "%s: %s" % (type(e).__name__, str(e)[-1500:]))
    with open(os.path.join(dest, "result.json"), "w") as f:
        json.dump(result, f, indent=1)
    print("SUMMARY %s" % json.dumps({"failed": FAILED}), flush=True)
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    main()
