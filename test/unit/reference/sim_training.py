#!/usr/bin/env python3
"""A training loop's allocation pattern, driven through the lens allocator's C API on the simulated device, with
the step facts the bootstrap writes (Note [Steps]): "backward" at each backward() end, "optimizer.step" at each
optimizer step end; the phase begins ("backward", "optimizer") and the tags of parameters, gradients and
optimizer state the bootstrap writes at each optimizer step for storages it has not seen (Note [Categories]).
Each kind of memory is allocated on its own line, so per-line figures are checkable; activations are made in
the forward() of two module classes (Attention: 3 × 6 MiB, MLP: 1 × 6 MiB).

    sim_training.py LIB.so OUT.gpumem STEPS [--leak BYTES] [--user-every K] [--accumulate K] [--no-facts]
                    [--blocks N] [--batch B] [--free-grads]

--leak BYTES     the loop keeps one BYTES tensor per step alive (history.append(loss) done wrong)
--user-every K   gpumem.step() (a MARK_STEP named "epoch-step") every K iterations: the override
--accumulate K   K backward() per optimizer step (gradient accumulation)
--no-facts       write no phase begins and no tags (an older bootstrap)
--module-paths   the bootstrap's module marks (Note [Module paths]): root "Net" around the forward, its
                 "blocks.0.attn", "blocks.0.mlp" and "blocks.1.attn" (a second Attention) inside it, and the loss
                 made in the root's own forward
--blocks N       the forward also calls Block.forward N times (a repeated block: 2, 3 and 1 MiB per call × batch,
                 the last its output), the checkpointing advice's input
--batch B        every activation is B times as large (parameters, gradients and state are not): the batch-size
                 advice's input
--free-grads     free the gradients before each forward (zero_grad(set_to_none=True)); default: kept allocated
Prints one JSON line: the lines each kind was allocated on and the allocated bytes at each step end.
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "native", "recorder"))
import common  # noqa: E402

MARK_STEP, MARK_PHASE, MARK_MODULE_BEGIN, MARK_MODULE_END = 4, 5, 6, 7
TAG_PARAMETER, TAG_GRADIENT, TAG_OPTIMIZER_STATE = 1, 2, 3
KiB = 1 << 10
MiB = 1 << 20


class Attention:
    def forward(self, m, keep):
        out = []
        for _ in range(3):
            out.append(keep(m(6 * MiB * BATCH, 0, None), 6 * MiB * BATCH, "act"))
        return out


class MLP:
    def forward(self, m, keep):
        return [keep(m(6 * MiB * BATCH, 0, None), 6 * MiB * BATCH, "act_mlp")]


class Block:
    def forward(self, m, keep):
        a = keep(m(2 * MiB * BATCH, 0, None), 2 * MiB * BATCH, "blk_a")
        b = keep(m(3 * MiB * BATCH, 0, None), 3 * MiB * BATCH, "blk_b")
        out = keep(m(1 * MiB * BATCH, 0, None), 1 * MiB * BATCH, "blk_out")
        return [a, b, out]


BATCH = 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("lib")
    ap.add_argument("capture")
    ap.add_argument("steps", type=int)
    ap.add_argument("--leak", type=int, default=0)
    ap.add_argument("--user-every", type=int, default=0)
    ap.add_argument("--accumulate", type=int, default=1)
    ap.add_argument("--no-facts", action="store_true")
    ap.add_argument("--module-paths", action="store_true")
    ap.add_argument("--blocks", type=int, default=0)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--free-grads", action="store_true")
    # --keeper (with --leak): the notice the bootstrap's leak keeper writes (Note [Leak keeper search]) at step 5's
    # end, naming history.append as the keeping line, made by the bootstrap's own functions
    ap.add_argument("--keeper", action="store_true")
    # --retain: backward(retain_graph=True) then history.append(loss): the backward frees neither the
    # activations nor the loss, history keeps each step's loss and, through its graph, its activations; with
    # --keeper, the notice lists every storage held, as the bootstrap's graph walk does (Note [Keeper graph walk])
    ap.add_argument("--retain", action="store_true")
    # --no-stacks: recorded as `gpumem run --no-stacks` records (Note [Not recorded])
    ap.add_argument("--no-stacks", action="store_true")
    a = ap.parse_args()
    global BATCH
    BATCH = a.batch
    lib = common.load(a.lib)
    common.configure(lib, capture_path=a.capture, sim_capacity=1 << 30, segments="expandable", stacks=not a.no_stacks)
    live = {}
    lines = {}

    def keep(p, size, kind):
        # the allocation is made on the caller's line (the innermost user frame is what the tool attributes)
        live[p] = size
        lines[kind] = sys._getframe(1).f_lineno
        return p

    def free(p):
        lib.gpumem_free(p, live.pop(p), 0, None)

    def mark(name):
        # a real loop spends microseconds between a step fact and its next allocation; the capture's times
        # are microseconds (Note [Step table])
        time.sleep(0.0002)
        lib.gpumem_mark(name, MARK_STEP)
        time.sleep(0.0002)

    def phase(name):
        if not a.no_facts:
            time.sleep(0.0002)
            lib.gpumem_mark(name, MARK_PHASE)
            time.sleep(0.0002)

    seen = {}

    def tag_changed():
        # what the bootstrap's optimizer walk does: a tag only for storages whose pointer it has not seen
        if a.no_facts:
            return
        for i, p in enumerate(params):
            # the first parameter is tagged through a view 1 KiB into its block: the block containing it counts
            addr, size = (p + KiB, KiB) if i == 0 else (p, live[p])
            for kind, x, n, cat in (("p", addr, size, TAG_PARAMETER), ("g", grads[i], live[grads[i]], TAG_GRADIENT)):
                if seen.get((kind, i)) != x:
                    seen[(kind, i)] = x
                    lib.gpumem_tag(x, n, cat, b"w%d" % i if kind == "p" else None, 0)
        for i, p in enumerate(state):
            if seen.get(("s", i)) != p:
                seen[("s", i)] = p
                lib.gpumem_tag(p, live[p], TAG_OPTIMIZER_STATE, None, 0)

    m = lib.gpumem_malloc
    params = [keep(m(4 * MiB, 0, None), 4 * MiB, "param") for _ in range(3)]
    grads, state, history, graphs = [], [], [], []
    attention, mlp, blocks = Attention(), MLP(), [Block() for _ in range(a.blocks)]
    for it in range(a.steps * a.accumulate):
        if a.free_grads and grads and it % a.accumulate == 0:
            for g in grads:
                free(g)
            grads = []
        scratch = keep(m(1 * MiB, 0, None), 1 * MiB, "fwd_tmp")
        free(scratch)
        if a.module_paths:
            def module(path, body):
                lib.gpumem_mark(path, MARK_MODULE_BEGIN)
                out = body()
                lib.gpumem_mark(path, MARK_MODULE_END)
                return out

            def net():
                acts = module(b"blocks.0.attn", lambda: attention.forward(m, keep))
                acts += module(b"blocks.0.mlp", lambda: mlp.forward(m, keep))
                acts += module(b"blocks.1.attn", lambda: attention.forward(m, keep))
                return acts, keep(m(512, 0, None), 512, "loss")

            acts, loss = module(b"Net", net)
        else:
            acts = attention.forward(m, keep) + mlp.forward(m, keep)
            for blk in blocks:
                acts += blk.forward(m, keep)
            loss = keep(m(512, 0, None), 512, "loss")
        if a.leak:
            kept = keep(m(a.leak, 0, None), a.leak, "leak")
            history.append(kept)  # KEEPER_LINE: what the bootstrap's keeper search names (--keeper)
        if a.retain:
            history.append(loss)  # RETAIN_LINE: keeps the loss, and its graph the step's activations
            graphs.append(list(acts))
        phase(b"backward")
        lib.gpumem_backward_begin()
        tmp = keep(m(2 * MiB, 0, None), 2 * MiB, "tmp")
        if not grads:
            grads = [keep(m(4 * MiB, 0, None), 4 * MiB, "grad") for _ in range(3)]
        free(tmp)
        if not a.retain:
            for p in acts:
                free(p)
            free(loss)
        lib.gpumem_backward_end()
        mark(b"backward")
        if (it + 1) % a.accumulate == 0:
            phase(b"optimizer")
            if not state:
                state = [keep(m(8 * MiB, 0, None), 8 * MiB, "state") for _ in range(3)]
            tag_changed()
            mark(b"optimizer.step")
            if a.keeper and (it + 1) // a.accumulate == 5:
                if a.retain:
                    retained_notice(lib, history[:4], graphs[:4], live)
                else:
                    keeper_notice(lib, history[:4], a.leak)
            if a.user_every and ((it + 1) // a.accumulate) % a.user_every == 0:
                mark(b"epoch-step")
    lib.gpumem_shutdown(0)
    if a.leak:
        lines["keeper"] = keeper_line()
    if a.retain:
        lines["keeper"] = keeper_line("# RETAIN_LINE")
    print(json.dumps({"lines": lines, "params": len(params), "history": len(history)}))


def keeper_line(mark="# KEEPER_LINE"):
    return next(i for i, l in enumerate(open(os.path.abspath(__file__)), 1) if mark in l and "history.append" in l)


def retained_notice(lib, losses, graphs, live):
    """The notice the bootstrap writes for --retain: the kept losses and every activation their graphs save, listed
    by the bootstrap's own listed_storages()."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "native", "python"))
    from gpumem import _keeper_notice, _keeper_search

    held = {p: live[p] for p in losses}
    held.update({p: live[p] for g in graphs for p in g})
    nbytes, addrs, complete = _keeper_search.listed_storages(held, first={losses[0], *graphs[0]})
    path = os.path.abspath(__file__)
    found = {"v": 1, "step": 5, "container": "history", "container_type": "list", "tensors": len(losses),
             "bytes": nbytes, "addrs": addrs, "own": [p for p in addrs if p in losses], "addrs_all": complete,
             "complete": True, "device": 0, "file": path,
             "scope": "main"}
    line = keeper_line("# RETAIN_LINE")  # the script has two history.append lines: the --retain one is the keeper
    found.update({"line": line, "how": "stores", "code": open(path).readlines()[line - 1].split("#")[0].strip()})
    lib.gpumem_notice((_keeper_notice.sentence(found) + "\n" + _keeper_notice.PREFIX + json.dumps(found, sort_keys=True)).encode(), 0)



def keeper_notice(lib, kept, nbytes):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "native", "python"))
    from gpumem import _keeper_notice, _keeper_site

    path, line = os.path.abspath(__file__), keeper_line()
    found = {"v": 1, "step": 5, "container": "history", "container_type": "list", "tensors": len(kept),
             "bytes": nbytes * len(kept), "addrs": kept, "own": kept, "complete": True, "device": 0, "file": path,
             "scope": "main"}
    found.update(_keeper_site.find_site(path, None, "history"))  # the bootstrap's own AST search of this file
    assert found["line"] == line, (found, line)
    lib.gpumem_notice(_keeper_notice.notice_text(found).encode(), 0)


if __name__ == "__main__":
    main()
