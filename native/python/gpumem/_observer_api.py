"""The observer's C API from Python (include/gpumem_allocator.h, "Observer mode"): the ctypes Observer, PyTorch's trace
action codes, and feed_trace, which turns PyTorch's history entries into observed events (the history fallback, tests
and reference captures use it; Note [Observer] in native/allocator/src/observer.h)."""
import ctypes
import json

from . import _native

# PyTorch's TraceEntry action names, in its enum order (the codes gpumem_observe_event takes).
ACTIONS = {"alloc": 0, "free_requested": 1, "free_completed": 2, "segment_alloc": 3, "segment_free": 4,
           "segment_map": 5, "segment_unmap": 6, "snapshot": 7, "oom": 8, "user_defined": 9}


class Observer:
    """ctypes side of the observer C API (include/gpumem_allocator.h, "Observer mode")."""

    def __init__(self, native):
        self.native = native
        lib = native.lib
        c = ctypes
        self.EMPTY = c.CFUNCTYPE(c.c_int, c.POINTER(c.c_uint64), c.POINTER(c.c_uint64))
        self.STATE = c.CFUNCTYPE(c.c_int64, c.c_int, c.c_uint32, c.c_char_p)
        sig = {
            "gpumem_observe_start": (c.c_int, [self.EMPTY, self.STATE]),
            "gpumem_observe_event": (c.c_int, [c.c_int, c.c_int, c.c_uint64, c.c_uint64, c.c_uint64, c.c_uint32, c.c_uint64]),
            "gpumem_observe_event_queued": (c.c_int, [c.c_int, c.c_int, c.c_uint64, c.c_uint64, c.c_uint64, c.c_uint32,
                                                      c.c_uint64]),
            "gpumem_observe_gather": (c.c_uint32, []),
            "gpumem_observe_take_stack": (c.c_uint32, [c.c_int]),
            "gpumem_observe_frames": (c.c_uint32, [c.c_char_p, c.c_uint32]),
            "gpumem_observe_state": (c.c_int64, [c.c_int, c.c_uint32, c.c_char_p]),
            "gpumem_observe_device": (c.c_int, [c.c_int, c.c_char_p, c.c_uint64, c.c_char_p]),
            "gpumem_observe_info": (c.c_size_t, [c.c_char_p, c.c_size_t]),
            "gpumem_user_metadata": (c.c_int, [c.c_char_p]),
            "gpumem_observe_figures": (None, [c.c_int] + [c.c_uint64] * 5),
            "gpumem_observe_figures_reader": (c.c_int, [c.c_void_p]),
            "gpumem_observe_unqueued": (None, []),
        }
        for name, (res, args) in sig.items():
            fn = getattr(lib, name, None)
            if fn is None:
                raise _native.NativeError("%s lacks %s: rebuild it (make -C native/allocator)" % (native.path, name))
            fn.restype, fn.argtypes = res, args
        self.lib = lib
        self._keep = []  # ctypes callbacks must outlive the library's use of them

    def start(self, empty_cache, state):
        cbs = (self.EMPTY(empty_cache) if empty_cache else self.EMPTY(), self.STATE(state) if state else self.STATE())
        self._keep.append(cbs)
        self.lib.gpumem_observe_start(*cbs)

    def rounding(self, torch):
        """PyTorch's own parse of the user's roundup_power2_divisions and max_split_size_mb, so the blocks the observer
        records are PyTorch's (Note [PyTorch's block sizes] in native/allocator/src/observer.cc). Read once, at
        the start, when the allocator holds nothing yet (a snapshot is cheap then); a library without the call (an
        older build, a stand-in) keeps 512 B rounding."""
        fn = getattr(self.lib, "gpumem_observe_rounding", None)
        if fn is None:
            return False
        try:
            settings = torch.cuda.memory._snapshot().get("allocator_settings")
        except Exception:
            return False
        if not isinstance(settings, dict):
            return False
        fn.restype, fn.argtypes = ctypes.c_int, [ctypes.c_char_p]
        return fn(json.dumps(settings, default=str).encode()) == 0

    def event(self, device, action, addr, size, stream=0, stack=0, t_ns=0):
        return self.lib.gpumem_observe_event(device, action, addr, size, stream, stack, t_ns) == 1

    def label(self, text):
        """This thread's memory label from now on (Note [User metadata] in native/format/gpumem_format.h)."""
        return self.lib.gpumem_user_metadata(text.encode("utf-8", "replace")) == 1

    def stack_of_frames(self, frames, flags=0):
        return self.lib.gpumem_observe_frames(json.dumps(frames).encode("utf-8", "replace"), flags)

    def state(self, device, reason, segments):
        return self.lib.gpumem_observe_state(device, reason, json.dumps(segments).encode())

    def device(self, index, name, total, pci):
        return self.lib.gpumem_observe_device(index, name.encode(), total, pci.encode() if pci else None)

    def unqueued(self):
        """No event will come (Note [Figures only]): the library's observer thread ends."""
        self.lib.gpumem_observe_unqueued()

    def figures(self, device, allocated, reserved, peak_allocated, peak_reserved, num_ooms):
        self.lib.gpumem_observe_figures(device, allocated, reserved, peak_allocated, peak_reserved, num_ooms)

    def figures_reader(self, address):
        """Note [Figures on the sampler's thread]: the sampler reads the figures through the C function at `address`
        from now on (None: no more; returns once a read in progress has ended). True if taken."""
        return self.lib.gpumem_observe_figures_reader(address) == 0

    def info(self):
        buf = ctypes.create_string_buffer(1024)
        self.lib.gpumem_observe_info(buf, len(buf))
        return json.loads(buf.value.decode())

    def address(self, name):
        return ctypes.cast(getattr(self.lib, name), ctypes.c_void_p).value


def feed_trace(observer, trace, device=0, stacks=None, since_us=None):
    """PyTorch snapshot trace entries (device_traces[device]) → gpumem_observe_event, in order. Frames
    become interned stacks (innermost first, as PyTorch lists them); each entry's user_metadata becomes the
    calling thread's label before its event (Note [User metadata] in native/format/gpumem_format.h). Returns
    (recorded, dropped, last time_us). The same C++ conversion the live tracker uses (Note [Observer])."""
    stacks = {} if stacks is None else stacks
    recorded = dropped = 0
    last = since_us
    label = None  # the user_metadata last passed on (Note [User metadata]): entries change it, in their order
    for e in trace:
        t = e.get("time_us")
        if since_us is not None and t is not None and t <= since_us:
            continue
        action = ACTIONS.get(e.get("action"))
        if action is None or action in (ACTIONS["snapshot"], ACTIONS["user_defined"]):
            continue
        text = e.get("user_metadata") or ""
        if text != label:
            label = text
            observer.label(text if isinstance(text, str) else json.dumps(text, separators=(",", ":")))
        frames = e.get("frames") or []
        key = tuple((f.get("filename", ""), f.get("name", ""), int(f.get("line", 0) or 0)) for f in frames)
        stack = stacks.get(key)
        if stack is None:
            stack = stacks[key] = observer.stack_of_frames([list(k) for k in key]) if key else 0
        if observer.event(device, action, int(e.get("addr", 0)), int(e.get("size", 0)), int(e.get("stream", 0) or 0), stack):
            recorded += 1
        else:
            dropped += 1
        if t is not None:
            last = t
    return recorded, dropped, last
