"""The leak keeper (Note [Leak keeper search] in gpumem/_keeper.py): a training loop run under the bootstrap with the
stand-in torch, whose step ends come from Optimizer.step()'s global post hook. The keeper notice names the
container and the line that stores the kept tensors; loops that keep no graph get no keeper."""
import json
import unittest

import support

PREFIX = "gpumem-keeper "

# One parameter with Adam-like lazily made state; each step's loss is 512 bytes and its node saves an 8 KiB
# activation that backward() frees (like PyTorch's), so what is kept per step is the loss itself.
HEAD = """
    import json, sys, gpumem, torch
    from torch.optim.optimizer import Optimizer
    w = torch.empty(4096, device="cuda")
    w.requires_grad = True
    opt = Optimizer([w])
"""


def keepers(run, end=False):
    """The keepers the step ends confirmed; with end=True, those the exit read again (Note [Keeper at the end])."""
    found = [json.loads(l[len(PREFIX):]) for l in run.log() if l.startswith(PREFIX)]
    return [k for k in found if (k.get("at") == "end") == end]


def notices(run):
    return [l for l in run.log() if l.startswith("notice ")]


class KeeperTest(unittest.TestCase):
    def test_losses_kept_with_their_graphs_name_the_append_line(self):
        run = support.run_script(HEAD + """
    def train(steps):
        history = []
        for step in range(steps):
            loss = torch._fake_op(512, w, saved_bytes=8192)  # FORWARD
            history.append(loss)  # KEEP
            loss.backward()
            opt.step()
        return history

    kept = train(12)
    print(json.dumps([t.data_ptr() for t in kept]))
        """)
        self.assertEqual(run.code, 0, run.err)
        ptrs = json.loads(run.out.splitlines()[-1])
        [k] = keepers(run)  # one search per COOLDOWN step ends, however long the growth goes on
        self.assertEqual((k["container"], k["container_type"], k["scope"]), ("history", "list", "train"))
        self.assertEqual((k["file"], k["line"], k["how"]), (run.script, support.line_of(run.script, "# KEEP"), "stores"))
        self.assertEqual(k["code"], "history.append(loss)", "the statement, not its comment")
        # Armed at the 3rd growing step end (step 4: step 1 has no predecessor), confirmed at the next one: the
        # losses of steps 1-4 outlived a step end. Their activations were freed by backward(): 512 B each.
        self.assertEqual((k["step"], k["tensors"], k["bytes"], k["complete"], k["device"]), (5, 4, 4 * 512, True, 0))
        self.assertEqual(sorted(k["addrs"]), sorted(ptrs[:4]))
        # The notice's first line is the sentence people read.
        [text] = [n for n in notices(run) if "keeps" in n and "at the end" not in n]
        self.assertEqual(text, "notice 0 gpumem: history (a list) keeps 4 tensors with autograd graphs alive across "
                               "steps (2.00 KiB at step 5); stores them at script.py:%d: history.append(loss)"
                         % support.line_of(run.script, "# KEEP"))

    def test_a_keeper_is_read_again_at_exit_with_every_tensor_it_then_holds(self):
        # Note [Keeper at the end]: confirmed at step 5 with 4 losses; by the exit the module-level list holds 12, and
        # a second notice says so, named as the first, dated "at the end", listing every loss it then holds.
        run = support.run_script(HEAD + """
    history = []
    for step in range(12):
        loss = torch._fake_op(512, w, saved_bytes=8192)
        history.append(loss)  # KEEP
        loss.backward()
        opt.step()
    print(json.dumps([t.data_ptr() for t in history]))
        """)
        self.assertEqual(run.code, 0, run.err)
        ptrs = json.loads(run.out.splitlines()[-1])
        [k] = keepers(run)
        [e] = keepers(run, end=True)
        self.assertEqual((k["step"], k["tensors"]), (5, 4))
        self.assertEqual((e["at"], e["step"], e["tensors"], e["bytes"]), ("end", 12, 12, 12 * 512))
        self.assertEqual((e["container"], e["line"], e["how"]), ("history", support.line_of(run.script, "# KEEP"), "stores"))
        self.assertEqual(sorted(e["addrs"]), sorted(ptrs))
        [text] = [n for n in notices(run) if "at the end" in n]
        self.assertIn("keeps 12 tensors with autograd graphs alive across steps (6.00 KiB at the end, after step 12)", text)

    def test_the_heap_scan_wakes_no_deprecated_attribute(self):
        # A library object whose __class__ lookup warns (torch.distributed.reduce_op in torch 2.11 did, on the
        # user's stderr, during the keeper's scan of the heap): the scan must read types, not attributes.
        run = support.run_script(HEAD + """
    import warnings
    class Deprecated:
        def __getattribute__(self, name):  # like torch.distributed.reduce_op: every attribute warns
            warnings.warn("reduce_op is deprecated", FutureWarning)
            return object.__getattribute__(self, name)
    old = Deprecated()
    history = []
    for step in range(8):
        loss = torch._fake_op(512, w, saved_bytes=8192)
        history.append(loss)
        loss.backward()
        opt.step()
        """)
        self.assertEqual(run.code, 0, run.err)
        self.assertEqual(len(keepers(run)), 1, run.err)  # the scan ran
        self.assertNotIn("deprecated", run.err)

    def test_graphs_kept_without_backward_count_their_saved_activations(self):
        # An evaluation loop that keeps outputs with graphs: the activations stay saved, and count.
        run = support.run_script(HEAD + """
    outputs = {}
    for step in range(8):
        out = torch._fake_op(1024, w, saved_bytes=8192)
        outputs[step] = out  # KEEP
        opt.step()
        """)
        self.assertEqual(run.code, 0, run.err)
        [k] = keepers(run)
        self.assertEqual((k["container"], k["container_type"], k["scope"], k["how"]), ("outputs", "dict", "<module>", "stores"))
        self.assertEqual(k["line"], support.line_of(run.script, "# KEEP"))
        # four outputs (1 KiB) and the activation each one's node saves (8 KiB); the parameter w is an input the
        # nodes save too, and is not counted (it is no leak)
        self.assertEqual((k["tensors"], k["bytes"]), (4, 4 * (1024 + 8192)))
        self.assertEqual(len(k["addrs"]), 8)

    def test_retained_graphs_name_every_storage_they_save_not_the_shared_inputs(self):
        # The leaky convnet in small: backward(retain_graph=True), then history.append(loss). Each
        # step's graph is shaped like PyTorch's (ConvolutionBackward0._saved_input, ReluBackward0._saved_result,
        # MeanBackward1's plain _saved_dim, AddmmBackward0._saved_mat1, LogSoftmaxBackward0._saved_result,
        # NllLossBackward0._saved_self/_saved_target/_saved_total_weight) and keeps six storages alive: 24 for the
        # four kept losses, more than the 16 addresses the keeper used to list, so the lines of the smaller ones
        # (the loss line) went unnamed. The batch x and the targets y are saved by every step's graph: the loop
        # keeps them, not history.
        run = support.run_script(HEAD + """
    x = torch.empty(3072, device="cuda")  # the batch, reused by every step
    y = torch.empty(512, device="cuda")   # the targets
    def forward():
        a1 = torch._fake_op(40960, x, w, node="ConvolutionBackward0", saves={"input": x, "weight": w, "stride": (1, 1)})
        r1 = torch._fake_op(40960, a1, node="ReluBackward0", saves={"result": "out"})
        a2 = torch._fake_op(40960, r1, w, node="ConvolutionBackward0", saves={"input": r1, "weight": w, "stride": (1, 1)})
        r2 = torch._fake_op(40960, a2, node="ReluBackward0", saves={"result": "out"})
        m = torch._fake_op(16384, r2, node="MeanBackward1", saves={"dim": (2, 3), "self_sym_sizes": (32, 64, 8, 8)})
        logits = torch._fake_op(1536, m, w, node="AddmmBackward0", saves={"mat1": m, "mat2": w, "alpha": 1})
        ls = torch._fake_op(1536, logits, node="LogSoftmaxBackward0", saves={"result": "out", "dim": 1})
        tw = torch.empty(512, device="cuda")
        loss = torch._fake_op(512, ls, node="NllLossBackward0", saves={"self": ls, "target": y, "total_weight": tw})
        return loss, [t.data_ptr() for t in (r1, r2, m, ls, tw, loss)]

    history, held = [], []
    for step in range(8):
        loss, ptrs = forward()
        history.append(loss)  # KEEP
        held.append(ptrs)
        loss.backward(retain_graph=True)
        opt.step()
    print(json.dumps(held))
        """)
        self.assertEqual(run.code, 0, run.err)
        held = json.loads(run.out.splitlines()[-1])
        [k] = keepers(run)
        self.assertEqual((k["container"], k["line"], k["step"], k["tensors"], k["complete"]),
                         ("history", support.line_of(run.script, "# KEEP"), 5, 4, True))
        # the losses of steps 1-4 and what their graphs save: 2 × 40 KiB relu results, 16 KiB mean, 1.5 KiB
        # log-softmax result, 512 B total weight, 512 B loss a step; not x, y or the parameter w
        self.assertEqual(k["bytes"], 4 * (2 * 40960 + 16384 + 1536 + 512 + 512))
        self.assertEqual(sorted(k["addrs"]), sorted(p for step in held[:4] for p in step))
        self.assertEqual(len(k["addrs"]), 24)
        # the losses themselves are the kept tensors' own storages, not activations their graphs save
        self.assertEqual(sorted(k["own"]), sorted(step[-1] for step in held[:4]))

    def test_a_notice_lists_every_held_storage_past_four_kibibytes_first_graph_first(self):
        # 4 kept losses whose graphs save 60 activations each: 244 addresses, ≈ 4 KiB of JSON, more than a capture's
        # names may hold (4096 bytes). A notice may hold 1 MiB (Note [Long notices] in stack_capture.h): every held
        # storage is listed, so the reader counts each by its address; the first kept graph's come first.
        run = support.run_script(HEAD + """
    def forward():
        h, ptrs = w, []
        for _ in range(60):
            h = torch._fake_op(1024, h, node="ReluBackward0", saves={"result": "out"})
            ptrs.append(h.data_ptr())
        loss = torch._fake_op(512, h, node="SumBackward0", saves={"self_sym_sizes": (256,)})
        return loss, ptrs + [loss.data_ptr()]

    history, held = [], []
    for step in range(8):
        loss, ptrs = forward()
        history.append(loss)  # KEEP
        held.append(ptrs)
        loss.backward(retain_graph=True)
        opt.step()
    print(json.dumps(held))
        """)
        self.assertEqual(run.code, 0, run.err)
        held = json.loads(run.out.splitlines()[-1])
        [k] = keepers(run)  # the JSON parses: the notice was not cut
        [text] = [n for n in notices(run) if "keeps" in n and "at the end" not in n]
        line = [l for l in run.log() if l.startswith(PREFIX) and '"at": "end"' not in l][0]
        self.assertGreater(len((text[len("notice 0 "):] + "\n" + line).encode()), 4096)
        self.assertEqual((k["tensors"], k["bytes"], k["complete"], k["addrs_all"]), (4, 4 * (60 * 1024 + 512), True, True))
        self.assertEqual(sorted(k["addrs"]), sorted(p for step in held[:4] for p in step))
        # the first kept graph's 61 storages first, largest first (the 60 activations, then its 512 B loss)
        self.assertEqual(set(k["addrs"][:61]), set(held[0]))
        self.assertEqual(k["addrs"][60], held[0][-1])
        # at the exit, all 8 kept graphs: 488 addresses
        [e] = keepers(run, end=True)
        self.assertEqual((e["tensors"], len(e["addrs"]), e["addrs_all"]), (8, 8 * 61, True))

    def test_dicts_in_a_list_on_an_object_climb_to_the_list_attribute(self):
        run = support.run_script(HEAD + """
    class Trainer:
        def __init__(self):
            self.log = []

        def step(self):
            loss = torch._fake_op(512, w)
            self.log.append({"loss": loss, "lr": 0.1})  # KEEP
            opt.step()

    t = Trainer()
    for _ in range(7):
        t.step()
        """)
        self.assertEqual(run.code, 0, run.err)
        [k] = keepers(run)
        self.assertEqual((k["container"], k["container_type"], k["scope"]), ("self.log", "list", "step"))
        self.assertEqual((k["line"], k["how"], k["tensors"]), (support.line_of(run.script, "# KEEP"), "stores", 4))

    def test_more_kept_tensors_than_the_sample_are_all_counted(self):
        # 100 kept in a warm-up with no optimizer step, then the loop: the referrer lookup samples 64 of the 104
        # survivors (gpumem/_keeper_search.py SAMPLE); the container found counts all of them.
        run = support.run_script(HEAD + """
    history = []
    for _ in range(100):
        history.append({"loss": torch._fake_op(512, w)})
    for step in range(6):
        history.append({"loss": torch._fake_op(512, w)})  # KEEP
        opt.step()
        """)
        self.assertEqual(run.code, 0, run.err)
        [k] = keepers(run)
        self.assertEqual((k["container"], k["line"], k["tensors"], k["bytes"]),
                         ("history", support.line_of(run.script, "# KEEP"), 104, 104 * 512))
        self.assertEqual(k["code"], 'history.append({"loss": torch._fake_op(512, w)})')

    def test_kept_losses_are_found_among_many_saved_tensors_that_python_cannot_see_holding(self):
        # A saved_tensors_hooks pack hook that returns the tensor (as a truth-gathering or offloading hook may) keeps
        # every saved activation as a Python tensor with a graph, held from C++ where gc shows no referrer. Hundreds
        # of them surround the kept losses in the heap: the search samples the smallest survivors (a loop keeps its
        # loss, or a small output), not only the oldest and the newest, or it finds no container.
        run = support.run_script(HEAD + """
    import gc
    class Saved:  # a holder gc cannot look into, like autograd's SavedVariable
        __slots__ = ("t",)
    # The heap's order is the collector's: here the kept losses lie in its middle, half the activations either side.
    listed = gc.get_objects
    def middle(o, i):
        if not isinstance(o, torch.Tensor) or o.grad_fn is None:
            return 0
        return 2 if o.numel() == 512 else 1 + 2 * (i % 2)
    gc.get_objects = lambda *a: [o for _, _, o in sorted((middle(o, i), i, o) for i, o in enumerate(listed(*a)))]
    graphs, history = [], []
    def acts():
        for _ in range(40):
            h = Saved()
            h.t = torch._fake_op(65536, w)
            graphs.append(h)
    for step in range(8):
        acts()
        loss = torch._fake_op(512, w)
        history.append(loss)  # KEEP
        acts()
        opt.step()
        """)
        self.assertEqual(run.code, 0, run.err)
        [k] = keepers(run)
        self.assertEqual((k["container"], k["container_type"], k["step"], k["tensors"]), ("history", "list", 5, 4))
        self.assertEqual(k["line"], support.line_of(run.script, "# KEEP"))

    def test_a_loop_that_keeps_loss_item_has_no_keeper_even_while_memory_grows(self):
        # Memory grows (a cache of plain tensors), so the watch arms; no tensor with a graph outlives a step end.
        run = support.run_script(HEAD + """
    history, cache = [], []
    for step in range(12):
        loss = torch._fake_op(512, w, saved_bytes=8192)
        history.append(loss.item())
        cache.append(torch.empty(2048, device="cuda"))
        loss.backward()
        opt.step()
    from gpumem import _keeper
    print(json.dumps({"passes": len(_keeper._WATCH.seconds), "results": _keeper._WATCH.results}))
        """)
        self.assertEqual(run.code, 0, run.err)
        self.assertEqual(keepers(run), [])
        # The growth was seen and searched for: one notice says no keeper holds graphs, so the leak names its line.
        self.assertEqual(notices(run), ["notice 0 gpumem: memory grew step after step, and no container keeping tensors "
                                        "with autograd graphs was found (step 5: no tensor with a graph outlived the step "
                                        "end in a container; at the exit: none held); the leak finding names the "
                                        "allocating line"])
        self.assertEqual(json.loads(run.out.splitlines()[-1]), {"passes": 2, "results": []})

    def test_a_failing_search_is_reported_once_and_training_goes_on(self):
        run = support.run_script(HEAD + """
    import gc
    def broken():
        raise MemoryError("no room for the object list")
    gc.get_objects = broken
    history = []
    for step in range(10):
        loss = torch._fake_op(512, w)
        history.append(loss)
        opt.step()
    print("done", len(history))
        """)
        self.assertEqual(run.code, 0, run.err)
        self.assertEqual(run.out.split(), ["done", "10"])
        self.assertEqual(notices(run), ["notice 0 gpumem: the leak keeper search is off for this run (MemoryError: no room "
                                        "for the object list); leak findings still name the allocating line"])
        self.assertEqual(keepers(run), [])

    def test_gpumem_step_marks_are_the_steps_once_used_and_keeper_can_be_turned_off(self):
        body = """
    history = []
    for step in range(12):
        loss = torch._fake_op(512, w)
        history.append(loss)  # KEEP
        opt.step()
        if step % 2:
            gpumem.step()
    from gpumem import _keeper
    print(_keeper._WATCH.steps if _keeper._WATCH else "off")
        """
        run = support.run_script(HEAD + body)
        self.assertEqual(run.code, 0, run.err)
        # optimizer steps count until the first gpumem.step() (loop steps 0 and 1), then only the user marks
        # (loop steps 1, 3, …, 11: 6)
        self.assertEqual(run.out.split(), ["8"])
        [k] = keepers(run)
        self.assertEqual(k["line"], support.line_of(run.script, "# KEEP"))
        off = support.run_script(HEAD + body, env={"GPUMEM_KEEPER": "0"})
        self.assertEqual(off.code, 0, off.err)
        self.assertEqual((off.out.split(), keepers(off)), (["off"], []))


