#!/usr/bin/env python3
"""Summaries on one GPU: `gpumem summary` (text and --json) of four real runs under `gpumem run`.

    python3 test/gpu/summaries_check.py [--node PATH] [--out DIR]

Needs dist/ built on the development machine (cli.js, native/) and Node.js: --node, else $GPUMEM_NODE, else
.carry/node/node.xz (decompressed to a temp folder), else `node` on PATH.
Runs (test/gpu/workloads/summaries_train.py):
  oom        step 3 asks for twice the GPU and survives: the summary lists the OOM with its line
             (`# OOM_LINE`), request, free/total and a verdict; integrity clean
  killed     SIGKILL to the workload mid-run: integrity "early", and the text says it ends early
  full-disk  RLIMIT_FSIZE 256 KiB with SIGXFSZ ignored (writes fail with EFBIG): the workload still finishes
             (DONE, exit 0); the summary says the capture stopped (writer-failure, with the message)
  ranks      torchrun --nproc_per_node 2, DDP on gloo, both ranks on cuda:0: two captures naming rank 0
             and rank 1 of 2, the GPU's name, one device each (no empty device section)
Saves every summary under OUT/summaries/ and prints PASS/FAIL per expectation; exits 1 on any FAIL.
"""
import argparse
import glob
import json
import lzma
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORKLOAD = os.path.join(ROOT, "test", "gpu", "workloads", "summaries_train.py")
SO = os.path.join(ROOT, "dist", "native", "libgpumem_allocator.so")
FAILED = []


def check(name, ok, detail=""):
    print("%s %s%s" % ("PASS" if ok else "FAIL", name, (": " + detail) if detail else ""), flush=True)
    if not ok:
        FAILED.append(name)


def find_node(arg):
    if arg:
        return arg
    if os.environ.get("GPUMEM_NODE"):
        return os.environ["GPUMEM_NODE"]
    carried = os.path.join(ROOT, ".carry", "node", "node.xz")
    if os.path.exists(carried):
        dest = os.path.join(tempfile.mkdtemp(prefix="gpumem-node-"), "node")
        with lzma.open(carried) as src, open(dest, "wb") as out:
            shutil.copyfileobj(src, out)
        os.chmod(dest, 0o755)
        return dest
    return shutil.which("node") or "node"


def env():
    e = {k: v for k, v in os.environ.items() if not k.startswith("GPUMEM_")}
    e.update(PYTHONPATH=os.path.join(ROOT, "native", "python"), PYTHONUNBUFFERED="1")
    return e


def lens(out, argv):
    return [sys.executable, "-m", "gpumem", "run", "--allocator", "lens", "--allocator-so", SO, "--out", out, "--sample-ms", "50", "--"] + argv


def captures(root):
    return sorted(glob.glob(os.path.join(root, "*", "capture-*.gpumem")))


def summarize(node, capture, dest, name):
    """`gpumem summary` text and --json, saved as dest/name.txt and dest/name.json."""
    text = subprocess.run([node, os.path.join(ROOT, "dist", "cli.js"), "summary", capture], capture_output=True, text=True)
    js = subprocess.run([node, os.path.join(ROOT, "dist", "cli.js"), "summary", capture, "--json"], capture_output=True, text=True)
    with open(os.path.join(dest, name + ".txt"), "w") as f:
        f.write(text.stdout + text.stderr)
    with open(os.path.join(dest, name + ".json"), "w") as f:
        f.write(js.stdout + js.stderr)
    if text.returncode or js.returncode:
        raise RuntimeError("gpumem summary failed on %s: %s" % (capture, (text.stderr + js.stderr)[-2000:]))
    print("---- %s.txt\n%s" % (name, text.stdout), flush=True)
    return text.stdout, json.loads(js.stdout)


def flat(text):
    """The boxed report as one line of words (sentences wrap across rows)."""
    return re.sub(r"\s+", " ", re.sub(r"\|", " ", text))


