"""The leak keeper: when allocated memory at step end grows step after step, name the Python container
that keeps tensors with autograd graphs alive, and the user's line that stores them there.

Note [Leak keeper search]: the reader finds leaks (Note [Leak rule] in src/core/analyses/steps/leaks.ts) and names the
line that *allocated* the growing memory; only the workload can see what *keeps* it. The bootstrap sees each
step end (Optimizer.step()'s global post hook, or gpumem.step()), so:
- Every step end costs one read of the live tensors' requested bytes and a comparison (no gc work).
- When the live tensors' requested bytes at step end have grown at GROWING (3) step ends in a row (Note [Keeper reads
  requested bytes]), the watch *arms*: one pass over
  gc.get_objects() keeps weak references to the CUDA tensors that have a grad_fn at that moment.
- At the next step end, if memory still grew, the armed tensors that are still alive *outlived a step end*: a
  training loop's own loss/outputs are replaced in the next iteration, kept ones are not. One
  gc.get_referrers() over them gives their containers (a list, dict, deque, an object's attribute or a frame
  variable; a tensor inside a dict inside a list climbs to the list); the container holding most of them is the
  keeper. It is named from the Python stack at the step end (a frame variable `history`, an attribute
  `self.history`, a module global), and the keeping line is found in that scope's source (its AST): the
  `history.append(…)`/`extend`/`insert`/`add`/`update`/`setdefault`/`appendleft`, `history += …`,
  `history[k] = …` of that name, else the line that assigns it (`prev = loss`).
- What it holds: the kept tensors, their count, and the bytes of their storages plus the tensors their graphs
  still save (a bounded walk of grad_fn.next_functions; a graph that backward() already freed saves nothing;
  Note [Keeper graph walk]). Every held storage's address goes along, those of the first kept tensor's graph
  first (one storage on every line the keeper holds), as many as fit the notice (NOTICE_MAX bytes: a capture's
  strings are cut at 4096), so the reader names the keeper on every line that allocated one (the loss line and the
  forward lines whose saved activations a retained graph keeps). "own" lists which of them are the kept tensors'
  own storages (the losses themselves): the others, what the graphs save, the reader counts as activations kept by
  the container (Note [Categories] in native/addon/src/categories.cpp); a kept tensor itself stays what it was.
- The result is one NOTICE record (no format change): a sentence for people, then a line
  `gpumem-keeper {json}` that the reader parses (src/core/analyses/steps/keeper.ts). Nothing is written when no kept
  tensor is found (a loop that keeps loss.item() has no keeper).
- Bounds: a search (arm + confirm) starts at most once per COOLDOWN (200) step ends and MAX_SEARCHES (3) times
  per run; the arm pass's scan stops after GPUMEM_KEEPER_MS (default 200 ms) and is skipped when listing the heap
  alone took that long; the confirm pass's gc.get_referrers() is one traversal of the heap (not interruptible),
  its graph walk stops at the budget or 20 000 nodes (the bytes are then marked incomplete). GPUMEM_KEEPER=0
  turns the watch off; any exception turns it off and is reported once, as a notice. Every other step end
  costs one read of the requested bytes and a comparison. Measured by test/bench/keeper/keeper_cost.py on the 2-core CI
  VM under load (load average 12, Python 3.11): the watch's own step end 0.2–0.5 µs; a heap of 0.68 M gc objects
  (a PyTorch + transformers process has 0.5–1 M): arm 0.21 s, confirm 0.04 s; 2.0 M objects: arm 0.26 s (the scan
  stopped at its budget), confirm 0.14 s; 1 004 kept dicts in a list: confirm 0.15 s (the referrers of a sample of
  SAMPLE (64) survivors are looked up, then the container is counted). Once per suspected leak, not per step.
  The GPU leaks stage prints the passes' times in the real workload (KEEPER line, steps_check.json keeper_cost).
- Of several store sites of the name (a warm-up append and the loop's), the one inside the innermost loop running
  the frame's current line is named: the training loop's.

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

What it cannot see: memory kept by C++ (retain_graph inside a library), tensors without a grad_fn kept in a list
(they are found as the leak's line, with no keeper), containers reachable only through C extension objects.
"""
import ast
import gc
import json
import linecache
import os
import sys
import time
import types
import weakref

