"""Workload: what a torch.compile user sees on stderr. A module with its own forward hooks, compiled
with mode="default" and mode="reduce-overhead", trained a few steps; outputs saved to argv[1]. The check runs it
natively and under `gpumem run` and diffs stderr line by line (gpumem's own lines aside): the tool must add no
warning and change no output."""
import faulthandler
import os

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "240")), exit=True)
import json  # noqa: E402
import sys  # noqa: E402

import torch  # noqa: E402


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(256, 1024)
        self.fc2 = torch.nn.Linear(1024, 256)
        self.calls = 0
        self.fc1.register_forward_hook(self.count)  # the user's own hook

    def count(self, module, args, output):
        self.calls += 1

    def forward(self, x):
        return self.fc2(torch.nn.functional.gelu(self.fc1(x)))


def main():
    torch.manual_seed(0)
    outs, calls = [], {}
    for mode in ("default", "reduce-overhead"):
        net = Net().cuda()
        fast = torch.compile(net, mode=mode)
        opt = torch.optim.SGD(net.parameters(), lr=0.01)
        x = torch.randn(64, 256, device="cuda", generator=torch.Generator("cuda").manual_seed(1))
        for _ in range(4):
            loss = fast(x).square().mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            outs.append(loss.detach().clone())
        calls[mode] = net.calls
    torch.cuda.synchronize()
    torch.save([o.cpu() for o in outs], sys.argv[1])
    import warnings

    cfx = sys.modules.get("torch._inductor.compile_fx")
    warn_fn = getattr(cfx, "_warn_tf32_disabled", None)
    print("RESULT " + json.dumps({"hook_calls": calls, "max_allocated": torch.cuda.max_memory_allocated(),
                                  "mode": os.environ.get("GPUMEM_ALLOCATOR"),
                                  # why a warning would differ: TF32 state, the warning's cache, the filters
                                  "allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
                                  "tf32_warn_cache": str(warn_fn.cache_info()) if hasattr(warn_fn, "cache_info") else None,
                                  "registry": sorted(str(k[0])[:60] for k in (getattr(cfx, "__warningregistry__", {}) or {}) if isinstance(k, tuple)),
                                  "filters": [str(f[0]) + ":" + getattr(f[2], "__name__", "") for f in warnings.filters[:6]]}), flush=True)


if __name__ == "__main__":
    main()