class BoundsTest(unittest.TestCase):
    def test_searches_start_after_three_growths_then_once_per_cooldown_at_most_three_times(self):
        import sys
        sys.path.insert(0, str(support.PY_DIR))
        from gpumem._keeper import KeeperWatch

        w = KeeperWatch(lambda text: None)
        arms, confirms = [], []
        w.arm = lambda: arms.append(w.steps) or []
        w.confirm = lambda armed, frame: confirms.append(w.steps)
        allocated = 1000
        for step in range(1, 1001):
            # flat at steps 100-101 (a streak restarts), growing everywhere else
            allocated += 0 if step in (100, 101) else 512
            w.step_end(allocated)
        # step 1 has no predecessor: growths at 2, 3, 4 arm at 4; confirmed at 5; the next search waits 200 step ends
        # (the streak broken at 100-101 has long recovered), and there are 3 at most
        self.assertEqual((arms, confirms), ([4, 205, 406], [5, 206, 407]))


    def test_a_heap_scan_cut_short_by_its_budget_is_no_search(self):
        # Note [Keeper retries]: a scan that stops part way would confirm only the tensors it reached; it counts as
        # skipped (None), not as a search that found nothing, and the next growing step end scans again.
        import sys
        import types
        sys.path.insert(0, str(support.PY_DIR))
        from gpumem import _keeper

        class Tensor:
            grad_fn = object()
            is_cuda = True
            device = types.SimpleNamespace(index=0, type="cuda")

            def get_device(self):
                return 0
        fake = types.SimpleNamespace(Tensor=Tensor)
        saved = sys.modules.get("torch")
        sys.modules["torch"] = fake
        try:
            kept = [Tensor() for _ in range(3)]
            heap = [object() for _ in range(20000)] + kept  # the kept tensors last: a short scan misses them
            _keeper.gc.get_objects, real = (lambda: list(heap)), _keeper.gc.get_objects
            try:
                clock = iter(range(10 ** 6))
                _keeper.Budget.over, real_over = (lambda b: next(clock) >= 2), _keeper.Budget.over  # over from the 3rd look
                try:
                    self.assertIsNone(_keeper.KeeperWatch(lambda text: None, budget_ms=1).arm())
                finally:
                    _keeper.Budget.over = real_over
                armed = _keeper.KeeperWatch(lambda text: None, budget_ms=60000).arm()
                self.assertEqual([r() for r in armed], kept)
            finally:
                _keeper.gc.get_objects = real
        finally:
            if saved is None:
                sys.modules.pop("torch", None)
            else:
                sys.modules["torch"] = saved


