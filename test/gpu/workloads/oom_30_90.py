"""The OOM script (test/gpu/oom_sample_check.py): holds 30 % of the GPU, asks for 90 % (caught), then keeps
working for a few seconds (its peak comes right after the OOM). At the end it prints one line
`END {"nvml_used": …, "mem_get_info_used": …, "reserved": …}`: the device's used bytes as NVML says (what the
allocator's sampler reads, Note [Settled samples] in native/allocator/src/device_sampler.cc) and as
cudaMemGetInfo says, and the allocator's reserved bytes, all read after the work, with nothing allocated since.
"""
import faulthandler
import os

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "150")), exit=True)  # a stall comes back as a stack (below the stage's limit)
import ctypes
import json
import time

import torch


class NvmlMemory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


def nvml_used(device):
    """nvmlDeviceGetMemoryInfo(...).used for the CUDA device, matched by PCI bus id (as the sampler does); None if NVML is missing."""
    try:
        nv = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return None
    if nv.nvmlInit_v2() != 0:
        return None
    bus = torch.cuda.get_device_properties(device)
    pci = "%08x:%02x:%02x.0" % (bus.pci_domain_id, bus.pci_bus_id, bus.pci_device_id)
    h = ctypes.c_void_p()
    if nv.nvmlDeviceGetHandleByPciBusId_v2(pci.encode(), ctypes.byref(h)) != 0:
        return None
    m = NvmlMemory()
    if nv.nvmlDeviceGetMemoryInfo(h, ctypes.byref(m)) != 0:
        return None
    return int(m.used)


device = torch.device("cuda", 0)
total = torch.cuda.get_device_properties(device).total_memory
held = torch.empty(int(total * 0.3), dtype=torch.uint8, device=device)
try:
    y = torch.empty(int(total * 0.9), dtype=torch.uint8, device=device)  # OOM_LINE
    raise SystemExit("90 %% of the GPU was granted after 30 %%: not the OOM this script needs")
except torch.OutOfMemoryError:  # as natively; under the lens allocator through its OOM glue (Note [Lens OOM type])
    print("OOM caught (OutOfMemoryError)", flush=True)
except RuntimeError as e:  # the lens allocator without the glue (the observer module not built): a RuntimeError
    if "CUDA out of memory" not in str(e):
        raise
    print("OOM caught (RuntimeError)", flush=True)
# Keeps working: the run's peak comes right after the OOM, then a few seconds of steady work.
a = torch.randn(4096, 4096, device=device)
t_end = time.time() + 3
while time.time() < t_end:
    b = a @ a
    a = b / b.norm()
torch.cuda.synchronize()
time.sleep(0.5)  # past a sampler period (200 ms): the capture has samples of this state too
free_b, total_b = torch.cuda.mem_get_info(device)
print("END " + json.dumps({"nvml_used": nvml_used(device), "mem_get_info_used": total_b - free_b,
                           "reserved": torch.cuda.memory_reserved(device), "total": total}), flush=True)
print("DONE", flush=True)
