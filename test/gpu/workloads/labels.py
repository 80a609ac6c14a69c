"""Workload: memory labels (torch.cuda.memory._set_memory_metadata) around allocations of known sizes, run
natively (PyTorch's own labels: the reference), under `gpumem run --allocator lens` and `--allocator pytorch`.

  "stage=train"  12 MiB and 14 MiB (the same label set twice in between)
  a thread of its own, no label: 16 MiB (the label is the calling thread's)
  "stage=eval"   18 MiB; the 12 MiB tensor freed
  ""             (cleared) 22 MiB

Sizes are multiples of 2 MiB above 10 MiB, so each is its own block in both allocators (no rounding, no split).
The workload records its own memory history and prints one RESULT line: the labels its own _snapshot() gives the
alloc entries of those sizes (MiB → user_metadata), what _get_memory_metadata() says on each thread, and under
gpumem the mode and the observer's source."""
import faulthandler
import os

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "200")), exit=True)
import json  # noqa: E402
import threading  # noqa: E402

import torch  # noqa: E402

MiB = 1 << 20
SIZES = (12, 14, 16, 18, 22)


def empty(mib):
    return torch.empty(mib * MiB, dtype=torch.uint8, device="cuda")


def main():
    mem = torch.cuda.memory
    facts = {"torch": torch.__version__}
    torch.cuda.init()
    mem._record_memory_history(max_entries=100000)
    keep = {}
    mem._set_memory_metadata("stage=train")
    keep[12] = empty(12)
    mem._set_memory_metadata("stage=train")
    keep[14] = empty(14)

    def worker():
        facts["worker_get"] = mem._get_memory_metadata()
        keep[16] = empty(16)

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    mem._set_memory_metadata("stage=eval")
    keep[18] = empty(18)
    del keep[12]
    facts["main_get"] = mem._get_memory_metadata()
    mem._set_memory_metadata("")
    keep[22] = empty(22)
    torch.cuda.synchronize()
    snap = mem._snapshot()
    labels = {}
    for e in snap["device_traces"][torch.cuda.current_device()]:
        if e["action"] == "alloc" and e["size"] % MiB == 0 and e["size"] // MiB in SIZES:
            labels[str(e["size"] // MiB)] = e.get("user_metadata", "")
    facts["snapshot_labels"] = labels
    mem._record_memory_history(enabled=None)
    try:
        from gpumem._state import STATE

        facts["mode"] = "pytorch" if STATE.observer_source else ("lens" if STATE.swapped else None)
        facts["source"] = STATE.observer_source
    except ImportError:
        facts["mode"] = "native"
    print("RESULT " + json.dumps(facts), flush=True)


if __name__ == "__main__":
    main()
