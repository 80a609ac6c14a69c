"""The optimizer walk that tags parameters, gradients and optimizer state (gpumem/_tags.py), on plain objects:
which tensors get a tag at each walk, and that the walk keeps nothing alive and forgets dead tensors."""
import gc
import sys
import unittest
import weakref

import support

sys.path.insert(0, str(support.PY_DIR))
from gpumem._tags import TAG_GRADIENT, TAG_OPTIMIZER_STATE, TAG_PARAMETER, TagWalk  # noqa: E402


class T:
    """A tensor as the walk sees it: a data pointer, a device (-1 = CPU) and nbytes = numel × element_size."""

    def __init__(self, ptr, numel, device=0, element_size=4):
        self.ptr, self.n, self.device, self.es, self.grad = ptr, numel, device, element_size, None

    def data_ptr(self):
        return self.ptr

    def get_device(self):
        return self.device

    def numel(self):
        return self.n

    def element_size(self):
        return self.es


class Opt:
    def __init__(self, params):
        self.param_groups = [{"params": params, "lr": 0.1}]
        self.state = {}


def quads(items):
    """The (category, addr, nbytes, device) of each tag in one tag_many call."""
    assert len(items) % 4 == 0, items
    return [(items[i + 2], items[i], items[i + 1], items[i + 3]) for i in range(0, len(items), 4)]


class TagWalkTest(unittest.TestCase):
    def setUp(self):
        self.calls = []
        self.batches = 0

        def tag_many(items):
            self.batches += 1
            self.calls.extend(quads(items))
        # Every walk a full one here; LightWalkTest covers the walks that look at gradients only.
        self.walk = TagWalk(tag_many, full_every=1)

    def take(self):
        out, self.calls = self.calls, []
        return out

    def test_first_walk_tags_everything_on_a_device_then_only_what_changed(self):
        w, b = T(0x1000, 256), T(0x2000, 16, device=1, element_size=2)
        opt = Opt([w, b])
        w.grad, b.grad = T(0x3000, 256), T(0x4000, 16, device=1, element_size=2)
        opt.state[w] = {"exp_avg": T(0x5000, 256), "step": T(0x9000, 1, device=-1)}
        self.walk.walk(opt)
        self.assertEqual(self.take(), [(TAG_PARAMETER, 0x1000, 1024, 0), (TAG_GRADIENT, 0x3000, 1024, 0),
                                       (TAG_PARAMETER, 0x2000, 32, 1), (TAG_GRADIENT, 0x4000, 32, 1),
                                       (TAG_OPTIMIZER_STATE, 0x5000, 1024, 0)])
        self.walk.walk(opt)
        self.assertEqual(self.take(), [], "nothing changed: the steady state writes nothing")
        # zero_grad(set_to_none=True) then backward: a new gradient tensor at the SAME address is a new allocation
        w.grad = T(0x3000, 256)
        # p.data = ...: the same parameter object on a new storage
        b.ptr = 0x6000
        self.walk.walk(opt)
        self.assertEqual(self.take(), [(TAG_GRADIENT, 0x3000, 1024, 0), (TAG_PARAMETER, 0x6000, 32, 1)])
        self.assertEqual(self.walk.tagged, 7)
        self.assertEqual(self.batches, 2, "one native call per walk that tags anything, none for a walk that does not")

    def test_the_walk_keeps_no_tensor_alive_and_forgets_dead_ones(self):
        w = T(0x1000, 8)
        opt = Opt([w])
        for step in range(50):
            w.grad = T(0x2000 + 0x100 * step, 8)
            self.walk.walk(opt)
        gone = weakref.ref(w.grad)
        w.grad = None
        gc.collect()
        self.assertIsNone(gone(), "a gradient the user dropped is not kept by the walk")
        self.assertEqual(self.walk.tagged, 51)
        self.walk.sweep()
        self.assertEqual(len(self.walk._seen), 1, "only the live parameter is remembered")

    def test_dead_entries_are_swept_on_their_own_and_never_hide_a_new_tensor(self):
        w = T(0x1000, 8)
        opt = Opt([w])
        for step in range(3 * TagWalk.SWEEP_EVERY):
            w.grad = T(0x2000, 8)  # a new gradient object each step at the same address; CPython often reuses the id
            self.walk.walk(opt)
        self.assertEqual([c for c in self.take() if c[0] == TAG_GRADIENT], [(TAG_GRADIENT, 0x2000, 32, 0)] * (3 * TagWalk.SWEEP_EVERY),
                         "every new gradient tagged, though its id may be a dead one's")
        self.walk.sweep()
        dead = T(0x3000, 8)
        w.grad = dead
        self.walk.walk(opt)
        key = id(dead)
        w.grad = T(0x4000, 8)  # made while `dead` lives: another id
        del dead
        gc.collect()
        for _ in range(TagWalk.SWEEP_EVERY - 2):
            self.walk.walk(opt)
        self.assertIn(key, self.walk._seen, "a dead entry waits for the sweep (no callback per tensor)")
        self.walk.walk(opt)
        self.assertNotIn(key, self.walk._seen, "the sweep comes on its own every SWEEP_EVERY walks")



