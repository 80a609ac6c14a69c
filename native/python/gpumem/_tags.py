"""Tags of parameters, gradients and optimizer state (Note [Categories] in native/addon/src/categories.cpp).

At each Optimizer.step() end the bootstrap walks the optimizer's param_groups, each parameter's .grad and the
optimizer's state tensors, and writes one REC_TAG per CUDA tensor whose storage it has not tagged yet, all in one
gpumem_tags call (Note [Batched tags]). The reader gives the category to the allocation live at that address for
its whole life, so one tag per allocation is enough: in the steady state the walk only compares pointers.

A tensor is "already tagged" when the walk has seen this very tensor object (a weak reference, so the walk
keeps nothing alive) with this data pointer. Pointer equality alone is not enough: zero_grad(set_to_none=True)
frees the gradients and backward() makes new ones, often at the same addresses (the allocator's cache hands the
same blocks back), and each new allocation needs its own tag. Object identity alone is not enough either:
`p.data = …` moves a parameter to a new storage.
"""
import weakref

from ._format import TAG_BUFFER, TAG_GRADIENT, TAG_OPTIMIZER_STATE, TAG_PARAMETER


def weight_items(module):
    """Note [Weights from the first forward]: the tags of a module tree's weights, for a run with no optimizer
    (inference: generate(), an evaluation loop), where the optimizer walk below never runs. The first time a forward of
    a new root module runs, the allocator's stack capture meets it (Note [Module paths] in _modules.py: the tree is
    named once, with the GIL, before the allocation's lock), and the tree's CUDA parameters and buffers are tagged
    then, once: the flat items of one gpumem_tags call (addr, nbytes, category, device, …). A tag holds for its
    allocation's whole life, so weights moved to the device long before are weights from their allocation on. A
    parameter is tagged as a parameter, a buffer that is no parameter as a buffer (BatchNorm's running statistics, a
    rotary table): both are the model's weights, never "other". Nothing runs per module call; a training run's
    optimizer walk tags the same parameters again, to the same category."""
    items = []
    seen = set()
    for category, tensors in ((TAG_PARAMETER, module.parameters()), (TAG_BUFFER, module.buffers())):
        for t in tensors:
            try:
                device = t.get_device()
                if device < 0:
                    continue
                addr = t.data_ptr()
                if not addr or addr in seen:
                    continue
                seen.add(addr)
                items += (addr, t.numel() * t.element_size(), category, device)
            except Exception:  # a tensor subclass or a meta tensor that answers nothing: no tag
                continue
    return items


def _weak(obj):
    """A weak reference to obj, or None where it takes none."""
    try:
        return weakref.ref(obj)
    except TypeError:
        return None


