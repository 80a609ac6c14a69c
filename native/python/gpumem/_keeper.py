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


Its parts: the heap search (_keeper_search.py, Note [Keeper graph walk] there), the container's name and line in the
user's code (_keeper_site.py) and the notice (_keeper_notice.py); this module watches the step ends.

What it cannot see: memory kept by C++ (retain_graph inside a library), tensors without a grad_fn kept in a list
(they are found as the leak's line, with no keeper), containers reachable only through C extension objects.
"""
import gc
import os
import sys
import time
import weakref

from . import _settings
from ._keeper_notice import notice_text
from ._keeper_search import (SAMPLE, Budget, device_of, find_holders, held_bytes, is_type, members_of, sample_of,
                             tensor_type)
from ._keeper_site import holder_name

GROWING = 3
COOLDOWN = 200
MAX_SEARCHES = 3  # per run: a leak that goes on is named once; another growth much later gets its own search
MAX_SKIPS = 5  # arm passes skipped for a slow heap scan before one counts as a search (Note [Keeper retries])
EXIT_BUDGET_MS = 10000  # the exit's look (Note [Keeper at the end])


def _env_ms():
    try:
        return max(1.0, float(os.environ.get("GPUMEM_KEEPER_MS", "200")))
    except ValueError:
        return 200.0


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
                    # Note [Keeper retries]: listing or scanning the heap took the search's budget (a loaded host, or a
                    # heap grown by what the process imported: the PyTorch-allocator mode's observer is loaded through
                    # torch.utils.cpp_extension, which imports setuptools). A scan cut short would confirm only the
                    # tensors it reached, and name no keeper or the wrong one: no search was made, so none is spent;
                    # the next growing step end tries again, up to MAX_SKIPS times a run.
                    self.skips += 1
                    self.missed.append("step %d: scanning the heap took the search's %d ms" % (self.steps, self.budget_ms))
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
        # nothing waits at the exit but the process's end: a whole scan of a large heap fits (and runs only when a
        # leak was suspected)
        budget_ms, self.budget_ms = self.budget_ms, max(self.budget_ms * 10, EXIT_BUDGET_MS)
        try:
            armed = self.arm()
            found = self.confirm(armed, None) if armed else None
        except Exception:  # the workload's exit must never see our failure
            return None
        finally:
            exit_ms, self.budget_ms = self.budget_ms, budget_ms
        at_exit = "at the exit: scanning the heap took %d ms" % exit_ms if armed is None else "at the exit: none held"
        if found and not self.results and found["tensors"] < self.growing:
            # At the exit nothing says a tensor outlived a step end: the last step's own loss, still named by a variable,
            # has a graph too. A container the step ends missed keeps one per growing step, at least `growing` of them.
            found = None
        if not found:
            if self.suspected and not self.results:
                # Note [Keeper at the end]: a leak was suspected and no search named what keeps it; one notice says
                # why, so the finding's reader knows the keeper was looked for (and is not merely unnamed).
                self._notice("gpumem: memory grew step after step, and no container keeping tensors with autograd "
                             "graphs was found (%s; %s); the leak finding names the allocating line"
                             % ("; ".join(self.missed[-3:] or ["no search completed"]), at_exit))
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
        T = tensor_type()
        if T is None:
            return []
        budget = Budget(self.budget_ms)
        out = []
        objs = gc.get_objects()
        if budget.over():  # the heap alone took the budget: no scan, no keeper (the finding stays)
            return None
        try:
            for i, o in enumerate(objs):
                try:  # a proxy whose __class__ or a tensor subclass whose grad_fn raises is not a candidate
                    if is_type(o, T) and getattr(o, "grad_fn", None) is not None and device_of(o) >= 0:
                        out.append(weakref.ref(o))
                except Exception:
                    pass
                if i & 4095 == 4095 and budget.over():
                    return None  # cut short: the tensors it did not reach may be the kept ones (Note [Keeper retries])
        finally:
            del objs
        return out

    # -- confirm: those still alive outlived a step end; who holds them -------------------------
    def confirm(self, armed, frame):
        alive = [t for t in (r() for r in armed) if t is not None and getattr(t, "grad_fn", None) is not None]
        if not alive:
            return None
        budget = Budget(self.budget_ms)
        # gc.get_referrers compares every reference in the heap with each argument: a sample of the survivors finds
        # the container; then the container itself says how many it holds. Note [Keeper sample]: the smallest
        # survivors first (a loop keeps its loss or a small output), then the oldest and the newest. Survivors that no
        # Python object holds can outnumber the kept ones by hundreds: the activations a saved_tensors_hooks pack hook
        # keeps as Python tensors (an offloading hook, or a hook that measures what the graphs save) are held from C++,
        # with no referrer gc can show, and lie anywhere in the heap's order. A sample of the heap's two ends alone
        # missed the kept losses of RegNetY and OPT loops with such a hook (H200, torch 2.11, the PyTorch-allocator
        # mode: every step-end search of three runs; the exit's look found them in three of four).
        sample = alive if len(alive) <= SAMPLE else sample_of(alive, SAMPLE)
        holders = find_holders(sample, budget, ours=(alive,))
        if not holders:
            return None
        container, held = max(holders.values(), key=lambda h: len(h[1]))
        if len(sample) < len(alive):
            held = members_of(container, {id(t): t for t in alive}) or held
        named = holder_name(container, frame, budget)
        found = {"v": 1, "step": self.steps, "container_type": type(container).__name__,
                 "tensors": len(held)}
        found.update(named)
        bytes_, addrs, complete, listed, own = held_bytes(held, budget)
        # "addrs_all": every held storage is listed (the walk ended, and none was left out for room); the reader then
        # decides by address alone what was kept at this moment (Note [Kept by address, then by line] in categories.cpp)
        complete = complete and not budget.hit
        found.update({"bytes": bytes_, "addrs": addrs, "own": [a for a in addrs if a in own], "addrs_all": listed and complete,
                      "complete": complete,
                      "device": device_of(held[0])})
        return found


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
    figures() gives the same counter without the dict (Note [Figures without the dict] in _observer_figures.py)."""
    from ._state import STATE

    if STATE.swapped and STATE.native is not None:
        return STATE.native.requested(-1)  # the lens allocator's own counter: no stats dict built
    figures = sys.modules.get("gpumem._observer_figures")  # loaded with the observer of PyTorch's allocator
    if figures is not None and figures.LIVE.figures_ext is not None:  # Note [Figures without the dict]: six numbers
        f = figures.extension_figures(torch.cuda.current_device())
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