from . import _settings

GROWING = 3
COOLDOWN = 200
SAMPLE = 64  # survivors whose referrers are looked up
MAX_SEARCHES = 3  # per run: a leak that goes on is named once; another growth much later gets its own search
MAX_SKIPS = 5  # arm passes skipped for a slow heap listing before one counts as a search (Note [Keeper retries])
PREFIX = "gpumem-keeper "
MUTATORS = ("append", "extend", "insert", "add", "update", "setdefault", "appendleft", "extendleft", "put")
_CONTAINERS = (list, tuple, dict, set, frozenset)
_OURS = os.path.dirname(os.path.abspath(__file__))



def _is(obj, types_):
    """isinstance by the object's real type. isinstance reads obj.__class__ when the type differs, and the heap
    holds library objects whose attribute lookups warn (torch.distributed.reduce_op in torch 2.11 did, on the
    user's stderr): the keeper's scans must not wake them."""
    return issubclass(type(obj), types_)


def _dict_of(obj):
    """obj.__dict__ without the object's own attribute hooks (the same reason as _is)."""
    try:
        return object.__getattribute__(obj, "__dict__")
    except Exception:
        return None

def _env_ms():
    try:
        return max(1.0, float(os.environ.get("GPUMEM_KEEPER_MS", "200")))
    except ValueError:
        return 200.0


def format_bytes(n):
    """Note [Byte formatting] (src/core/base/units/bytes.ts): three significant digits, binary units."""
    v = float(abs(n))
    if v < 1024:
        return "%d B" % round(v)
    units = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
    u = 0
    while v >= 1024 and u < len(units) - 1:
        v /= 1024.0
        u += 1
    text = "%.0f" % v if v >= 100 else ("%.1f" % v if v >= 10 else "%.2f" % v)
    if float(text) >= 1024 and u < len(units) - 1:
        u += 1
        text = "%.2f" % (v / 1024)
    return ("-" if n < 0 else "") + text + " " + units[u]


class _Budget:
    def __init__(self, ms):
        self.end = time.perf_counter() + ms / 1000.0
        self.hit = False

    def over(self):
        if time.perf_counter() > self.end:
            self.hit = True
        return self.hit


def _tensor_type():
    torch = sys.modules.get("torch")
    return getattr(torch, "Tensor", None)


def _device(t):
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