def no_raw_times(name, text):
    check(name + ": no raw time_us in the text", not re.search(r"time_us|\d{16}", text))


def run_oom(node, out, dest):
    root = os.path.join(out, "oom")
    r = subprocess.run(lens(root, [sys.executable, WORKLOAD, "oom"]), env=env(), capture_output=True, text=True, timeout=240)
    check("oom: the workload survives its OOM and exits 0", r.returncode == 0 and "DONE" in r.stdout, "rc=%d %s" % (r.returncode, r.stderr[-500:]))
    (cap,) = captures(root)
    text, doc = summarize(node, cap, dest, "oom")
    line = next(i + 1 for i, l in enumerate(open(WORKLOAD)) if l.rstrip().endswith("# OOM_LINE"))
    ooms = doc["ooms"]
    check("oom: exactly one OOM listed", len(ooms) == 1, json.dumps(ooms))
    if ooms:
        o = ooms[0]
        check("oom: its line is the workload's OOM_LINE", o["file"].endswith("summaries_train.py") and o["line"] == line, "%s:%s" % (o["file"], o["line"]))
        check("oom: requested is twice the GPU (device_total_bytes)", o["device_total_bytes"] > 0 and o["requested_bytes"] == 2 * o["device_total_bytes"],
              "requested %d total %d free %d" % (o["requested_bytes"], o["device_total_bytes"], o["device_free_bytes"]))
        check("oom: free/total and verdict present", 0 < o["device_free_bytes"] <= o["device_total_bytes"] and o["verdict"] in ("fragmentation", "shortage") and o["sentence"])
        # The OOM comes after the 4th optimizer.step() (i == 3), before the 5th iteration ends: Note [Steps]
        # counts iterations from 1, so it happened in step 5.
        check("oom: in step 5 (after 4 optimizer steps, Note [Steps])", o["step"] == 5, "step=%s" % o["step"])
        check("oom: listed in the text with its line", ("summaries_train.py:%d" % line) in text and "Out-of-memory errors: 1" in text)
    check("oom: integrity clean", doc["integrity"]["ended"] == "clean", json.dumps(doc["integrity"]))
    dev = doc["devices"][0] if doc["devices"] else {}
    check("oom: the GPU is named", bool(dev.get("name")) and dev["name"] != "simulated device" and dev["name"] in text, str(dev.get("name")))
    check("oom: peak in seconds since the first allocation", isinstance(dev.get("peak_t_s"), float) and 0 <= dev["peak_t_s"] < 600, str(dev.get("peak_t_s")))
    no_raw_times("oom", text)


