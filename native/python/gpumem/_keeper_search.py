"""The leak keeper's heap search (Note [Leak keeper search] in _keeper.py): which containers hold the tensors that
outlived a step end, and the storages they keep alive through their autograd graphs.

Note [Keeper graph walk]: what the walk reads, and what real torch (2.11) must show for it, checked on a GPU by
test/gpu/probes/keeper_walk_probe.py on the leaky convnet (test/gpu/workloads/leak_history.py --model convnet):
- `t.grad_fn` of a kept tensor is a node object; `node.next_functions` is a tuple of (node or None, input index)
  pairs; an AccumulateGrad node (a leaf that requires grad: a parameter) has `.variable`, the leaf.
- A C++ node's saved values are properties named `_saved_<name>` (torch/csrc/autograd/generated/
  python_functions.cpp: ReluBackward0._saved_result, ConvolutionBackward0._saved_input/_saved_weight,
  NllLossBackward0._saved_self/_saved_target/_saved_total_weight, AddmmBackward0._saved_mat1/_saved_mat2, …),
  listed by dir(); a value is a Tensor, a tuple/list of Tensors (cat's `_saved_tensors`…), or a plain value
  (`_saved_stride`: a tuple of ints; `_saved_dim`), which is skipped. Reading one unpacks the SavedVariable into a
  new Tensor object on the same storage (no copy, no allocation). After backward() without retain_graph it
  raises RuntimeError ("…after they have already been freed"): skipped. `_raw_saved_<name>` (a SavedTensor
  handle with no data pointer) is not read.
- A custom autograd.Function's node (a BackwardCFunction) has `saved_tensors` (ctx.save_for_backward); its
  deprecated `saved_variables` warns and is never read.
- A saved tensor that is a leaf with requires_grad (a parameter, `_saved_weight`) and a storage that an
  AccumulateGrad's `.variable` uses is not counted: parameters are no leak. Nor is a storage that the graphs of two
  different kept tensors both save (an input every step reuses: the batch `x`, the targets `y` of
  leak_history.py): the loop keeps it, and it would otherwise make the input's line look kept by the container.
Every attribute read is guarded: any exception skips that value, never the search. The walk is bounded (20 000
nodes, the search's time budget) and runs only at a confirm (once per suspected leak), never per step.
"""
import gc
import sys
import time
import types

SAMPLE = 64  # survivors whose referrers are looked up
_CONTAINERS = (list, tuple, dict, set, frozenset)
MAX_ADDRS = 50000  # addresses per keeper: every held storage up to this many (the walk itself stops at 20 000 nodes)


def is_type(obj, types_):
    """isinstance by the object's real type. isinstance reads obj.__class__ when the type differs, and the heap
    holds library objects whose attribute lookups warn (torch.distributed.reduce_op in torch 2.11 did, on the
    user's stderr): the keeper's scans must not wake them."""
    return issubclass(type(obj), types_)


def dict_of(obj):
    """obj.__dict__ without the object's own attribute hooks (the same reason as is_type)."""
    try:
        return object.__getattribute__(obj, "__dict__")
    except Exception:
        return None


class Budget:
    def __init__(self, ms):
        self.end = time.perf_counter() + ms / 1000.0
        self.hit = False

    def over(self):
        if time.perf_counter() > self.end:
            self.hit = True
        return self.hit


def tensor_type():
    torch = sys.modules.get("torch")
    return getattr(torch, "Tensor", None)


def device_of(t):
    try:
        return t.get_device()
    except Exception:
        return -1


def _storage(t):
    """(base address, bytes) of a tensor's storage, the bytes as the allocator counts them: rounded up to 512 B
    (both the lens allocator's and PyTorch's rounding), so a kept fp32 loss counts 512 B, not 4."""
    try:
        s = t.untyped_storage()
        base, n = s.data_ptr(), s.nbytes()
    except Exception:
        base, n = t.data_ptr(), t.numel() * t.element_size()
    return base, (n + 511) // 512 * 512