class LiveBytesTest(unittest.TestCase):
    """Note [Keeper reads requested bytes]: under PyTorch's allocator the watch reads the requested bytes, which do not
    wander with which cached block a request met; the allocated bytes do."""

    def _torch(self, stats, allocated=None, nested=False):
        """A torch.cuda with memory_stats() (flat keys) and, with `nested`, memory_stats_as_nested_dict() as PyTorch
        builds both from one set of figures; `stats` yields the flat dicts."""
        import types

        def as_nested(device=None):
            out = {}
            for key, value in next(stats).items():
                d = out
                *parents, leaf = key.split(".")
                for part in parents:
                    d = d.setdefault(part, {})
                d[leaf] = value
            return out
        cuda = types.SimpleNamespace(memory_stats=lambda: next(stats), memory_allocated=lambda: allocated)
        if nested:
            cuda.memory_stats_as_nested_dict = as_nested
        return types.SimpleNamespace(cuda=cuda)

    def test_a_step_end_that_reuses_other_cached_blocks_is_no_growth(self):
        import sys
        sys.path.insert(0, str(support.PY_DIR))
        from gpumem._keeper import KeeperWatch, live_bytes

        # The same 40 live tensors every step end; PyTorch hands some of them a cached block up to 1 MiB larger (not
        # split), a different set each step, so allocated wanders: 0, 2, 4, 6, … 12, 1, 3, … MiB over the requested.
        requested = 40 * (3 << 20)
        wander = [((s * 7919) % 13) << 20 for s in range(30)]
        stats = iter([{"requested_bytes.all.current": requested, "allocated_bytes.all.current": requested + w}
                      for w in wander])
        torch = self._torch(stats)
        by_requested, by_allocated = KeeperWatch(lambda text: None), KeeperWatch(lambda text: None)
        for w in (by_requested, by_allocated):
            w.arm = lambda w=w: w.results.append(("arm", w.steps)) or []
        for wd in wander:
            by_requested.step_end(live_bytes(torch))
            by_allocated.step_end(requested + wd)
        self.assertEqual(by_requested.results, [])
        # what reading allocated did: risen at step ends 2, 3 and 4, so a heap scan at 4 (then the cool-down)
        self.assertEqual(by_allocated.results, [("arm", 4)])

    def test_without_requested_bytes_the_allocated_bytes_are_read(self):
        import sys
        sys.path.insert(0, str(support.PY_DIR))
        from gpumem._keeper import live_bytes

        for nested in (False, True):
            self.assertEqual(live_bytes(self._torch(iter([{}]), allocated=5 << 20, nested=nested)), 5 << 20)
            got = live_bytes(self._torch(iter([{"requested_bytes.all.current": 7, "requested_bytes.all.peak": 9,
                                                "allocated_bytes.all.current": 512}]), allocated=512, nested=nested))
            self.assertEqual(got, 7, "nested" if nested else "flat")

    def test_the_nested_stats_are_read_where_torch_has_them(self):
        import sys
        sys.path.insert(0, str(support.PY_DIR))
        from gpumem._keeper import live_bytes

        torch = self._torch(iter([{"requested_bytes.all.current": 11}]), nested=True)
        torch.cuda.memory_stats = lambda: self.fail("memory_stats() flattens the stats in Python at every step end")
        self.assertEqual(live_bytes(torch), 11)

    def test_the_tracker_extensions_figures_are_read_without_the_dict(self):
        """Note [Figures without the dict]: where the tracker extension has figures(), the requested bytes come from
        it, for the current device, and no stats dict is built; a figures() that fails falls back to the dict."""
        import sys
        import types
        sys.path.insert(0, str(support.PY_DIR))
        from gpumem import _observer_figures
        from gpumem._keeper import live_bytes
        from gpumem._observer_live import LIVE

        asked = []

        def figures(device):
            asked.append(device)
            # allocated, reserved, peak allocated, peak reserved, OOMs, requested: each from its own device
            return [100 + device, 200 + device, 300 + device, 400 + device, 0, (device + 1) * 7000]

        torch = self._torch(iter([{"requested_bytes.all.current": 11}] * 2), nested=True)
        torch.cuda.current_device = lambda: 2
        nested = torch.cuda.memory_stats_as_nested_dict
        torch.cuda.memory_stats_as_nested_dict = lambda *a: self.fail("the nested dict was built")
        saved = LIVE.figures_ext
        try:
            LIVE.figures_ext = types.SimpleNamespace(figures=figures)
            self.assertEqual(live_bytes(torch), 21000)
            self.assertEqual(asked, [2])
            self.assertEqual(_observer_figures.figures_now(torch, 1), (101, 201, 301, 401, 0, 14000))

            def broken(device):
                raise RuntimeError("no stats in this build")
            LIVE.figures_ext = types.SimpleNamespace(figures=broken)
            torch.cuda.memory_stats_as_nested_dict = nested
            self.assertEqual(live_bytes(torch), 11)
            # a stand-in tracker without figures (the history fallback has none): the dict, whole
            LIVE.figures_ext = types.SimpleNamespace()
            self.assertEqual(_observer_figures.figures_now(torch, 0), (0, 0, 0, 0, 0, 11))
        finally:
            LIVE.figures_ext = saved


class FormatTest(unittest.TestCase):
    def test_bytes_read_like_the_extension_three_significant_digits(self):
        import sys
        sys.path.insert(0, str(support.PY_DIR))
        from gpumem._keeper_notice import format_bytes

        cases = {1023: "1023 B", 1024: "1.00 KiB", 20 * 1024: "20.0 KiB", 312 << 20: "312 MiB", 1536 << 20: "1.50 GiB",
                 (1 << 20) - 1: "1.00 MiB"}
        self.assertEqual({n: format_bytes(n) for n in cases}, cases)


if __name__ == "__main__":
    unittest.main()