class LightWalkTest(unittest.TestCase):
    def test_gradients_every_walk_parameters_and_state_at_full_walks(self):
        calls = []
        walk = TagWalk(lambda items: calls.extend((c, a) for c, a, _, _ in quads(items)), full_every=4)
        w = T(0x1000, 256)
        opt = Opt([w])
        opt.state[w] = {"exp_avg": T(0x5000, 256)}
        grads = []
        for step in range(12):
            w.grad = T(0x3000 + step, 256)  # a new gradient each step
            grads.append(w.grad)
            if step == 5:
                w.ptr = 0x7000  # the parameter moves (p.data = ...) between full walks
            walk.walk(opt)
        got = [(c, a) for c, a in calls if c != TAG_GRADIENT]
        # Walk 0 is full, then every 4th: 4 and 8 (the shape never changes). The moved parameter is tagged at walk 8.
        self.assertEqual(got, [(TAG_PARAMETER, 0x1000), (TAG_OPTIMIZER_STATE, 0x5000), (TAG_PARAMETER, 0x7000)])
        self.assertEqual([a for c, a in calls if c == TAG_GRADIENT], [0x3000 + i for i in range(12)])

    def test_light_walks_read_only_the_gradients_data_pointer(self):
        """Note [Gradient tags from the parameter]: the device and bytes come from the parameter's last full walk."""
        reads = []

        class Counted(T):
            def get_device(self):
                reads.append("get_device")
                return super().get_device()

            def numel(self):
                reads.append("numel")
                return super().numel()

            def element_size(self):
                reads.append("element_size")
                return super().element_size()

        tags = []
        walk = TagWalk(lambda items: tags.extend(quads(items)), full_every=100)
        w, b, cpu = T(0x1000, 256), T(0x2000, 16, device=1, element_size=2), T(0x9000, 4, device=-1)
        opt = Opt([w, b, cpu])
        for _ in range(3):  # the first walk is full, then light ones
            w.grad, b.grad, cpu.grad = T(0x3000, 256), T(0x4000, 16, device=1, element_size=2), T(0x9100, 4, device=-1)
            walk.walk(opt)
        tags.clear()
        for step in range(3):  # light walks: new gradient objects, counted
            w.grad = Counted(0x3000, 256)
            b.grad = Counted(0x4000 + step * 0x100, 16, device=1, element_size=2)
            cpu.grad = Counted(0x9100, 4, device=-1)
            walk.walk(opt)
        self.assertEqual(reads, [], "a light walk asks a gradient for its data pointer only")
        self.assertEqual(tags, [(TAG_GRADIENT, 0x3000, 1024, 0), (TAG_GRADIENT, 0x4000, 32, 1)] +
                         [(TAG_GRADIENT, 0x3000, 1024, 0), (TAG_GRADIENT, 0x4100, 32, 1)] +
                         [(TAG_GRADIENT, 0x3000, 1024, 0), (TAG_GRADIENT, 0x4200, 32, 1)],
                         "each new gradient with its parameter's device and bytes; a CPU parameter's none")
        tags.clear()
        walk.walk(opt)
        self.assertEqual(tags, [], "the same gradient objects again: nothing")

    def test_new_state_makes_a_full_walk_and_nothing_new_makes_none(self):
        """Note [Full walk on a new shape]: the walks after the first are light until state or parameters appear."""
        reads = []

        class Counted(T):
            def get_device(self):
                reads.append(self.ptr)
                return super().get_device()

        tags = []
        walk = TagWalk(lambda items: tags.extend(quads(items)), full_every=100)
        w, u = Counted(0x1000, 256), Counted(0x2000, 64)  # u gets no gradient (and so no state) until walk 3
        opt = Opt([w, u])
        per_walk = []
        for step in range(6):
            w.grad = T(0x3000 + step, 256)
            if step == 0:
                opt.state[w] = {"exp_avg": T(0x5000, 256)}  # made by the step the walk follows
            if step == 3:
                u.grad = T(0x4000, 64)
                opt.state[u] = {"exp_avg": T(0x6000, 64)}
            reads.clear()
            walk.walk(opt)
            per_walk.append((sorted(reads), [(c, a) for c, a, _, _ in tags if c != TAG_GRADIENT]))
            tags.clear()
        self.assertEqual(per_walk[0], ([0x1000, 0x2000], [(TAG_PARAMETER, 0x1000), (TAG_PARAMETER, 0x2000),
                                                          (TAG_OPTIMIZER_STATE, 0x5000)]))
        self.assertEqual(per_walk[1], ([], []), "walk 1: nothing new, a light walk (it was a full one before)")
        self.assertEqual(per_walk[2], ([], []))
        self.assertEqual(per_walk[3], ([0x1000, 0x2000], [(TAG_OPTIMIZER_STATE, 0x6000)]),
                         "walk 3: new state, a full walk tags it at once (it waited for walk 16 before)")
        self.assertEqual(per_walk[4], ([], []))
        self.assertEqual(per_walk[5], ([], []))

    def test_an_optimizer_on_a_dead_ones_id_starts_with_a_full_walk(self):
        tags = []
        walk = TagWalk(lambda items: tags.extend(quads(items)), full_every=100)
        old = Opt([T(0x1000, 8)])
        for _ in range(3):
            walk.walk(old)
        new = Opt([T(0x2000, 8)])  # the same shape as `old`
        new.param_groups[0]["params"][0].grad = T(0x3000, 8)
        # as if `new` had been made where `old` was: its id names old's entry, whose reference is dead
        walk._optimizers[id(new)] = [weakref.ref(Opt([])), 3, walk._optimizers[id(old)][2]]
        tags.clear()
        walk.walk(new)
        self.assertEqual([(c, a) for c, a, _, _ in tags], [(TAG_PARAMETER, 0x2000), (TAG_GRADIENT, 0x3000)],
                         "a full walk: the new optimizer's parameter is tagged (a light walk tagged its gradient only)")
        walk.walk(new)
        self.assertEqual(walk._optimizers[id(new)][1], 2)

    def test_state_without_a_length_keeps_the_periodic_full_walks(self):
        class NoLen(dict):
            def __len__(self):
                raise TypeError("no len")

        tags = []
        walk = TagWalk(lambda items: tags.extend(quads(items)), full_every=4)
        w = T(0x1000, 8)
        opt = Opt([w])
        opt.state = NoLen()
        for step in range(6):
            w.ptr = 0x1000 + step  # moves at every step: tagged at the full walks only
            walk.walk(opt)
        self.assertEqual([a for c, a, _, _ in tags if c == TAG_PARAMETER], [0x1000, 0x1004])

    def test_a_parameter_added_after_the_full_walks_is_read_in_full(self):
        tags = []
        walk = TagWalk(lambda items: tags.extend(quads(items)), full_every=100)
        w = T(0x1000, 8)
        opt = Opt([w])
        for _ in range(3):
            walk.walk(opt)
        tags.clear()
        late = T(0x2000, 16, device=1, element_size=2)
        opt.param_groups.append({"params": [late]})
        late.grad = T(0x5000, 16, device=1, element_size=2)
        walk.walk(opt)  # Note [Full walk on a new shape]: a group was added, so this walk is a full one
        self.assertEqual(tags, [(TAG_PARAMETER, 0x2000, 32, 1), (TAG_GRADIENT, 0x5000, 32, 1)])
        # a parameter object that died, whose id a new one took, is not taken for the old one
        tags.clear()
        walk._params[id(late)] = (weakref.ref(w), 0, 999)
        late.grad = T(0x6000, 16, device=1, element_size=2)
        walk.walk(opt)
        self.assertEqual(tags, [(TAG_GRADIENT, 0x6000, 32, 1)])


if __name__ == "__main__":
    unittest.main()
