"""Probe: can backward's allocations be tied to the forward line that made their autograd node, cheaply?
Checks on real torch (GPU): (1) the profiler's forward ops and backward functions share sequence numbers;
(2) inside backward, torch._C._current_autograd_node() names the running node, and its _sequence_nr() equals
the forward op's; (3) a checkpointed block's recomputation runs forward ops inside backward.
    python3 test/gpu/probes/backward_seqnr.py   (prints one JSON line)"""
import faulthandler
faulthandler.dump_traceback_later(100, exit=True)
import json
import torch
import torch.utils.checkpoint as cp

m = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(8 * 30 * 30, 10)).cuda()
x = torch.randn(4, 3, 32, 32, device="cuda")
out = {"torch": torch.__version__}
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as p:
    m(x).sum().backward()
ev = p.events()
fwd = {e.sequence_nr: e.name for e in ev if e.sequence_nr >= 0 and not e.name.startswith("autograd::engine")}
bwd = [(e.sequence_nr, e.name) for e in ev if e.name.startswith("autograd::engine::evaluate_function")]
out["backward_functions"] = len(bwd)
out["backward_with_forward_seq"] = sum(1 for s, _ in bwd if s in fwd)
out["pairs"] = [[n.split(": ")[-1], fwd.get(s)] for s, n in bwd][:8]

# (2) the running node, from a hook inside backward
seen = []
cur = getattr(torch._C, "_current_autograd_node", None)
out["has_current_node"] = cur is not None
y = m[0](x)
y.register_hook(lambda g: seen.append((type(cur()).__name__ if cur else None,
                                       cur()._sequence_nr() if cur and cur() is not None and hasattr(cur(), "_sequence_nr") else None)))
node_seq = y.grad_fn._sequence_nr() if hasattr(y.grad_fn, "_sequence_nr") else None
m[3](m[2](m[1](y))).sum().backward()
out["hook_in_backward"] = seen
out["conv_node_seq"] = node_seq

# (3) checkpoint: forward ops during backward
lin = torch.nn.Linear(64, 64).cuda()
z = torch.randn(8, 64, device="cuda", requires_grad=True)
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as p2:
    cp.checkpoint(lambda t: torch.relu(lin(t)), z, use_reentrant=False).sum().backward()
names = [e.name for e in p2.events()]
out["checkpoint_recompute_addmm"] = names.count("aten::addmm")
print("PROBE " + json.dumps(out))