class KeeperWatch:
    """One per process. step_end(allocated) at every step end; writes the keeper through notice(text)."""

    def __init__(self, notice, growing=GROWING, cooldown=COOLDOWN, budget_ms=None):
        self._notice = notice
        self.growing = growing
        self.cooldown = cooldown
        self.budget_ms = budget_ms if budget_ms is not None else _env_ms()
        self.steps = 0
        self._last = None
        self._streak = 0
        self._armed = None       # weak references to tensors with a grad_fn at the arming step end
        self._next_search = 0    # step number before which no search starts
        self.searches = 0
        self.off = False
        self.results = []        # keepers written (dicts), for tests and the bench
        self.seconds = []        # wall time of each pass (arm, confirm)
        self.suspected = False   # a growth long enough to search for a keeper was seen
        self.skips = 0           # arm passes skipped because listing the heap took the budget (Note [Keeper retries])
        self.missed = []         # why searches found no keeper, for the exit's notice

    # -- per step ------------------------------------------------------------------------------
    def step_end(self, allocated, frame=None):
        if self.off:
            return
        self.steps += 1
        grew = self._last is not None and allocated > self._last
        self._last = allocated
        self._streak = self._streak + 1 if grew else 0
        if not grew:
            self._armed = None
            return
        try:
            if self._armed is not None:
                armed, self._armed = self._armed, None
                self._next_search = self.steps + self.cooldown
                t0 = time.perf_counter()
                found = self.confirm(armed, frame or sys._getframe(1))
                self.seconds.append(time.perf_counter() - t0)
                if found:
                    text = notice_text(found)
                    self.results.append(found)
                    self._notice(text)
                else:
                    self.missed.append("step %d: no tensor with a graph outlived the step end in a container" % self.steps)
            elif self._streak >= self.growing and self.steps >= self._next_search and self.searches < MAX_SEARCHES:
                self.suspected = True
                t0 = time.perf_counter()
                armed = self.arm()
                self.seconds.append(time.perf_counter() - t0)
                if armed is None:
                    # Note [Keeper retries]: the heap alone took the scan's budget (a loaded host): no search was made,
                    # so none is spent; the next growing step end tries again, up to MAX_SKIPS times a run.
                    self.skips += 1
                    self.missed.append("step %d: listing the heap took the search's %d ms" % (self.steps, self.budget_ms))
                    if self.skips > MAX_SKIPS:
                        self.searches += 1
                else:
                    self.searches += 1
                    self._armed = armed
        except Exception as e:  # the workload must never see our failure
            self.off = True
            self._armed = None
            try:
                self._notice("gpumem: the leak keeper search is off for this run (%s: %s); leak findings still name "
                             "the allocating line" % (type(e).__name__, e))
            except Exception:
                pass

    # -- at the end: what the keeper holds then ------------------------------------------------
    def final(self):
        """Note [Keeper at the end]: a keeper's notice describes the step end it was confirmed at (step 5: 4 tensors);
        a loop that goes on keeping holds more by the end (12 tensors at step 30), and the graphs it keeps after the
        notice hold storages that notice could not list. So once a keeper has been found, the process's exit (atexit,
        before the capture's end) looks once more: every CUDA tensor with a graph still alive, their container, what
        it holds, with a larger time budget than a step end's (nothing waits for it then). A second notice says so
        ("at the end, after step 30"), lists every storage held then, and the reader counts them as kept activations
        too; its figures replace the first's in the leak finding."""
        if self.off or not (self.results or self.suspected):
            return None
        budget_ms, self.budget_ms = self.budget_ms, self.budget_ms * 10
        try:
            armed = self.arm()
            found = self.confirm(armed, None) if armed else None
        except Exception:  # the workload's exit must never see our failure
            return None
        finally:
            self.budget_ms = budget_ms
        if found and not self.results and found["tensors"] < self.growing:
            # At the exit nothing says a tensor outlived a step end: the last step's own loss, still named by a variable,
            # has a graph too. A container the step ends missed keeps one per growing step, at least `growing` of them.
            found = None
        if not found:
            if self.suspected and not self.results:
                # Note [Keeper at the end]: a leak was suspected and no search named what keeps it; one notice says
                # why, so the finding's reader knows the keeper was looked for (and is not merely unnamed).
                self._notice("gpumem: memory grew step after step, and no container keeping tensors with autograd "
                             "graphs was found (%s; at the exit: none held); the leak finding names the allocating "
                             "line" % "; ".join(self.missed[-3:] or ["no search completed"]))
            return None
        if not self.results:
            # The step ends' searches missed it (Note [Keeper retries]): the exit's look is the keeper's only notice.
            found.setdefault("missed", self.missed[-3:])
        last = self.results[-1] if self.results else {}
        if not found.get("line") and last.get("container_type") == found.get("container_type"):
            for key in ("container", "file", "line", "how", "code", "scope"):  # no user frame at exit: named as before
                if key in last:
                    found[key] = last[key]
        found["at"] = "end"
        self.results.append(found)
        self._notice(notice_text(found))
        return found

    # -- arm: the CUDA tensors with a graph now ------------------------------------------------
    def arm(self):
        T = _tensor_type()
        if T is None:
            return []
        budget = _Budget(self.budget_ms)
        out = []
        objs = gc.get_objects()
        if budget.over():  # the heap alone took the budget: no scan, no keeper (the finding stays)
            return None
        try:
            for i, o in enumerate(objs):
                try:  # a proxy whose __class__ or a tensor subclass whose grad_fn raises is not a candidate
                    if _is(o, T) and getattr(o, "grad_fn", None) is not None and _device(o) >= 0:
                        out.append(weakref.ref(o))
                except Exception:
                    pass
                if i & 4095 == 4095 and budget.over():
                    break
        finally:
            del objs
        return out

    # -- confirm: those still alive outlived a step end; who holds them -------------------------
    def confirm(self, armed, frame):
        alive = [t for t in (r() for r in armed) if t is not None and getattr(t, "grad_fn", None) is not None]
        if not alive:
            return None
        budget = _Budget(self.budget_ms)
        # gc.get_referrers compares every reference in the heap with each argument: a sample of the oldest and the
        # newest survivors finds the container; then the container itself says how many it holds.
        sample = alive if len(alive) <= SAMPLE else alive[:SAMPLE // 2] + alive[-(SAMPLE // 2):]
        holders = _holders(sample, budget, ours=(alive,))
        if not holders:
            return None
        container, held = max(holders.values(), key=lambda h: len(h[1]))
        if len(sample) < len(alive):
            held = _members(container, {id(t): t for t in alive}) or held
        named = _name(container, frame, budget)
        found = {"v": 1, "step": self.steps, "container_type": type(container).__name__,
                 "tensors": len(held)}
        found.update(named)
        bytes_, addrs, complete, listed, own = _held_bytes(held, budget)
        # "addrs_all": every held storage is listed (the walk ended, and none was left out for room); the reader then
        # decides by address alone what was kept at this moment (Note [Kept by address, then by line] in categories.cpp)
        complete = complete and not budget.hit
        found.update({"bytes": bytes_, "addrs": addrs, "own": [a for a in addrs if a in own], "addrs_all": listed and complete,
                      "complete": complete,
                      "device": _device(held[0])})
        return found


def notice_text(found):
    """The notice: the sentence, then `gpumem-keeper {json}`, at most NOTICE_MAX bytes. The addresses are listed one
    kept graph's first (Note [Keeper graph walk]), so what a cut drops is the other steps' copies of the same lines;
    "addrs_all" says whether every held storage is listed."""
    found.setdefault("addrs_all", True)
    while True:
        text = sentence(found) + "\n" + PREFIX + json.dumps(found, sort_keys=True)
        over = len(text.encode("utf-8")) - NOTICE_MAX
        if over <= 0 or not found["addrs"]:
            return text
        found["addrs"] = found["addrs"][:-max(1, over // 8)]  # an address and its ", " take 8 to 22 bytes
        if "own" in found:
            listed = set(found["addrs"])
            found["own"] = [a for a in found["own"] if a in listed]
        found["addrs_all"] = False


def sentence(k):
    where = ("%s:%d" % (os.path.basename(k["file"]), k["line"])) if k.get("line") else "an unknown line"
    what = "stores them" if k.get("how") == "stores" else "assigns it"
    return ("gpumem: %s (a %s) keeps %d tensor%s with autograd graphs alive across steps (%s %s); %s at %s%s" % (
        k.get("container") or "a container", k["container_type"], k["tensors"], "" if k["tensors"] == 1 else "s",
        format_bytes(k["bytes"]), measured_at(k), what, where, (": " + k["code"]) if k.get("code") else ""))


def measured_at(k):
    """When a keeper's figures were read: "at step 5", or "at the end, after step 30" (Note [Keeper at the end])."""
    return ("at the end, after step %d" if k.get("at") == "end" else "at step %d") % k.get("step", 0)


def _members(container, ids, limit=1 << 20):
    """The kept tensors (ids: id → tensor) a container holds, directly or one level down (a dict/tuple/list per
    step); at most `limit` members are looked at."""
    if _is(container, types.FrameType):
        values = list(container.f_locals.values())
    elif _is(container, dict):
        values = container.values()
    elif _is(container, _CONTAINERS) or type(container).__name__ == "deque":
        values = container
    else:
        values = list(getattr(container, "__dict__", {}).values())
    out = []
    for i, v in enumerate(values):
        if i >= limit:
            break
        if id(v) in ids:
            out.append(v)
        elif _is(v, (dict, tuple, list)):
            for x in (v.values() if _is(v, dict) else v):
                if id(x) in ids:
                    out.append(x)
    return out


def _holders(alive, budget, ours=()):
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
            if _is(r, types.FrameType):
                if r.f_globals.get("__name__", "").startswith("gpumem"):
                    continue
                add(r, [v for v in r.f_locals.values() if id(v) in ids])
                continue
            if _is(r, dict):
                members = [v for v in r.values() if id(v) in ids]
            elif _is(r, _CONTAINERS) or type(r).__name__ == "deque" and hasattr(r, "__iter__"):
                members = [v for v in r if id(v) in ids]
            else:
                members = [v for v in (_dict_of(r) or {}).values() if id(v) in ids]
            if not members:
                continue
            add(r, members)
    finally:
        del refs
    # A small dict/tuple per kept tensor (history.append({"loss": loss})) climbs to the list, dict, set or deque
    # that holds two or more of those.
    small = [(k, c, ts) for k, (c, ts) in out.items() if _is(c, (dict, tuple)) and len(ts) == 1]
    if len(small) >= 2:  # one traversal, whatever the budget says: without it the container is unnamed
        uppers = {}
        by_id = {id(c): key for key, c, _ in small}
        refs = gc.get_referrers(*[c for _, c, _ in small])  # one heap traversal for all of them
        try:
            for r in refs:
                if id(r) in skip or r is out or r is small or r is refs or _is(r, (tuple, types.FrameType)):
                    continue
                if _is(r, dict) and "__builtins__" in r:
                    continue  # a module's globals: the name is found from the stack
                if _is(r, dict):
                    members = r.values()
                elif _is(r, (list, set)) or type(r).__name__ == "deque":
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


def _scope_lines(code):
    lines = [l for _, _, l in code.co_lines() if l is not None] if hasattr(code, "co_lines") else []
    return (min(lines), max(lines)) if lines else (code.co_firstlineno, 1 << 30)


def _user_frames(frame):
    f = frame
    while f is not None:
        fn = f.f_code.co_filename
        if not os.path.abspath(fn).startswith(_OURS):
            yield f
        f = f.f_back


def _name(container, frame, budget):
    """{"container": "history", "file", "line", "code", "how", "scope"} from the stack at the step end, or from
    the module globals, or the container's type alone."""
    if _is(container, types.FrameType):  # a frame variable keeps a tensor itself (prev = loss)
        T = _tensor_type()
        names = [n for n, v in list(container.f_locals.items())
                 if T is not None and _is(v, T) and getattr(v, "grad_fn", None) is not None]
        return _site(container, names[0] if names else "", container.f_globals is container.f_locals)
    for f in _user_frames(frame):
        local = f.f_locals
        module_level = f.f_globals is local
        for name, v in list(local.items()):
            if v is container:
                return _site(f, name, module_level)
            d = None if _is(v, (types.ModuleType, type)) else _dict_of(v)
            if _is(d, dict):
                for attr, av in list(d.items()):
                    if av is container:
                        return _site(f, "%s.%s" % (name, attr), module_level)
        if not module_level:
            for name, v in list(f.f_globals.items()):
                if v is container:
                    return _site(f, name, True)
        if budget.over():
            break
    for mod in list(sys.modules.values()):
        d = getattr(mod, "__dict__", None)
        if not _is(d, dict):
            continue
        for name, v in list(d.items()):
            if v is container:
                path = getattr(mod, "__file__", None) or ""
                out = {"container": name, "file": path, "line": 0, "how": "", "code": "", "scope": mod.__name__}
                out.update(_find_site(path, None, name) or {})
                return out
    return {"container": "", "file": "", "line": 0, "how": "", "code": "", "scope": ""}


def _site(frame, name, module_level):
    code = frame.f_code
    path = code.co_filename
    out = {"container": name, "file": path, "line": 0, "how": "", "code": "",
           "scope": "<module>" if module_level else code.co_name}
    site = _find_site(path, None if module_level else _scope_lines(code), name, frame.f_lineno)
    if site is None and not module_level:
        site = _find_site(path, None, name)  # e.g. self.history.append in another method of the class
    if site:
        out.update(site)
    return out


def _expr(node):
    if _is(node, ast.Name):
        return node.id
    if _is(node, ast.Attribute):
        inner = _expr(node.value)
        return inner + "." + node.attr if inner else None
    return None


def _matches(node, name):
    e = _expr(node)
    if e is None or not name:
        return False
    if e == name:
        return True
    # self.history named from the loop as trainer.history: the attribute path's last part decides
    return "." in name and "." in e and e.split(".", 1)[1] == name.split(".", 1)[1]


def _find_site(path, span, name, current=None):
    """The line in `path` (within span=(first, last) lines when given) that stores into `name`: a mutator call,
    `name += …`, `name[k] = …`; else a plain `name = …`. Of several, one inside the innermost loop running the
    frame's `current` line (the training loop), else the first."""
    lines = linecache.getlines(path)
    if not lines or not name:
        return None
    source = "".join(lines)
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    stores, assigns, loops = [], [], []
    for node in ast.walk(tree):
        if current and _is(node, (ast.For, ast.While, ast.AsyncFor)) and \
                node.lineno <= current <= getattr(node, "end_lineno", node.lineno):
            loops.append((node.end_lineno - node.lineno, node.lineno, node.end_lineno))
        ln = getattr(node, "lineno", None)
        if ln is None or (span and not span[0] <= ln <= span[1]):
            continue
        if _is(node, ast.Call) and _is(node.func, ast.Attribute) and node.func.attr in MUTATORS \
                and _matches(node.func.value, name):
            stores.append((ln, node))
        elif _is(node, ast.AugAssign) and _matches(node.target, name):
            stores.append((ln, node))
        elif _is(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if _is(node, ast.Assign) else [node.target]
            for t in targets:
                if _is(t, ast.Subscript) and _matches(t.value, name):
                    stores.append((ln, node))
                elif _matches(t, name):
                    assigns.append((ln, node))
    found, how = (stores, "stores") if stores else (assigns, "assigns")
    if not found:
        return None
    if loops:
        _, first, last = min(loops)
        found = [f for f in found if first <= f[0] <= last] or found
    line, node = min(found, key=lambda x: (x[0], getattr(x[1], "col_offset", 0)))
    # the statement's own text (no comment), its first line, at most 160 characters
    code = (ast.get_source_segment(source, node) or lines[line - 1]).strip().splitlines()[0][:160]
    return {"line": line, "how": how, "code": code}


MAX_ADDRS = 50000  # addresses per keeper: every held storage up to this many (the walk itself stops at 20 000 nodes)
# The capture cuts a notice at 1 MiB (Note [Long notices] in native/allocator/src/stack_capture.h): a keeper notice
# longer than that would lose its JSON's end, and the reader the whole keeper. Addresses are dropped from the end of
# the list until the notice fits (notice_text). Every held storage is listed, so the reader counts each saved tensor
# of a kept graph by its address, on whatever line made it (Note [Categories] in native/addon/src/categories.cpp):
# when only the first 4000 bytes fitted, a MobileNetV3 loop keeping twelve graphs had 98 % of its peak as "other".
NOTICE_MAX = 1000000


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
        for x in (v if _is(v, (tuple, list)) else (v,)):
            if T is not None and _is(x, T):
                out.append(x)
    return out


def _held_bytes(held, budget, max_nodes=20000, max_addrs=MAX_ADDRS):
    """Bytes of the kept tensors' storages and of the tensors their graphs still save (parameters excluded),
    each storage once; the held storages' base addresses, largest first (all of them up to max_addrs: the reader
    names the keeper on every line that allocated one, Note [Keeper graph walk])."""
    T = _tensor_type()
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
        if var is not None and T is not None and _is(var, T):
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
                if _device(x) >= 0 and not (getattr(x, "grad_fn", None) is None and getattr(x, "requires_grad", False)):  # a leaf: a parameter
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


_WATCH = None


def watch():
    """The process's watch (None when GPUMEM_KEEPER=0)."""
    global _WATCH
    if _WATCH is None and _settings.part_on("GPUMEM_KEEPER"):
        from ._state import STATE

        _WATCH = KeeperWatch(lambda text: STATE.native.notice(text, 0) if STATE.configured else None)
        import atexit

        atexit.register(_WATCH.final)  # after the capture's own atexit was registered: runs before it (Note [Keeper at the end])
    return _WATCH


def live_bytes(torch):
    """Note [Keeper reads requested bytes]: the bytes live tensors asked for, not the allocated bytes. PyTorch's
    allocated bytes count whole blocks: a cached block too little bigger than the request to be split (a remainder
    of 1 MiB or less of a large block) is handed out whole, so allocated-at-step-end wanders with which cached block
    each request met. GPT-2 small natively on an H100 (torch 2.11; test/gpu/probes/keeper_streaks.py, 80 steps):
    allocated at step end took 10 values over 3.04 MiB and rose at three step ends in a row twice (steps 60 and 79);
    the requested bytes took one value. Under `gpumem run` in the PyTorch-allocator mode each such streak armed a
    search, a heap scan of 130-240 ms, at the same two timed steps of every round of the step benchmark, for no
    leak. The requested bytes do not depend on the cache: one memory_stats() read under PyTorch's allocator (as
    memory_allocated() itself does), the lens allocator's own counter in lens mode; a torch without them falls back
    to allocated.

    The nested stats dict is read, not memory_stats(): that one flattens the nested dict in Python (about 150 keys
    joined, sorted and copied into an OrderedDict), at every step end, on the workload's main thread: 80–82 µs a
    step end on the 2-core CPU machine, against 0.1 (`python3 test/bench/keeper/live_bytes_read.py`, two runs). On an
    H100 host with real torch 2.11 the nested dict is still 17-30 µs a read; where the tracker extension is built its
    figures() gives the same counter without the dict (Note [Figures without the dict] in _observe.py)."""
    from ._state import STATE

    if STATE.swapped and STATE.native is not None:
        return STATE.native.requested(-1)  # the lens allocator's own counter: no stats dict built
    observe = sys.modules.get("gpumem._observe")
    if observe is not None and observe._figures_ext is not None:  # Note [Figures without the dict]: six numbers, no dict
        f = observe.extension_figures(torch.cuda.current_device())
        if f is not None:
            return f[5]
    nested = getattr(torch.cuda, "memory_stats_as_nested_dict", None)
    if nested is not None:
        requested = ((nested().get("requested_bytes") or {}).get("all") or {}).get("current")
    else:
        requested = torch.cuda.memory_stats().get("requested_bytes.all.current")
    return int(requested) if requested is not None else int(torch.cuda.memory_allocated())


def step_end(source):
    """Called at every step end the bootstrap sees ("optimizer" or "user"); once gpumem.step() has been called,
    only those count (Note [Steps])."""
    try:
        w = watch()
        if w is None or w.off:
            return
        if source == "user":
            w.user_steps = True
        elif getattr(w, "user_steps", False):
            return
        w.step_end(live_bytes(sys.modules["torch"]), sys._getframe(1))
    except Exception:  # reading the live bytes failed: no keeper, never an error in the workload
        return
