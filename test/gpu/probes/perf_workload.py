"""Probe workload (not a test): ResNet-50 b64 bf16 training steps (bench_allocator.py's), for perf_host.sh.

Warms up, writes its pid to argv[1] (the process perf attaches to: under `gpumem run` this is the workload
itself, not the launcher), then runs steps for argv[2] seconds, printing one line per step:
`STEP <time.time()> <ms> <host ms>` (host: until step() returns, before the synchronize), so the driver can count
the steps inside its profiling window.

PROBE_BEFORE="gpt2:20" first runs 20 GPT-2 steps and drops that model, as the step benchmark's two-model children do
(`--models gpt2 resnet50`): under `--record-steps 10` the recording then stops during GPT-2, and every ResNet-50 step
profiled is one after the stop, with a recording behind it.
"""
import faulthandler
import os
import sys
import time

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "80")), exit=True)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import torch  # noqa: E402

from bench_allocator import step_fn  # noqa: E402

if os.environ.get("PROBE_BEFORE"):
    name, _, count = os.environ["PROBE_BEFORE"].partition(":")
    before = step_fn(name)
    for _ in range(int(count or 20)):
        before()
    torch.cuda.synchronize()
    del before
step = step_fn(os.environ.get("PROBE_MODEL", "resnet50"))
for _ in range(15):
    step()
torch.cuda.synchronize()
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(os.getpid()))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
end = time.time() + float(sys.argv[2])
while time.time() < end:
    t0 = time.perf_counter()
    step()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    print("STEP %.6f %.3f %.3f" % (time.time(), (time.perf_counter() - t0) * 1e3, (t1 - t0) * 1e3), flush=True)
