"""ctypes binding of libgpumem_allocator.so (C API: native/allocator/include/gpumem_allocator.h)."""
import ctypes
import json

# Marker kinds and tag categories are the capture format's (generated from native/format/gpumem_format.h).
from ._format import MARK_BEGIN, MARK_END, MARK_INSTANT, MARK_PHASE, MARK_SNAPSHOT, MARK_STEP  # noqa: F401
from ._format import TAG_GRADIENT, TAG_OPTIMIZER_STATE, TAG_PARAMETER  # noqa: F401
NOTICE_INFO, NOTICE_WARNING, NOTICE_ERROR = 0, 1, 2
EMPTY_CACHE_ORIGIN_TORCH = 0


class NativeError(RuntimeError):
    pass


class Allocator:
    """The loaded .so. One per process (the library keeps process-wide state)."""

    def __init__(self, so_path):
        try:
            self.lib = lib = ctypes.CDLL(so_path)
        except OSError as exc:
            raise NativeError(
                "cannot load the lens allocator %s: %s (rebuild it with `make -C native/allocator`)" % (so_path, exc)
            ) from None
        self.path = so_path
        c = ctypes
        sig = {
            "gpumem_configure": (c.c_int, [c.c_char_p]),
            "gpumem_last_error": (c.c_char_p, []),
            "gpumem_version": (c.c_char_p, []),
            "gpumem_stats_json": (c.c_size_t, [c.c_int, c.c_char_p, c.c_size_t]),
            "gpumem_allocated": (c.c_uint64, [c.c_int]),
            "gpumem_reserved": (c.c_uint64, [c.c_int]),
            "gpumem_requested": (c.c_uint64, [c.c_int]),
            "gpumem_reset_peak_stats": (None, [c.c_int]),
            "gpumem_reset_accumulated_stats": (None, [c.c_int]),
            "gpumem_empty_cache": (c.c_int, [c.c_int, c.POINTER(c.c_uint64), c.POINTER(c.c_uint64), c.c_int]),
            "gpumem_snapshot": (c.c_int64, [c.c_char_p]),
            "gpumem_snapshot_pickle": (c.c_int, [c.POINTER(c.POINTER(c.c_uint8)), c.POINTER(c.c_size_t)]),
            "gpumem_free_buffer": (None, [c.c_void_p]),
            "gpumem_mark": (c.c_int, [c.c_char_p, c.c_uint32]),
            "gpumem_notice": (c.c_int, [c.c_char_p, c.c_uint32]),
            "gpumem_tag": (c.c_int, [c.c_uint64, c.c_uint64, c.c_uint32, c.c_char_p, c.c_int]),
            "gpumem_tags": (c.c_int, [c.c_void_p, c.c_uint32]),
            "gpumem_user_metadata": (c.c_int, [c.c_char_p]),
            "gpumem_backward_begin": (None, []),
            "gpumem_backward_end": (None, []),
            "gpumem_shutdown": (None, [c.c_int]),
            "gpumem_malloc": (c.c_void_p, [c.c_size_t, c.c_int, c.c_void_p]),
            "gpumem_free": (None, [c.c_void_p, c.c_size_t, c.c_int, c.c_void_p]),
        }
        missing = []
        for name, (restype, argtypes) in sig.items():
            fn = getattr(lib, name, None)
            if fn is None:
                missing.append(name)
                continue
            fn.restype = restype
            fn.argtypes = argtypes
        if missing:
            raise NativeError("%s lacks %s: it is not a lens allocator build this bootstrap understands" % (so_path, ", ".join(missing)))

    # -- helpers ---------------------------------------------------------------------------------
    def last_error(self):
        msg = self.lib.gpumem_last_error()
        return msg.decode("utf-8", "replace") if msg else "unknown error"

    def symbol_address(self, name):
        """Address of an exported function (for CUDAPluggableAllocator's set_*_fn), or None."""
        try:
            return ctypes.cast(getattr(self.lib, name), ctypes.c_void_p).value
        except AttributeError:
            return None

    def configure(self, config):
        if self.lib.gpumem_configure(json.dumps(config).encode()) != 0:
            raise NativeError("gpumem_configure failed: %s" % self.last_error())

    def version(self):
        v = self.lib.gpumem_version()
        return v.decode() if v else "?"

    def stats(self, device):
        """The allocator's counters for `device`, flat PyTorch keys → int."""
        cap = 8192
        while True:
            buf = ctypes.create_string_buffer(cap)
            need = self.lib.gpumem_stats_json(device, buf, cap)
            if need < cap:
                return json.loads(buf.value.decode())
            cap = need + 1

    def stack_info(self):
        """How Python stacks are being captured (Note [GIL-free walk] in native/allocator): whether
        without the GIL, and counts of GIL-free answers, GIL walks and mismatches."""
        fn = self.lib.gpumem_stack_info
        fn.restype, fn.argtypes = ctypes.c_size_t, [ctypes.c_char_p, ctypes.c_size_t]
        buf = ctypes.create_string_buffer(4096)
        fn(buf, len(buf))
        return json.loads(buf.value.decode())

    def probe_set(self):
        """gpumem_probe_set(name bytes, value) with its signature (Note [Probe switches] in c_api.cc: 0 taken, -1 an
        unknown switch), or None where the library predates it. For probes only: nothing of the product sets one."""
        fn = getattr(self.lib, "gpumem_probe_set", None)
        if fn is not None:
            fn.restype, fn.argtypes = ctypes.c_int, [ctypes.c_char_p, ctypes.c_int64]
        return fn

    def allocated(self, device):
        return int(self.lib.gpumem_allocated(device))

    def requested(self, device):
        """Bytes the live allocations asked for (unrounded), all devices for -1."""
        return int(self.lib.gpumem_requested(device))

    def reserved(self, device):
        return int(self.lib.gpumem_reserved(device))

    def reset_peak(self, device):
        self.lib.gpumem_reset_peak_stats(device)

    def reset_accumulated(self, device):
        self.lib.gpumem_reset_accumulated_stats(device)

    def empty_cache(self, device=-1, origin=EMPTY_CACHE_ORIGIN_TORCH):
        before, after = ctypes.c_uint64(0), ctypes.c_uint64(0)
        if self.lib.gpumem_empty_cache(device, ctypes.byref(before), ctypes.byref(after), origin) != 0:
            raise NativeError("gpumem_empty_cache failed: %s" % self.last_error())
        return before.value, after.value

    def snapshot_pickle(self):
        """The PyTorch-format snapshot pickle as bytes."""
        out = ctypes.POINTER(ctypes.c_uint8)()
        n = ctypes.c_size_t(0)
        if self.lib.gpumem_snapshot_pickle(ctypes.byref(out), ctypes.byref(n)) != 0:
            raise NativeError("gpumem_snapshot_pickle failed: %s" % self.last_error())
        try:
            return ctypes.string_at(out, n.value)
        finally:
            self.lib.gpumem_free_buffer(out)

    def snapshot_to(self, pickle_path):
        offset = self.lib.gpumem_snapshot(pickle_path.encode() if pickle_path else None)
        if offset < 0:
            raise NativeError("gpumem_snapshot failed: %s" % self.last_error())
        return offset

    def mark(self, name, kind=MARK_INSTANT):
        return self.lib.gpumem_mark(str(name).encode("utf-8", "replace"), kind) == 0

    def notice(self, text, level=NOTICE_WARNING):
        return self.lib.gpumem_notice(str(text).encode("utf-8", "replace"), level) == 0

    def user_metadata(self, text):
        """The calling thread's memory label from now on ("" clears it): Note [User metadata] in
        native/format/gpumem_format.h. True when the capture got a REC_USER_METADATA (the label changed)."""
        return self.lib.gpumem_user_metadata(str(text).encode("utf-8", "replace")) == 1

    def backward_begin(self):
        self.lib.gpumem_backward_begin()

    def backward_end(self):
        self.lib.gpumem_backward_end()

    def shutdown(self, exit_code):
        self.lib.gpumem_shutdown(int(exit_code))