class TagWalk:
    """Note [Light walks]: parameters and optimizer state keep their storages from step to step (they are updated in
    place); gradients are new allocations at every step under zero_grad(set_to_none=True). So every walk looks at
    the gradients, and the parameters and state only at full walks: an optimizer's first, every full_every-th after,
    and any walk where its shape changed (Note [Full walk on a new shape]). A tag applies to its allocation for its
    whole life, before the tag too, so a parameter that moves to a new storage (`p.data = …`) is still categorised,
    unless that storage is freed again before the next full walk. On GPT-2 small with AdamW this checks 148 tensors
    a step instead of 592 (≈ 0.3 ms of a 69 ms step, on an H100).

    Note [Full walk on a new shape]: optimizer state appears when a parameter first takes a step (Adam's exp_avg and
    exp_avg_sq in the step that made them, before the post-step hook walks), and parameters come with param groups.
    So the walk compares the optimizer's shape (state entries, parameters per group) with the last walk's, two len()
    calls a group, and walks in full where it changed. This replaced three full walks at the start (FULL_FIRST):
    steps 2 and 3 of a run paid ~0.6–1.5 ms of ResNet-50's host time for nothing new, and state that appeared at
    step 4 or later (a parameter unused before, a group added) waited for the 16th walk."""
    SWEEP_EVERY = 64  # walks between two sweeps of dead entries (Note [Batched tags])

    def __init__(self, tag_many, full_every=16):
        # tag_many(items) writes one record per quadruple of the flat list items: addr, nbytes, category, device
        self._tag_many = tag_many
        self._seen = {}  # id(tensor) → (weakref to it, data_ptr when tagged)
        self._params = {}  # id(parameter) → (weakref to it, device, nbytes) at the last full walk
        # id(optimizer) → [weak reference to it, walks so far, its shape at the last walk (Note [Full walk on a new
        # shape])]; an optimizer whose id a dead one had starts again at its first, full walk
        self._optimizers = {}
        self._since_sweep = 0
        self.full_every = max(1, int(full_every))
        self.tagged = 0  # records written, for tests and the probe

    def walk(self, optimizer):
        """Note [Batched tags]: the walk runs on the workload's main thread at every optimizer step. It gathers what
        to tag and writes it in one native call (gpumem_tags; a ctypes call costs about 1 µs, and 161 gradients a
        step made 161 of them), and remembers tensors by plain weak references (one with a callback, made anew for
        every gradient of every step, cost more); entries of dead tensors are swept every SWEEP_EVERY walks
        instead. A dead entry never hides a new tensor: its reference answers None, so a new tensor with a reused
        id is tagged. ResNet-50's 161 new gradients a step: 258–266 → 173 µs, ×0.65–0.67
        (`python3 test/bench/allocator/tag_walk.py`, two runs on the 2-core CPU machine)."""
        items = []
        see = self._see
        entry = self._optimizers.get(id(optimizer))
        if entry is None or (entry[0] is not None and entry[0]() is not optimizer):
            entry = self._optimizers[id(optimizer)] = [_weak(optimizer), 0, None]
        n, entry[1] = entry[1], entry[1] + 1
        shape = self._shape(optimizer)
        same, entry[2] = entry[2] == shape, shape
        if n and same and n % self.full_every:
            self._light(optimizer, items)
        else:
            params = self._params
            for group in optimizer.param_groups:
                for p in group["params"]:
                    device, nbytes = p.get_device(), p.numel() * p.element_size()
                    see(p, TAG_PARAMETER, items, device, nbytes)
                    try:  # Note [Gradient tags from the parameter]
                        params[id(p)] = (weakref.ref(p), device, nbytes)
                    except TypeError:
                        pass
                    g = p.grad
                    if g is not None:
                        see(g, TAG_GRADIENT, items, device, nbytes)
            for state in optimizer.state.values():
                for v in state.values():
                    if hasattr(v, "data_ptr"):
                        see(v, TAG_OPTIMIZER_STATE, items)
        if items:
            self._tag_many(items)
            self.tagged += len(items) // 4
        self._since_sweep += 1
        if self._since_sweep >= self.SWEEP_EVERY:
            self.sweep()

    @staticmethod
    def _shape(optimizer):
        """Note [Full walk on a new shape]: what changes when state or parameters are added (None for an optimizer
        whose state has no length: its full walks are then the first and every full_every-th)."""
        try:
            return (len(optimizer.state),) + tuple(len(g["params"]) for g in optimizer.param_groups)
        except TypeError:
            return None

    def _light(self, optimizer, items):
        """Note [Gradient tags from the parameter]: a light walk's gradients, each with one call on the tensor
        (data_ptr). PyTorch keeps a .grad on its parameter's device, with its dtype and shape (AccumulateGrad makes it
        so; the .grad setter refuses anything else), so the device and byte count a full walk read from the parameter
        are the gradient's too; get_device(), numel() and element_size() were three of the four calls on each gradient.
        Inside one process, switching the whole walk off and on every 10 steps (test/gpu/probes/observer_parts.py,
        ResNet-50 on an H100), the walk was 0.6 ms (lens) and 1.5 ms (default mode) of a step's host time before, with a
        block-to-block spread larger than that. A parameter the full walks have not met (added since) is read in full.
        A parameter moved to another device by `p.data = …` keeps its old device here until the next full walk. The
        byte count only describes the tag: the reader gives the category to the allocation at its address (Note
        [Categories])."""
        see, params = self._see, self._params
        for group in optimizer.param_groups:
            for p in group["params"]:
                g = p.grad
                if g is None:
                    continue
                meta = params.get(id(p))
                if meta is None or meta[0]() is not p:
                    see(g, TAG_GRADIENT, items)
                else:
                    see(g, TAG_GRADIENT, items, meta[1], meta[2])

    def sweep(self):
        """Forgets the entries of tensors that are gone."""
        self._since_sweep = 0
        self._seen = {k: e for k, e in self._seen.items() if e[0]() is not None}
        self._params = {k: e for k, e in self._params.items() if e[0]() is not None}
        self._optimizers = {k: e for k, e in self._optimizers.items() if e[0] is None or e[0]() is not None}

    def _see(self, t, category, items, device=None, nbytes=None):
        """Tags `t` unless this very tensor was tagged at this data pointer; `device` and `nbytes` when the caller
        knows them (a parameter and its gradient: Note [Gradient tags from the parameter])."""
        if device is None:
            device = t.get_device()
        if device < 0:  # CPU tensors (AdamW's `step` counters) are not device memory
            return
        key = id(t)
        ptr = t.data_ptr()
        entry = self._seen.get(key)
        if entry is not None and entry[1] == ptr and entry[0]() is t:
            return
        if not ptr:
            return
        items += (ptr, t.numel() * t.element_size() if nbytes is None else nbytes, category, device)
        try:
            self._seen[key] = (weakref.ref(t), ptr)
        except TypeError:
            pass  # not weak-referenceable: tagged again at every walk (correct, slower)
