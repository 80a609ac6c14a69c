"""Models for the backward-on-forward-line check (test/gpu/backward_lines_check.py): a few training steps, the last
one measured against a reference that shares nothing with the product's mechanism.

    python3 backward_models.py MODEL --truth OUT.json [--steps 3] [--no-reference]

MODEL: efficientnet (torchvision EfficientNet-B0: depthwise convs, squeeze-excite, SiLU, stochastic depth; its
stages called from this file), bert (transformers BertForMaskedLM, 6 layers; the MLM head and the loss called from
this file), neox (transformers GPTNeoXForCausalLM, 6 layers, gradient checkpointing without reentrance), reentrant
(a small MLP stack of this file's own, checkpointed with use_reentrant=True).

The reference, on the last step only: anomaly mode (check_nan off) stores each autograd node's forward traceback when
the node is made; forward hooks on the leaf modules note which module's output each node is; before backward the
graph is walked from the loss and every node gets a pre-hook and a hook that stamp CLOCK_MONOTONIC (the clock of the
capture's events) on the autograd thread that runs it. An allocation made between a node's two stamps was made by
that node; one made between nodes (gradient sums, AccumulateGrad) by none. The truth file has the stamps, the nodes'
tracebacks and leaf modules, and the backward's window.
"""
import faulthandler
import os
import sys

faulthandler.dump_traceback_later(int(os.environ.get("GPUMEM_WATCHDOG_S", "240")), exit=True)
import argparse
import contextlib
import json
import time

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


def efficientnet():
    import torchvision

    m = torchvision.models.efficientnet_b0(num_classes=100).cuda()
    x = torch.randn(32, 3, 224, 224, device="cuda")
    y = torch.randint(0, 100, (32,), device="cuda")

    def loss_of():
        f = m.features(x)
        p = torch.flatten(m.avgpool(f), 1)
        logits = m.classifier(p)
        return F.cross_entropy(logits, y)

    return m, loss_of


def bert():
    from transformers import BertConfig, BertForMaskedLM

    cfg = BertConfig(hidden_size=512, num_hidden_layers=6, num_attention_heads=8, intermediate_size=2048)
    m = BertForMaskedLM(cfg).cuda()
    ids = torch.randint(0, cfg.vocab_size, (16, 256), device="cuda")

    def loss_of():
        h = m.bert(ids)[0]
        logits = m.cls(h)
        return F.cross_entropy(logits.view(-1, cfg.vocab_size), ids.view(-1))

    return m, loss_of


def neox():
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    cfg = GPTNeoXConfig(hidden_size=512, num_hidden_layers=6, num_attention_heads=8, intermediate_size=2048,
                        vocab_size=32000, max_position_embeddings=1024)
    m = GPTNeoXForCausalLM(cfg).cuda()
    m.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    m.config.use_cache = False
    ids = torch.randint(0, cfg.vocab_size, (8, 512), device="cuda")

    def loss_of():
        logits = m(input_ids=ids).logits
        return F.cross_entropy(logits[:, :-1].reshape(-1, cfg.vocab_size), ids[:, 1:].reshape(-1))

    return m, loss_of


class Block(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.up = torch.nn.Linear(d, 4 * d)
        self.down = torch.nn.Linear(4 * d, d)

    def forward(self, x):
        h = self.up(x)
        h = F.gelu(h)
        return x + self.down(h)


def reentrant():
    blocks = torch.nn.ModuleList(Block(1024) for _ in range(4)).cuda()
    x = torch.randn(64, 256, 1024, device="cuda", requires_grad=True)  # a reentrant checkpoint needs one

    def loss_of():
        h = x
        for b in blocks:
            h = checkpoint(b, h, use_reentrant=True)
        return h.float().pow(2).mean()

    return blocks, loss_of


MODELS = {"efficientnet": efficientnet, "bert": bert, "neox": neox, "reentrant": reentrant}


def walk(root):
    """Every node of the graph below `root`, once."""
    seen, order, todo = set(), [], [root]
    while todo:
        n = todo.pop()
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        order.append(n)
        todo.extend(f for f, _ in n.next_functions)
    return order


def frames_of(tb):
    """Anomaly mode's traceback (traceback.format_stack's strings) as [file, line, function], outermost first."""
    out = []
    for entry in tb or []:
        head = entry.strip().splitlines()[0] if entry.strip() else ""
        # '  File "x.py", line 12, in forward'
        if head.startswith("File "):
            try:
                file = head.split('"')[1]
                rest = head.split('"', 2)[2]
                line = int(rest.split("line ")[1].split(",")[0])
                func = rest.split(" in ", 1)[1] if " in " in rest else ""
                out.append([file, line, func])
            except (IndexError, ValueError):
                pass
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model", choices=sorted(MODELS))
    ap.add_argument("--truth", required=True)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--no-reference", action="store_true")
    args = ap.parse_args()
    torch.manual_seed(0)
    model, loss_of = MODELS[args.model]()
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    truth = {"model": args.model, "file": os.path.abspath(__file__), "steps": args.steps}
    # Forward hooks on the leaf modules in every step (a module with hooks runs another path of torch's Python, and a
    # step's stacks must be the same from step to step: Note [Learned steps] in native/allocator/src/backward_links.h).
    leaf_of = {}
    for path, mod in model.named_modules():
        if next(mod.children(), None) is None:
            def note(mod_, inp, out, path=path):
                for o in out if isinstance(out, (tuple, list)) else [out]:
                    if isinstance(o, torch.Tensor) and o.grad_fn is not None:
                        leaf_of[o.grad_fn._sequence_nr()] = (path, type(mod_).__name__)
            mod.register_forward_hook(note)
    for step in range(args.steps):
        last = step == args.steps - 1 and not args.no_reference
        stamps = []
        leaf_of.clear()
        # Every step's forward from this one line, the last one measured as any other.
        with torch.autograd.detect_anomaly(check_nan=False) if last else contextlib.nullcontext():
            loss = loss_of()
        if last:
            nodes = walk(loss.grad_fn)
            rows = []
            for i, n in enumerate(nodes):
                seq = n._sequence_nr()
                leaf = leaf_of.get(seq, (None, None))
                rows.append({"seq": seq, "name": n.name(), "tb": frames_of(n.metadata.get("traceback_")),
                             "leaf_module": leaf[0], "leaf_class": leaf[1]})
                n.register_prehook(lambda g, i=i: stamps.append((time.monotonic_ns(), 0, i)))
                n.register_hook(lambda gi, go, i=i: stamps.append((time.monotonic_ns(), 1, i)))
        torch.cuda.synchronize()
        t0 = time.monotonic_ns()
        loss.backward()  # the backward() line
        torch.cuda.synchronize()
        t1 = time.monotonic_ns()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if last:
            truth.update(bw_t0=t0, bw_t1=t1, nodes=rows, stamps=stamps,
                         backward_line=next(i + 1 for i, l in enumerate(open(__file__)) if "# the backward() line" in l
                                            and "loss.backward()" in l))
        del loss
    torch.cuda.synchronize()
    truth["max_allocated"] = torch.cuda.max_memory_allocated()
    with open(args.truth, "w") as f:
        json.dump(truth, f)
    print("done", args.model, "nodes", len(truth.get("nodes", [])), "stamps", len(truth.get("stamps", [])))
    # under gpumem run: the steps learned and known, and the misses (Note [Learned steps])
    state = sys.modules.get("gpumem._state")
    native = getattr(getattr(state, "STATE", None), "native", None) if state else None
    if native is not None:
        print("LINKS " + json.dumps(native.stack_info().get("backward_links")))


if __name__ == "__main__":
    main()