def members_of(container, ids, limit=1 << 20):
    """The kept tensors (ids: id → tensor) a container holds, directly or one level down (a dict/tuple/list per
    step); at most `limit` members are looked at."""
    if is_type(container, types.FrameType):
        values = list(container.f_locals.values())
    elif is_type(container, dict):
        values = container.values()
    elif is_type(container, _CONTAINERS) or type(container).__name__ == "deque":
        values = container
    else:
        values = list(getattr(container, "__dict__", {}).values())
    out = []
    for i, v in enumerate(values):
        if i >= limit:
            break
        if id(v) in ids:
            out.append(v)
        elif is_type(v, (dict, tuple, list)):
            for x in (v.values() if is_type(v, dict) else v):
                if id(x) in ids:
                    out.append(x)
    return out


def sample_of(alive, n):
    """n of the survivors to look up (Note [Keeper sample] in _keeper.py): the n/2 smallest, then the oldest and the
    newest of the others, in the heap's order."""
    def size(t):
        try:
            return t.numel()
        except Exception:  # a tensor subclass whose numel raises is looked at last
            return float("inf")
    smallest = sorted(range(len(alive)), key=lambda i: size(alive[i]))[:n // 2]
    taken = set(smallest)
    rest = [i for i in range(len(alive)) if i not in taken]
    ends = rest[:(n - len(smallest)) // 2] + rest[len(rest) - (n - len(smallest) - (n - len(smallest)) // 2):]
    return [alive[i] for i in sorted(taken | set(ends))]


def find_holders(alive, budget, ours=()):
    """id(container) → (container, [kept tensors]) over the direct referrers of the kept tensors, a tensor held
    in a small dict/tuple (history.append({"loss": loss})) counted for the container that holds that."""
    ids = {id(t): t for t in alive}
    me = sys._getframe()
    skip = {id(alive), id(ids), id(me)} | {id(o) for o in ours}
    out = {}

    def add(container, tensors):
        entry = out.setdefault(id(container), (container, []))
        have = {id(t) for t in entry[1]}
        entry[1].extend(t for t in tensors if id(t) not in have)

    refs = gc.get_referrers(*alive)
    try:
        for r in refs:
            if id(r) in skip or r is refs:
                continue
            if is_type(r, types.FrameType):
                if r.f_globals.get("__name__", "").startswith("gpumem"):
                    continue
                add(r, [v for v in r.f_locals.values() if id(v) in ids])
                continue
            if is_type(r, dict):
                members = [v for v in r.values() if id(v) in ids]
            elif is_type(r, _CONTAINERS) or type(r).__name__ == "deque" and hasattr(r, "__iter__"):
                members = [v for v in r if id(v) in ids]
            else:
                members = [v for v in (dict_of(r) or {}).values() if id(v) in ids]
            if not members:
                continue
            add(r, members)
    finally:
        del refs
    # A small dict/tuple per kept tensor (history.append({"loss": loss})) climbs to the list, dict, set or deque
    # that holds two or more of those.
    small = [(k, c, ts) for k, (c, ts) in out.items() if is_type(c, (dict, tuple)) and len(ts) == 1]
    if len(small) >= 2:  # one traversal, whatever the budget says: without it the container is unnamed
        uppers = {}
        by_id = {id(c): key for key, c, _ in small}
        refs = gc.get_referrers(*[c for _, c, _ in small])  # one heap traversal for all of them
        try:
            for r in refs:
                if id(r) in skip or r is out or r is small or r is refs or is_type(r, (tuple, types.FrameType)):
                    continue
                if is_type(r, dict) and "__builtins__" in r:
                    continue  # a module's globals: the name is found from the stack
                if is_type(r, dict):
                    members = r.values()
                elif is_type(r, (list, set)) or type(r).__name__ == "deque":
                    members = r
                else:
                    continue
                keys = [by_id[id(v)] for v in members if id(v) in by_id]
                if keys:
                    uppers[id(r)] = (r, keys)
        finally:
            del refs
        for r, keys in uppers.values():
            if len(keys) >= 2:
                for key in keys:
                    if key in out:
                        add(r, out.pop(key)[1])
    return out


def _saved_tensors(node, names, T):
    """The tensors a graph node saves for backward, read without side effects (Note [Keeper graph walk]): the
    `_saved_<name>` properties of a C++ node (a tensor, a tuple/list of tensors, or a plain value that is skipped),
    and a custom Function's `saved_tensors`. A property that raises (freed by backward(), or a saved value this
    torch cannot unpack) is skipped."""
    out = []
    for a in names:
        try:
            v = getattr(node, a)
        except Exception:  # freed by backward()
            continue
        for x in (v if is_type(v, (tuple, list)) else (v,)):
            if T is not None and is_type(x, T):
                out.append(x)
    return out


def held_bytes(held, budget, max_nodes=20000, max_addrs=MAX_ADDRS):
    """Bytes of the kept tensors' storages and of the tensors their graphs still save (parameters excluded),
    each storage once; the held storages' base addresses, largest first (all of them up to max_addrs: the reader
    names the keeper on every line that allocated one, Note [Keeper graph walk])."""
    T = tensor_type()
    storages = {}
    params = set()
    saved_names = {}
    seen = set()
    stack = []
    first = set()  # the storages of the first kept tensor and its graph: listed first
    own = set()  # the kept tensors' own storages (a loss, a kept output): not activations their graphs save
    for i, t in enumerate(held):
        base, n = _storage(t)
        if base:
            storages[base] = max(n, storages.get(base, 0))
            own.add(base)
            if i == 0:
                first.add(base)
        if getattr(t, "grad_fn", None) is not None:
            stack.append((t.grad_fn, i))
    complete = True
    # Note [Node wrappers die]: PyTorch hands out a C++ node's Python object afresh once the last one died
    # (functionToPyObject), so the id() of a node walked and dropped can come back as another node's. On real torch
    # that ended the walk two nodes below the loss (10 KiB found of 3.9 GiB on the leaky convnet). Every walked wrapper
    # stays alive in `walked` until the walk ends, so each id names one node for the whole walk.
    walked = []
    saved = {}   # base → bytes
    root = {}    # base → the kept tensor whose graph saved it first, or -1 once a second one's graph saves it too
    while stack:
        node, i = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        walked.append(node)
        if len(seen) > max_nodes or (len(seen) & 255 == 0 and budget.over()):
            complete = False
            break
        try:
            var = getattr(node, "variable", None)  # AccumulateGrad: a parameter
        except Exception:
            var = None
        if var is not None and T is not None and is_type(var, T):
            params.add(_storage(var)[0])
        names = saved_names.get(type(node))
        if names is None:
            try:  # C++ nodes: _saved_<name>; a custom autograd.Function's node: saved_tensors (never saved_variables,
                # which warns that it is deprecated)
                names = [a for a in dir(node) if a.startswith("_saved_") or a == "saved_tensors"]
            except Exception:
                names = []
            saved_names[type(node)] = names
        for x in _saved_tensors(node, names, T):
            try:
                if device_of(x) >= 0 and not (getattr(x, "grad_fn", None) is None and getattr(x, "requires_grad", False)):  # a leaf: a parameter
                    base, n = _storage(x)
                    if base:
                        saved[base] = max(n, saved.get(base, 0))
                        root[base] = i if root.get(base, i) == i else -1
            except Exception:
                continue
        try:
            nexts = getattr(node, "next_functions", ()) or ()
        except Exception:
            nexts = ()
        for nxt in nexts:
            if nxt and nxt[0] is not None:
                stack.append((nxt[0], i))
    for base, n in saved.items():
        # a storage that the graphs of two kept tensors both save is an input they share (the batch x reused by
        # every step, the targets): the loop keeps it, not the container; one graph's own activations count
        if base not in params and root.get(base) != -1:
            storages[base] = max(n, storages.get(base, 0))
            if root.get(base) == 0:
                first.add(base)
    total, addrs, listed = listed_storages(storages, max_addrs, first)
    return total, addrs, complete, listed, own


def listed_storages(storages, max_addrs=MAX_ADDRS, first=()):
    """(bytes, addresses, all listed) of held storages {base: bytes}: the addresses of `first` (one kept tensor and
    its graph: a storage on every line the keeper holds), then the others, each group largest first, up to
    max_addrs (the keeper notice's "addrs")."""
    top = sorted(storages.items(), key=lambda kv: (kv[0] not in first, -kv[1], kv[0]))[:max_addrs]
    return sum(storages.values()), [a for a, _ in top], len(storages) <= max_addrs