def run_killed(node, out, dest):
    root = os.path.join(out, "killed")
    p = subprocess.Popen(lens(root, [sys.executable, WORKLOAD, "forever"]), env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    if not line.startswith("READY"):
        p.kill()
        check("killed: the workload got ready", False, line + p.stderr.read()[-1000:])
        return
    pid = int(line.split()[1])
    time.sleep(1.0)
    os.kill(pid, signal.SIGKILL)
    p.wait(timeout=60)
    (cap,) = captures(root)
    text, doc = summarize(node, cap, dest, "killed")
    i = doc["integrity"]
    check("killed: integrity says the capture ended early", i["ended"] == "early", json.dumps(i))
    check("killed: the text says so, and where", re.search(r"The capture ends early at \d+\.\d{3} s: the process died or was killed", flat(text)) is not None)
    check("killed: the device still summarised", len(doc["devices"]) == 1 and doc["devices"][0]["events"] > 0)
    no_raw_times("killed", text)


def run_full_disk(node, out, dest):
    root = os.path.join(out, "full-disk")
    limit = 256 << 10

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail with EFBIG instead of killing

    r = subprocess.run(lens(root, [sys.executable, WORKLOAD, "steps", "200"]), env=env(), capture_output=True, text=True, timeout=300,
                       preexec_fn=small_files)
    check("full-disk: the workload runs to its end (DONE, exit 0)", r.returncode == 0 and "DONE" in r.stdout, "rc=%d %s" % (r.returncode, r.stderr[-800:]))
    with open(os.path.join(dest, "full-disk.stderr.txt"), "w") as f:
        f.write(r.stderr)
    (cap,) = captures(root)
    size = os.path.getsize(cap)
    check("full-disk: the capture stopped at the limit", size <= limit, "%d bytes" % size)
    text, doc = summarize(node, cap, dest, "full-disk")
    i = doc["integrity"]
    check("full-disk: integrity says the writer stopped (writer-failure)", i["ended"] == "writer-failure", json.dumps(i))
    check("full-disk: the message names the capture and the error", bool(i.get("message")) and "capture-" in i["message"], str(i.get("message")))
    check("full-disk: the text says the capture stopped", re.search(r"The capture stopped at \d+\.\d{3} s: ", flat(text)) is not None)
    check("full-disk: the workload's stderr says so once", r.stderr.count(os.path.basename(cap)) >= 1, r.stderr[-400:])


def run_ranks(node, out, dest):
    root = os.path.join(out, "ranks")
    argv = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_port=29633", WORKLOAD, "ddp"]
    r = subprocess.run(lens(root, argv), env=env(), capture_output=True, text=True, timeout=300)
    check("ranks: torchrun with 2 gloo ranks on cuda:0 succeeds", r.returncode == 0, "rc=%d %s" % (r.returncode, r.stderr[-1500:]))
    caps = captures(root)
    check("ranks: one capture per rank", len(caps) == 2, str(caps))
    seen = []
    for k, cap in enumerate(caps):
        text, doc = summarize(node, cap, dest, "rank-capture%d" % k)
        ident = doc["identity"]
        seen.append(ident.get("rank"))
        check("ranks: capture %d names rank %s of 2 in text" % (k, ident.get("rank")),
              ident.get("world_size") == 2 and ("Process: rank %s of 2" % ident.get("rank")) in text and ident.get("pid") is not None, json.dumps(ident)[:300])
        check("ranks: capture %d has only cuda:0 (no empty device section)" % k,
              [d["device"] for d in doc["devices"]] == [0] and "Device cuda:1" not in text, str([d["device"] for d in doc["devices"]]))
        check("ranks: capture %d names the GPU" % k, bool(doc["devices"] and doc["devices"][0].get("name")))
        no_raw_times("ranks capture %d" % k, text)
    check("ranks: the two captures are rank 0 and rank 1", sorted(x for x in seen if x is not None) == [0, 1], str(seen))
    # `gpumem summary SESSION_DIR` puts the ranks side by side, one row each.
    text, table = summarize(node, root, dest, "ranks-table")
    rows = table["ranks"]
    check("ranks: summary of the session folder has one row per rank", sorted(r["rank"] for r in rows) == [0, 1]
          and all(r["world_size"] == 2 and r["peak_allocated_bytes"] > 0 and r["device_name"] for r in rows), json.dumps(rows)[:400])
    check("ranks: the table's text names both ranks", "0/2" in text and "1/2" in text, text[:400])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--node", default=None)
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp/gpumem-summaries"))
    ap.add_argument("--only", nargs="*", default=["oom", "killed", "full-disk", "ranks"])
    args = ap.parse_args()
    node = find_node(args.node)
    work = tempfile.mkdtemp(prefix="gpumem-summaries-")  # sessions (not brought back: large)
    dest = os.path.join(args.out, "summaries")
    os.makedirs(dest, exist_ok=True)
    steps = {"oom": run_oom, "killed": run_killed, "full-disk": run_full_disk, "ranks": run_ranks}
    for name in args.only:
        try:
            steps[name](node, work, dest)
        except Exception as e:  # one broken run must not hide the others' results
            check("%s: ran" % name, False, "%s: %s" % (type(e).__name__, str(e)[-1500:]))
    print("SUMMARY %s" % json.dumps({"failed": FAILED}), flush=True)
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    import faulthandler

    faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "540")), exit=True)  # a stall comes back as a stack (below the stage's limit)
    main()
