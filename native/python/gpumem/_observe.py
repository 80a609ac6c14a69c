"""The PyTorch-allocator mode: PyTorch's own caching allocator stays, with every setting the user gave
it, and is observed into the same capture format (Note [Observer] in native/allocator/src/observer.h;
Note [Observing PyTorch's allocator] in native/python/README.md).

Sources:
- a trace tracker (c10::cuda::CUDACachingAllocator::attachAllocatorTraceTracker) in a tiny extension
  built at first use with torch.utils.cpp_extension.load_inline against the user's torch (cached per
  torch version); it hands each TraceEntry to gpumem_observe_event with the stack that PyTorch's context
  recorder gathered for the same malloc before the allocator lock (Note [Observer stacks]);
- torch._C._cuda_attach_out_of_memory_observer: a state record (and the verdict's data) after an OOM;
- torch.cuda.memory._snapshot(): state records (snapshots, OOM, exit) and the control channel's pickle;
- torch.cuda.empty_cache() for the control channel's Empty Cache.
Without a compiler (or if the build fails) the fallback is PyTorch's history: _record_memory_history
(stacks="python") drained into the capture by feed_trace every second and at snapshots, OOM and exit.
"""
import ctypes
import functools
import hashlib
import json
import os
import pickle
import sys
import threading

from . import _native, _probe_off
from ._state import STATE
from ._where import warn

# PyTorch's TraceEntry action names, in its enum order (the codes gpumem_observe_event takes).
ACTIONS = {"alloc": 0, "free_requested": 1, "free_completed": 2, "segment_alloc": 3, "segment_free": 4,
           "segment_map": 5, "segment_unmap": 6, "snapshot": 7, "oom": 8, "user_defined": 9}
OBSERVER_VERSION = 8  # 3: the lens OOM glue (Note [Lens OOM type]) · 4: trace entries' user_metadata (labels) · 5:
#                      events_off (Note [Recorded steps]) · 6: built optimized (Note [Observer build flags]) · 7:
#                      figures (Note [Figures without the dict]) · 8: gpumem_tracker_figures (Note [Figures on the
#                      sampler's thread])

# Note [Observer build flags]: torch.utils.cpp_extension's JIT build passes no -O flag, so the tracker was built
# at -O0: a profile of a ResNet-50 step after the recorded steps (H100, 2026-11-28)
# showed `std::atomic<bool>::load` as a function of its own, the tracker's "return at once" costing about 70 ns a
# trace entry, 2,300 entries a step. Both builds (the child's and the in-process load that imports it) must pass
# the same flags: torch hashes them with the sources, and a difference would rebuild in the workload's process.
BUILD_CFLAGS = ["-O2"]
# The functions the extension exports to Python: the same in both builds, since torch binds them into the source it hashes.
TRACKER_FUNCTIONS = ["attach", "record", "events_off", "figures"]

# Note [Observer stacks] (native/allocator/src/observer.h): the tracker hands each TraceEntry to
# gpumem_observe_event under PyTorch's allocator lock, where the GIL must never be taken; the stack comes
# from PyTorch's context recorder, which malloc calls on the allocating thread before it takes that lock.
# record() installs our recorder through CUDACachingAllocator::recordHistory, chained with PyTorch's own
# Python/C++ traceback when the user asked _record_memory_history for stacks (so their snapshot keeps its
# frames), and with the user's trace size, context level and skipped actions.
TRACKER_SRC = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <torch/csrc/profiler/combined_traceback.h>
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>
namespace CCA = c10::cuda::CUDACachingAllocator;
// Per-version layout check: the action codes gpumem_observe_event expects (native/allocator/src/observer.h).
static_assert(CCA::TraceEntry::ALLOC == 0 && CCA::TraceEntry::FREE_REQUESTED == 1 &&
              CCA::TraceEntry::FREE_COMPLETED == 2 && CCA::TraceEntry::SEGMENT_ALLOC == 3 &&
              CCA::TraceEntry::SEGMENT_FREE == 4 && CCA::TraceEntry::SEGMENT_MAP == 5 &&
              CCA::TraceEntry::SEGMENT_UNMAP == 6 && CCA::TraceEntry::SNAPSHOT == 7 && CCA::TraceEntry::OOM == 8,
              "TraceEntry::Action changed: gpumem's observer does not know this PyTorch");
typedef int (*EventFn)(int, int, uint64_t, uint64_t, uint64_t, uint32_t, uint64_t);
typedef uint32_t (*TakeFn)(int);
typedef uint32_t (*GatherFn)();
typedef int (*LabelFn)(const char*);
static EventFn g_event = nullptr;
static TakeFn g_take = nullptr;
static GatherFn g_gather = nullptr;
static LabelFn g_label = nullptr;
// Note [Recorded steps] (_observe.py): once on, the tracker and our context recorders return at once, for good.
static std::atomic<bool> g_off{false};
void events_off() { g_off.store(true); }
// Note [User metadata] (native/format/gpumem_format.h): PyTorch 2.10+ stamps each trace entry with its thread's
// _set_memory_metadata label (TraceEntry::user_metadata_); older ones have no such field (nothing to pass on).
template <class T> auto label_of(const T& te, int) -> decltype(&te.user_metadata_) { return &te.user_metadata_; }
template <class T> const std::string* label_of(const T&, long) { return nullptr; }
// Note [Figures without the dict] (_observe.py): one device's counters as PyTorch's allocator keeps them, read under
// its lock as memory_stats() reads them, without the ~150-entry dict: allocated, reserved, peak allocated, peak
// reserved, OOMs, requested (current; index 0 of each stat array is StatType::AGGREGATE in every torch since 1.4).
std::vector<int64_t> figures(int64_t device) {
  const auto s = CCA::get()->getDeviceStats(static_cast<c10::DeviceIndex>(device));
  return {s.allocated_bytes[0].current, s.reserved_bytes[0].current, s.allocated_bytes[0].peak,
          s.reserved_bytes[0].peak,     s.num_ooms,                   s.requested_bytes[0].current};
}
// Note [Figures on the sampler's thread] (native/allocator/src/observer.h): the same six numbers for the library's
// sampler thread, through a C pointer: PyTorch's allocator lock, never the GIL. 0 read, -1 not (a bad device).
extern "C" __attribute__((visibility("default"))) int gpumem_tracker_figures(int device, int64_t* out) {
  try {
    const std::vector<int64_t> v = figures(device);
    for (size_t i = 0; i < 6 && i < v.size(); i++) out[i] = v[i];
    return 0;
  } catch (...) {
    return -1;
  }
}
// Runs under PyTorch's allocator lock: no GIL, no I/O (gpumem_observe_event only appends to a buffer).
void attach(int64_t event_fn, int64_t take_fn, int64_t gather_fn, int64_t label_fn) {
  g_event = reinterpret_cast<EventFn>(event_fn);
  g_take = reinterpret_cast<TakeFn>(take_fn);
  g_gather = reinterpret_cast<GatherFn>(gather_fn);
  g_label = reinterpret_cast<LabelFn>(label_fn);
  py::gil_scoped_release no_gil;  // attaching takes each device's allocator lock
  CCA::attachAllocatorTraceTracker([](const CCA::TraceEntry& te) {
    if (g_off.load(std::memory_order_relaxed)) return;  // Note [Recorded steps]: PyTorch has no detach
    const int a = static_cast<int>(te.action_);
    if (a > CCA::TraceEntry::OOM) return;
    // The label first, so the capture has it before the event it labels; only when this thread's label changed
    // (gpumem_user_metadata writes a REC_USER_METADATA for the calling thread: the tracker runs on the entry's).
    if (const std::string* label = label_of(te, 0)) {
      thread_local std::string last;
      if (g_label && *label != last) {
        last = *label;
        g_label(label->c_str());
      }
    }
    const bool who = a == CCA::TraceEntry::ALLOC || a == CCA::TraceEntry::SEGMENT_ALLOC ||
                     a == CCA::TraceEntry::SEGMENT_MAP || a == CCA::TraceEntry::OOM;
    g_event(static_cast<int>(te.device_), a, static_cast<uint64_t>(te.addr_), static_cast<uint64_t>(te.size_),
            static_cast<uint64_t>(reinterpret_cast<uintptr_t>(te.stream_)), who ? g_take(a) : 0u, 0);
  });
}
// Note [Lens OOM type]: the lens allocator's malloc throws a std::exception ("CUDA out of memory. …"), which
// CUDAPluggableAllocator passes on and Python sees as RuntimeError, so `except torch.OutOfMemoryError:` missed
// it (probe test/gpu/probes/pluggable_null.py on torch 2.11; returning NULL instead is worse: torch takes the
// null pointer as the allocation). Built against the user's torch, this glue rethrows such an exception as
// c10::OutOfMemoryError, which Python sees as torch.OutOfMemoryError (a RuntimeError too), message unchanged.
// The lens mode hands CUDAPluggableAllocator this module's gpumem_glue_malloc/free (native/python/gpumem/
// _install.py); gpumem_glue_set gives them the lens library's functions, through ctypes, before any allocation.
typedef void* (*LensMallocFn)(size_t, int, void*);
typedef void (*LensFreeFn)(void*, size_t, int, void*);
static LensMallocFn g_lens_malloc = nullptr;
static LensFreeFn g_lens_free = nullptr;
extern "C" __attribute__((visibility("default"))) void gpumem_glue_set(void* m, void* f) {
  g_lens_malloc = reinterpret_cast<LensMallocFn>(m);
  g_lens_free = reinterpret_cast<LensFreeFn>(f);
}
extern "C" __attribute__((visibility("default"))) void* gpumem_glue_malloc(size_t size, int device, cudaStream_t stream) {
  try {
    return g_lens_malloc(size, device, stream);
  } catch (const std::exception& e) {
    if (std::string(e.what()).rfind("CUDA out of memory.", 0) == 0) TORCH_CHECK_WITH(OutOfMemoryError, false, e.what());
    throw;
  }
}
extern "C" __attribute__((visibility("default"))) void gpumem_glue_free(void* p, size_t size, int device, cudaStream_t stream) {
  g_lens_free(p, size, device, stream);
}
// Context recorders: malloc calls one before it takes the allocator lock, on the allocating thread.
static void gather_ours() { if (!g_off.load(std::memory_order_relaxed)) g_gather(); }
static std::shared_ptr<c10::GatheredContext> ours() { gather_ours(); return nullptr; }
static std::shared_ptr<c10::GatheredContext> ours_and_python() { gather_ours(); return torch::CapturedTraceback::gather(true, true, false); }
static std::shared_ptr<c10::GatheredContext> ours_and_cpp() { gather_ours(); return torch::CapturedTraceback::gather(true, true, true); }
static std::shared_ptr<c10::GatheredContext> theirs_python() { return torch::CapturedTraceback::gather(true, true, false); }
static std::shared_ptr<c10::GatheredContext> theirs_cpp() { return torch::CapturedTraceback::gather(true, true, true); }
// recordHistory's signature grew over the versions (4 arguments, + clearHistory, + skip_actions in 2.11).
template <class F> auto rh(bool on, F f, size_t n, CCA::RecordContext w, const std::vector<std::string>& skip, int)
    -> decltype(CCA::recordHistory(on, f, n, w, false, skip), std::string()) {
  CCA::recordHistory(on, f, n, w, false, skip); return "6";
}
template <class F> auto rh(bool on, F f, size_t n, CCA::RecordContext w, const std::vector<std::string>&, long)
    -> decltype(CCA::recordHistory(on, f, n, w, false), std::string()) {
  CCA::recordHistory(on, f, n, w, false); return "5";
}
template <class F> std::string rh(bool on, F f, size_t n, CCA::RecordContext w, const std::vector<std::string>&, ...) {
  CCA::recordHistory(on, f, n, w); return "4";
}
// ours_on: our stacks wanted (GPUMEM_STACKS); user_stacks: 0 none, 1 Python, 2 Python and C++ (the user's
// own _record_memory_history, if on); when: RecordContext (0 never … 3 all), at least STATE (1) while
// ours_on, since malloc gathers at STATE; max_entries: PyTorch's trace ring (1 when the user keeps none).
std::string record(bool ours_on, int64_t user_stacks, int64_t max_entries, int64_t when, std::vector<std::string> skip) {
  py::gil_scoped_release no_gil;  // recordHistory takes each device's allocator lock
  CCA::CreateContextFn f = ours_on ? (user_stacks == 2 ? ours_and_cpp : user_stacks == 1 ? ours_and_python : ours)
                                   : (user_stacks == 2 ? theirs_cpp : theirs_python);
  const bool on = ours_on || user_stacks > 0 || max_entries > 1;
  if (ours_on && when < 1) when = 1;
  return rh(on, f, size_t(max_entries < 1 ? 1 : max_entries), static_cast<CCA::RecordContext>(when), skip, 0);
}
"""


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
        records are PyTorch's (Note [PyTorch's block sizes] in native/allocator/src/pytorch_rounding.h). Read once, at
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


# ---- the live mode --------------------------------------------------------------------------------------

_lock = threading.Lock()
_obs = None
_fallback = None  # the history drain, when no tracker could be built


def _build_dir(torch):
    text = "%s|%s|%d|%s" % (torch.__version__, TRACKER_SRC, OBSERVER_VERSION, " ".join(BUILD_CFLAGS))
    key = hashlib.sha1(text.encode()).hexdigest()[:12]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "gpumem", "observer-" + key), "gpumem_observer_" + key


# Note [Observer build watchdog]: the tracker is compiled in a child Python (the user's, without our
# bootstrap: no GPUMEM_SESSION_DIR) under a time limit, and only a finished build is imported here. In
# process, torch.utils.cpp_extension would wait without end on its lock file (FileBaton) when an earlier
# build was killed mid-way, and a compiler that hangs would hang the workload at its first CUDA use with
# an empty capture. A lock older than the limit is such a leftover and is removed (said on stderr); a build
# that runs out of time or fails falls back to PyTorch's history (the mode's second source), never a stall.
BUILD_TIMEOUT_S = 240.0
_BUILD_CHILD = r"""
import sys
from torch.utils.cpp_extension import load_inline
src, folder, name = open(sys.argv[1]).read(), sys.argv[2], sys.argv[3]
cflags, functions = sys.argv[4].split(), sys.argv[5].split()
load_inline(name=name, cpp_sources=[src], functions=functions, with_cuda=True, build_directory=folder, verbose=False,
            extra_cflags=cflags)
"""


def _build_timeout():
    try:
        return max(1.0, float(os.environ.get("GPUMEM_OBSERVER_BUILD_TIMEOUT", BUILD_TIMEOUT_S)))
    except ValueError:
        return BUILD_TIMEOUT_S


def _build_in_child(folder, name, timeout):
    """Compiles the tracker in a child process; None when built, else why not (one line)."""
    import subprocess
    import time

    lock = os.path.join(folder, "lock")
    try:
        age = time.time() - os.stat(lock).st_mtime
        if age > timeout:
            os.remove(lock)
            sys.stderr.write("gpumem: removed a stale observer build lock (%d s old, from a build that was killed)\n" % age)
    except OSError:
        pass
    src = os.path.join(folder, "tracker_source.cpp")
    with open(src, "w") as f:
        f.write(TRACKER_SRC)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUMEM_")}
    try:
        # Its own process group: on time-out the compiler and ninja it started end with it.
        argv = [sys.executable, "-c", _BUILD_CHILD, src, folder, name, " ".join(BUILD_CFLAGS), " ".join(TRACKER_FUNCTIONS)]
        p = subprocess.Popen(argv, env=env, start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT)
    except OSError as exc:
        return "cannot start %s to build the observer (%s)" % (sys.executable, exc)
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, 9)
        except OSError:
            pass
        p.communicate()
        return "building the observer took longer than %d s (GPUMEM_OBSERVER_BUILD_TIMEOUT)" % timeout
    if p.returncode != 0:
        lines = [l for l in out.decode("utf-8", "replace").strip().splitlines() if l.strip()]
        return "building the observer failed: %s" % (lines[-1] if lines else "exit code %d" % p.returncode)
    return None


def _built(folder):
    """Whether the tracker module is in its build folder (the one test of "built", for every caller)."""
    try:
        return any(f.endswith(".so") for f in os.listdir(folder))
    except OSError:
        return False


def lens_glue(torch):
    """The built tracker module's path when it has the lens OOM glue (Note [Lens OOM type]), else None. Never
    builds: a lens run must not wait for a compiler; the glue comes with the observer that VS Code and
    `gpumem build-observer` build ahead, and the lens mode passes OOMs on as RuntimeError until then."""
    try:
        folder = _build_dir(torch)[0]
        for f in sorted(os.listdir(folder)):
            if f.endswith(".so"):
                lib = ctypes.CDLL(os.path.join(folder, f))
                return os.path.join(folder, f) if hasattr(lib, "gpumem_glue_set") else None
    except (OSError, AttributeError):
        pass
    return None


def prebuild(torch, on_start=None):
    """Note [Observer build ahead]: the tracker's first build takes ~25 s (one per torch version and
    OBSERVER_VERSION). A run must not wait for it where it can be done ahead: VS Code builds it in the
    background when the Python environment changes (with a progress notification), and both `gpumem run`
    launchers start this build beside the workload, so it overlaps the workload's own start (importing torch,
    building the model); a workload that reaches its first CUDA use first waits for that same build
    (torch.utils.cpp_extension's lock on the build folder) instead of compiling twice. Returns what happened."""
    import time

    folder, name = _build_dir(torch)
    if _built(folder):
        return {"built": True, "already": True, "folder": folder, "torch": torch.__version__}
    available, why = availability(torch)
    if not available:
        return {"built": False, "already": False, "folder": folder, "torch": torch.__version__, "why": why,
                "no_cuda": _cpu_only(torch)}
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        return {"built": False, "already": False, "folder": folder, "torch": torch.__version__, "why": str(exc)}
    if on_start is not None:
        on_start({"building": True, "folder": folder, "torch": torch.__version__})
    t0 = time.time()
    why = _build_in_child(folder, name, _build_timeout())
    return {"built": why is None, "already": False, "folder": folder, "torch": torch.__version__, "why": why,
            "seconds": round(time.time() - t0, 1)}


def build_tracker(torch):
    """The tracker extension, built once per torch version; (module, None) or (None, why not)."""
    folder, name = _build_dir(torch)
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        return None, "cannot create %s (%s)" % (folder, exc)
    if not _built(folder):
        sys.stderr.write("gpumem: building the observer, first run only (about 30 s) in %s\n" % folder)
        why = _build_in_child(folder, name, _build_timeout())
        if why:
            return None, why
    try:
        from torch.utils.cpp_extension import load_inline

        # Built: this only checks the sources' hash and imports the module.
        mod = load_inline(name=name, cpp_sources=[TRACKER_SRC], functions=TRACKER_FUNCTIONS, with_cuda=True,
                          build_directory=folder, verbose=False, extra_cflags=BUILD_CFLAGS)
        return mod, None
    except Exception as exc:  # no compiler, no ninja, no headers, a layout change
        text = str(exc).strip().splitlines()
        return None, "%s: %s" % (type(exc).__name__, text[-1] if text else "")


def _raw_snapshot(torch):
    """PyTorch's own _snapshot(), whatever the user's history view shows (Note [User history in the
    PyTorch-allocator mode])."""
    snapshot = _history_view.raw_snapshot or torch.cuda.memory._snapshot
    return snapshot()


def _segments_of(snap):
    out = []
    for s in snap.get("segments", []):
        out.append({k: s.get(k) for k in ("device", "address", "total_size", "stream", "segment_type", "segment_pool_id", "is_expandable")}
                   | {"blocks": [{k: b.get(k) for k in ("address", "size", "requested_size", "state")} for b in s.get("blocks", [])]})
    return out


def _write_states(torch, device, reason, pickle_path):
    """REC_STATE from PyTorch's own snapshot (and its pickle, byte for byte what _dump_snapshot writes)."""
    try:
        snap = _raw_snapshot(torch)
    except Exception:  # backends without snapshots (cudaMallocAsync): no state, not an error
        if STATE.observer_source == "stats":
            return -1
        raise
    if _fallback is not None:
        _fallback.drain(snap)
    segs = _segments_of(snap)
    first = -1
    devices = range(torch.cuda.device_count()) if device < 0 else [device]
    for d in devices:
        off = _obs.state(d, reason, [s for s in segs if s.get("device", 0) == d])
        if first < 0:
            first = off
    if pickle_path:
        tmp = pickle_path + ".tmp"
        with open(tmp, "wb") as f:
            pickle.dump(snap, f)
        os.replace(tmp, pickle_path)
    return first


def _host_callbacks(torch):
    def empty_cache(before, after):
        try:
            n = torch.cuda.device_count()
            before[0] = sum(torch.cuda.memory_reserved(d) for d in range(n))
            torch.cuda.empty_cache()
            after[0] = sum(torch.cuda.memory_reserved(d) for d in range(n))
            return 0
        except Exception as exc:
            warn("empty_cache from the control channel failed: %s: %s" % (type(exc).__name__, exc))
            return -1

    def state(device, reason, pickle_path):
        try:
            return _write_states(torch, device, reason, pickle_path.decode() if pickle_path else "")
        except Exception as exc:
            warn("snapshot failed: %s: %s" % (type(exc).__name__, exc))
            return -1

    return empty_cache, state


def pci_bus_id(props):
    """The device's PCI bus id as NVML takes it (nvmlDeviceGetHandleByPciBusId), from torch's device properties; ""
    where torch does not say. The device sampler finds its NVML handle by it (device_sampler.cc)."""
    if not hasattr(props, "pci_bus_id"):
        return ""
    return "%04X:%02X:%02X.0" % (getattr(props, "pci_domain_id", 0), props.pci_bus_id, getattr(props, "pci_device_id", 0))


def _announce_devices(torch):
    for d in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(d)
        _obs.device(d, p.name, int(p.total_memory), pci_bus_id(p))


def _seed(torch):
    """What PyTorch's allocator already holds (normally nothing at first CUDA use): segments and live
    blocks as events, so later frees pair up."""
    snap = _raw_snapshot(torch)
    for s in snap.get("segments", []):
        d = s.get("device", 0)
        _obs.event(d, ACTIONS["segment_alloc"], s["address"], s["total_size"], s.get("stream", 0) or 0)
        for b in s.get("blocks", []):
            if b.get("state") in ("active_allocated", "active_pending_free"):
                _obs.event(d, ACTIONS["alloc"], b["address"], b.get("requested_size") or b["size"], s.get("stream", 0) or 0)
    return snap


# Note [Figures without the dict]: PyTorch's own counters are read at every step end (the leak keeper's requested
# bytes, Note [Keeper reads requested bytes] in _keeper.py) and at the sampling rate once they carry the figures
# (figures only, and after the recorded steps: now on the library's sampler thread where the extension is loaded, Note
# [Figures on the sampler's thread]; else _StatsPoll, on a thread that holds the GIL the user's steps need).
# torch.cuda.memory_stats_as_nested_dict() builds a dict of ~150 entries for the few we read: 17-30 µs a call on an
# H100 host with torch 2.11 (memory_stats(), which flattens it in Python, 150-170 µs; test/gpu/probes/
# recorded_steps_parts.py). Where the tracker extension is built, its figures() reads the same counters under the same
# lock and returns six numbers; elsewhere (the history fallback, cudaMallocAsync, a stand-in tracker) the nested
# dict is read as before.
def extension_figures(device):
    """The tracker extension's six numbers for one device (as figures_now), or None where it is not loaded or cannot
    read this torch's stats."""
    read = getattr(_figures_ext, "figures", None)
    if read is None:
        return None
    try:
        return tuple(int(x) for x in read(int(device)))
    except Exception:  # a torch whose stats this build cannot read: callers read the dict, as before
        return None


def figures_now(torch, device):
    """(allocated, reserved, peak allocated, peak reserved, OOMs, requested or None) of one device, now."""
    f = extension_figures(device)
    if f is not None:
        return f
    st = torch.cuda.memory_stats_as_nested_dict(device)
    a, r = st.get("allocated_bytes", {}).get("all", {}), st.get("reserved_bytes", {}).get("all", {})
    return (a.get("current", 0), r.get("current", 0), a.get("peak", 0), r.get("peak", 0), st.get("num_ooms", 0),
            (st.get("requested_bytes") or {}).get("all", {}).get("current"))


def _poll_period_s():
    """How often PyTorch's stats are read where they carry the figures: the sampling period (200 ms when off)."""
    return (STATE.settings.sample_ms or 200) / 1000.0 if STATE.settings is not None else 0.2


# Note [Figures on the sampler's thread] (native/allocator/src/observer.h): where PyTorch's figures are the source
# (figures only, after the recorded steps), the library's sampler thread reads them through the extension's C reader
# (gpumem_tracker_figures), just before it writes each REC_STATS. It used to be _StatsPoll alone: a Python thread
# waking at the sampling rate (5 Hz by default) to take the GIL from the user's steps, for a read of 17-30 µs, and a
# REC_STATS then carried figures up to one period old. The probe switches (Note [Probe switches off]; ResNet-50
# on an H200, figures only, 5 lockstep rounds) put the poll at about half of what figures only added to a step's host
# time (+0.69 ms a step with it, +0.34 without; all parts off −0.50, native against native −0.29): within the host's
# spread, but the one part of ours that took the GIL on a timer. Under figures only the extension is loaded for its
# reader alone (nothing attached; CCA::get() is whichever backend serves, cudaMallocAsync included). The poll stays
# where there is no reader: no built extension (no compiler), the cudaMallocAsync backend with recording on (no
# extension is loaded there), a stand-in without the symbol, or sampling off (GPUMEM_SAMPLE_MS=0: nothing would call
# the reader).
def _figures_reader_on():
    """True once the library's sampler reads PyTorch's figures itself (the extension in _figures_ext has the C
    reader and the sampler runs)."""
    path = getattr(_figures_ext, "__file__", None)
    if not path or _obs is None:
        return False
    try:
        ext = ctypes.CDLL(path)  # already loaded by Python's import: the same handle
        reader = ext.gpumem_tracker_figures
    except (OSError, AttributeError):
        return False
    if not _obs.figures_reader(ctypes.cast(reader, ctypes.c_void_p).value):
        return False
    _obs._keep.append(ext)
    import atexit

    # Before the capture's own end (atexit: last in, first out): the sampler stops reading PyTorch's allocator before
    # the interpreter goes away; the call releases the GIL and returns once a read in progress has ended.
    atexit.register(_obs.figures_reader, None)
    return True


def start_figures(torch):
    """PyTorch's figures into the capture from now on: "sampler" (the library's sampler thread reads them), "poll" (a
    thread of ours, _StatsPoll) or None (Note [Probe switches off]: a benchmark child pricing this part)."""
    global figures_by
    if _probe_off.off("poll"):  # Note [Probe switches off]: a benchmark child pricing the figures' source
        return None
    if _figures_reader_on():
        figures_by = "sampler"
    else:
        _StatsPoll(torch, _poll_period_s())
        figures_by = "poll"
    return figures_by


class _StatsPoll:
    """The last source, for allocators with neither trace trackers nor history (backend:cudaMallocAsync):
    PyTorch's stats API read at the sampling rate (≥ 5 Hz); figures and samples, no per-line data."""

    def __init__(self, torch, period_s):
        self.torch = torch
        self.period_s = max(0.02, min(period_s, 0.2))
        threading.Thread(target=self._loop, name="gpumem-stats-poll", daemon=True).start()

    def poll(self):
        # On this thread, but holding the GIL the user's steps need: figures_now reads them without a dict where it
        # can (Note [Figures without the dict]).
        for d in range(self.torch.cuda.device_count()):
            f = figures_now(self.torch, d)
            _obs.figures(d, *f[:5])

    def _loop(self):
        import time

        while True:
            try:
                self.poll()
            except Exception:
                return
            time.sleep(self.period_s)


class _HistoryDrain:
    """The fallback source: PyTorch's history, drained into the capture (every second and at states)."""

    def __init__(self, torch):
        self.torch = torch
        self.since = {}
        self.stacks = {}
        self.lock = threading.Lock()
        self.enable()
        t = threading.Thread(target=self._loop, name="gpumem-history-drain", daemon=True)
        t.start()

    def enable(self):
        record = _history_view.raw_record or self.torch.cuda.memory._record_memory_history
        record(enabled="all", context="alloc", stacks="python", max_entries=1_000_000)

    def drain(self, snap=None):
        with self.lock:
            snap = snap or _raw_snapshot(self.torch)
            for d, trace in enumerate(snap.get("device_traces", [])):
                _, _, last = feed_trace(_obs, trace, d, self.stacks, self.since.get(d))
                self.since[d] = last

    def _loop(self):
        import time

        while True:
            time.sleep(1.0)
            try:
                self.drain()
            except Exception:
                return


def _start_source(torch):
    """Tracker, else history, else stats (each tried in turn); (name, one line to say, or None).

    Note [Figures only]: GPUMEM_EVENTS=0 (`--figures-only`, gpuMemoryLens.recordAllocations = false) takes the stats
    source at once, whatever the allocator offers. Per-allocation recording is the one part of the PyTorch-allocator
    mode that no other switch turns off, and on a step near host-bound it costs more than the 1 % the rest of the tool
    is held to (ResNet-50 ×1.03–1.06 on an H100, test/gpu/README.md). With it off nothing of ours runs per
    allocation (no trace tracker, context recorder, tag walk or module marks: _markers.py), only PyTorch's stats read
    at the sampling rate by the library's sampler thread (Note [Figures on the sampler's thread]; where it cannot,
    by a thread of ours, the nested dict; the observer's own thread ends at once, having no event to order), and
    the graphs keep allocated, reserved and device memory (Note [Figures from stats] in native/addon/src/model.h); an
    out-of-memory error is still written (_attach_oom_observer). The header says `"events": false` and every panel
    says what is missing (Note [Not recorded]). `auto` takes PyTorch's allocator for it (_mode.decide); the lens mode
    records every allocation by its nature, so there the switch is refused in one line (_capture.configure)."""
    global _fallback, _tracker, _figures_ext
    if not STATE.settings.events:
        # The extension only for its figures (Note [Figures on the sampler's thread]): nothing is attached. Where it
        # cannot be built, the poll reads PyTorch's stats, as before.
        _figures_ext, _ = build_tracker(torch)
        start_figures(torch)
        return "stats", None
    backend = ""
    try:
        backend = torch.cuda.memory.get_allocator_backend()
    except Exception:
        pass
    if backend and backend != "native":
        # cudaMallocAsync: neither trace trackers nor history nor snapshots; its stats API works.
        start_figures(torch)
        return "stats", ("the %s backend offers PyTorch's stats only (no trace trackers, no history): recording "
                         "allocated/reserved figures, no per-line data" % backend)
    mod, why = build_tracker(torch)
    if mod is not None:
        try:
            # queued: applied off the allocating thread, in order (Note [Deferred observation] in sequencer.h)
            mod.attach(_obs.address("gpumem_observe_event_queued"), _obs.address("gpumem_observe_take_stack"),
                       _obs.address("gpumem_observe_gather"), _obs.address("gpumem_user_metadata"))
            _tracker = _figures_ext = mod
            _history_view.apply_ours()
            _seed(torch)
            return "tracker", None
        except Exception as exc:
            _tracker = _figures_ext = None
            why = "%s: %s" % (type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "")
    try:
        _fallback = _HistoryDrain(torch)
        return "history", ("the observer cannot stream (%s); recording from PyTorch's memory history instead "
                           "(updates every second, higher overhead)" % why)
    except Exception as exc:
        _fallback = None
        start_figures(torch)
        return "stats", ("the observer cannot stream (%s) and PyTorch's history is unavailable (%s: %s); recording "
                         "allocated/reserved figures only, no per-line data" % (why, type(exc).__name__, str(exc).splitlines()[0] if str(exc) else ""))


def start(torch):
    """At the first CUDA use, PyTorch's allocator initialised and the capture configured (_startup.py):
    the observer, its source, the OOM observer and the markers. True when observing."""
    global _obs
    with _lock:
        if _obs is not None:
            return True
        from . import _markers

        _obs = Observer(STATE.native)
        empty_cache, state = _host_callbacks(torch)
        _obs.start(empty_cache, state)
        _obs.rounding(torch)
        _announce_devices(torch)
        _history_view.install(torch)
        source, line = _start_source(torch)
        STATE.observer_source = source
        if source == "stats":  # no event to order: the observer's thread ends (Note [Figures only])
            _obs.unqueued()
        if line:
            warn(line)
            STATE.native.notice(line, _native.NOTICE_WARNING)
        _attach_oom_observer(torch)
        off = _probe_off.parts_off()  # Note [Probe switches off]: benchmark children only
        if "hooks" not in off:
            _markers.apply(torch)
        if "writer" in off:
            _probe_off.applied["writer"] = STATE.native.probe_set()(b"flush_ms", 10000)  # 0: the library took it
        return True


# Note [Recorded steps]: GPUMEM_RECORD_STEPS=N (`--record-steps N`, gpuMemoryLens.recordSteps) records every
# allocation for the first N steps only (Optimizer.step() ends, or the user's gpumem.step() marks once there is one, as
# Note [Steps] counts them: _markers.count_recorded_step). What the lines, categories, activations by module and leak
# findings need is in a training loop's first steps, which then repeat: recording them costs a step near host-bound
# 3–6 % (ResNet-50 on an H100), figures only about nothing (×0.994–1.014), so after step N nothing of ours
# runs per allocation while the graphs go on. Measured (H100, 2026-11-27 and 28, test/gpu/README.md): settled
# steps after the stop ×0.999–1.012 on GPT-2 small and ×0.985–1.051 on ResNet-50 (native against native up to
# ×1.020 in the same runs). What stays per allocation is the tracker we cannot detach: by a profile of ResNet-50 steps
# after the stop, PyTorch's record_trace 0.13 ms a step and, until Note [Observer build flags], our -O0 callback 0.16.
# At the N-th step end:
#  - the tracker extension's flag and the library's (gpumem_observe_events_off) make the trace tracker and our
#    context recorder return at once (PyTorch has no way to detach a tracker); the library applies what was queued,
#    writes MARK_EVENTS_OFF after the last event (FORMAT.md, marker kind 8) and ends the observer's thread;
#  - our recorder leaves PyTorch's recordHistory (the user's own history, if on, is kept as they set it), so PyTorch
#    stops gathering contexts for us;
#  - the tag walk stops (tags only name recorded allocations); the step facts, phases and the leak keeper stay, and
#    an out-of-memory error is still written (by the OOM observer, as under figures only);
#  - PyTorch's stats are read at the sampling rate (start_figures, as figures only does), so the REC_STATS samples, the
#    live view and the control channel carry PyTorch's own figures; the reader takes the figures after the marker
#    from them (Note [Figures after the events] in native/addon/src/model.h).
# The header says `record_steps`; the panels say from which step on allocations were not recorded (Note [Not
# recorded]). Only the tracker source can stop: the history fallback says once that it cannot, the stats source
# records nothing per allocation anyway. And only PyTorch's allocator: `auto` takes it (_mode.decide), the lens mode
# refuses the setting in one line.
#
# Note [Why the recorded steps keep the tracker]: the one source that PyTorch lets us switch off for good is its
# history ring (recordHistory(false): record_trace then returns at its first line, as natively), so recording the
# first steps into the ring, with our context recorder returning a context that carries our stack id, would leave
# nothing attached after the stop. Decided against (2026-11-28), for three reasons:
#  - order: the capture's order is what readers rely on (Note [Deferred observation] in sequencer.h). Module marks are
#    written as our recorder walks each malloc's frames, phase and step marks and tags from Python, all live into the
#    sequencer's queue; ring entries would reach the queue only when drained. Frees carry no context, so nothing would
#    say where a free falls among the marks between two mallocs; every mark and tag would need a drain first (a
#    module's forward is one), and each drain copies the whole ring (CCA::snapshot(): every entry, every block);
#  - the user's own history shares the ring: their _record_memory_history and _snapshot() would see our entries, and
#    PyTorch's snapshot converts every entry's context as its own CapturedTraceback;
#  - the gain: the tracker left attached costs PyTorch's trace entry, about 0.13 ms a ResNet-50 step (2,300 entries,
#    record_trace in a profile, H100), and a history switched on and off left +0.19 µs a pair in
#    probes/tracker_entry_cost.py (H100); the recording process's larger and varying excess after the stop (+0.1 to +1.8 ms a
#    step against native, A/A up to +1.6 in the same rounds, test/gpu/README.md) has shown in no part of ours.
_events_off = False


def events_off(why):
    """Note [Recorded steps]: from now on nothing is recorded per allocation (the tracker returns at once); True if it
    took effect here."""
    global _events_off
    with _lock:
        if _events_off or _obs is None or _tracker is None or STATE.observer_source != "tracker":
            return False
        _events_off = True
        torch = sys.modules.get("torch")
        try:
            _tracker.events_off()
        except Exception:  # a tracker without the flag (a stand-in): the library's flag alone does it
            pass
        _obs.lib.gpumem_observe_events_off(why.encode("utf-8", "replace"))
        try:
            _history_view.apply_ours()  # our recorder out of PyTorch's history; the user's history as they set it
        except Exception as exc:
            warn("recordHistory not restored after the recorded steps: %s: %s" % (type(exc).__name__, exc))
        if torch is not None:
            start_figures(torch)
        return True


def _attach_oom_observer(torch):
    attach = getattr(torch._C, "_cuda_attach_out_of_memory_observer", None)
    if attach is None:
        return

    def on_oom(device, alloc, device_allocated, device_free):
        # The tracker already wrote REC_OOM (its TraceEntry); the state that explains it follows, as
        # in lens mode (reason 1). The fallback has no tracker: the history holds the oom entry. Figures only has
        # neither (Note [Figures only]), nor has the tracker once the recorded steps are over (Note [Recorded steps]: it
        # returns at once): the OOM itself is written here, as a trace entry would give it (addr: the driver's free
        # bytes, size: the request), so the panels still tell it, without a line.
        try:
            if STATE.observer_source == "stats" or _events_off:
                _obs.event(int(device), ACTIONS["oom"], int(device_free), int(alloc))
            _write_states(torch, int(device), 1, "")
        except Exception as exc:
            warn("state after the out-of-memory error not recorded: %s: %s" % (type(exc).__name__, exc))

    try:
        attach(on_oom)
    except Exception:  # backends without OOM observers (cudaMallocAsync)
        pass


# ---- the user's own _record_memory_history ----------------------------------------------------------------
_CONTEXT_LEVEL = {None: 0, "state": 1, "alloc": 2, "all": 3}
# The trace actions skip_actions accepts (torch 2.11 refuses "user_defined").
RING_ACTIONS = ("alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "segment_map",
                "segment_unmap", "snapshot", "oom")


class _HistoryView:
    """Note [User history in the PyTorch-allocator mode]: the observer's stacks come from a context recorder
    installed through PyTorch's recordHistory (Note [Observer stacks]), and the history fallback is PyTorch's
    history itself; a user's own _record_memory_history would replace either, and their snapshots would show
    the observer's trace. So _record_memory_history is wrapped: PyTorch's own runs first (it validates the
    arguments and sets compile contexts and annotations exactly as natively), then the observer's recorder is
    put back, chained with PyTorch's traceback gatherer when the user asked for stacks ("python", or "all" with
    C++ frames), with the user's trace size, context level and skipped actions. _snapshot() (and so
    _dump_snapshot() and memory_snapshot()) shows no trace entries while the user's history is off, as
    natively. What differs from a native run: with the user's history off, or at context "state"/None, trace
    entries are still gathered at malloc (the observer's recorder runs at context level "state" at least)."""

    def __init__(self):
        self.on = False           # the user's history is on
        self.user_stacks = 0      # 0 none, 1 python, 2 all
        self.max_entries = 1
        self.when = 0
        self.skip = []
        self.raw_snapshot = None  # PyTorch's own _snapshot and _record_memory_history
        self.raw_record = None

    def install(self, torch):
        memory = torch.cuda.memory
        original = getattr(memory, "_record_memory_history", None)
        snapshot = getattr(memory, "_snapshot", None)
        if original is None or snapshot is None or getattr(original, "_gpumem", False):
            return
        self.raw_snapshot = snapshot
        self.raw_record = original
        view = self

        @functools.wraps(original)
        def _record_memory_history(*args, **kwargs):
            result = original(*args, **kwargs)
            try:
                view.remember(original, args, kwargs)
                view.apply_ours()
            except Exception as exc:  # never fail the user's call for our bookkeeping
                warn("after _record_memory_history: %s: %s" % (type(exc).__name__, exc))
            return result

        @functools.wraps(snapshot)
        def _snapshot(*args, **kwargs):
            snap = snapshot(*args, **kwargs)
            if not view.on and isinstance(snap, dict) and isinstance(snap.get("device_traces"), list):
                snap["device_traces"] = [[] for _ in snap["device_traces"]]
            return snap

        _record_memory_history._gpumem = True
        memory._record_memory_history = _record_memory_history
        memory._snapshot = _snapshot
        if getattr(torch.cuda, "_record_memory_history", None) is original:
            torch.cuda._record_memory_history = _record_memory_history

    def remember(self, original, args, kwargs):
        import inspect

        try:
            bound = inspect.signature(original).bind(*args, **kwargs)
            bound.apply_defaults()
            a = bound.arguments
        except (TypeError, ValueError):
            a = dict(kwargs)
        enabled = a.get("enabled", "all")
        if isinstance(enabled, bool):  # the pre-2.1 signature: (enabled, record_context, trace_alloc_max_entries, …)
            self.on = enabled
            self.user_stacks = 1 if enabled else 0
            self.max_entries = int(a.get("trace_alloc_max_entries", 1) or 1) if enabled else 1
            self.when = (2 if a.get("trace_alloc_record_context") else 1) if enabled else 0
            self.skip = []
            return
        self.on = enabled is not None
        context = a.get("context", "all") if self.on else None
        stacks = a.get("stacks", "all")
        self.when = _CONTEXT_LEVEL.get(context, 0)
        self.user_stacks = 0 if not self.on or context is None else (2 if stacks == "all" else 1)
        self.max_entries = int(a.get("max_entries") or 1) if self.on and enabled == "all" else 1
        self.skip = list(a.get("skip_actions") or [])

    def apply_ours(self):
        """Puts the observer's recorder (or the fallback's history) back after the user's settings."""
        stacks = bool(STATE.settings.stacks) if STATE.settings is not None else True
        stacks = stacks and not _events_off  # Note [Recorded steps]: our recorder is out of PyTorch's history for good
        if _tracker is not None:
            # With the user's history off, PyTorch's trace ring is kept empty (every action skipped): the
            # tracker still sees every entry (probed on torch 2.11: skip_actions gates the ring only), and
            # no entry is copied into a ring nobody reads.
            skip = self.skip if self.on else list(RING_ACTIONS)
            _tracker.record(stacks, self.user_stacks, min(self.max_entries, 2 ** 62), self.when, skip)
        elif _fallback is not None:
            _fallback.enable()


_history_view = _HistoryView()
_tracker = None
_figures_ext = None  # the extension whose figures are read: the tracker's, or loaded for figures only (no tracker)
figures_by = None  # who reads PyTorch's figures once they are the source: "sampler", "poll" (start_figures)


# ---- whether the observer can run here (for `auto`, Note [Choosing the mode]) -----------------------------
def _cpu_only(torch):
    """A torch built without CUDA (nor ROCm): nothing to observe, so nothing to build. Note [Observer build ahead]: VS
    Code builds ahead at activation, and a workspace with test files activates it; on a CPU-only torch that build
    could only fail, after a compile, at every activation."""
    version = getattr(torch, "version", None)
    return version is not None and not getattr(version, "cuda", None) and not getattr(version, "hip", None)


def availability(torch):
    """(True, None) when the tracker is built for this torch or can be built here (a C++ compiler, ninja and
    Python's headers), else (False, why). Cheap: looks at files and the PATH, imports nothing."""
    import shutil
    import sysconfig

    if _cpu_only(torch):
        return False, "this torch (%s) is built without CUDA: there is no CUDA allocator to observe" % torch.__version__
    if _built(_build_dir(torch)[0]):
        return True, None
    cxx = os.environ.get("CXX") or "c++"
    if not shutil.which(cxx.split()[0]) and not shutil.which("g++"):
        return False, "no C++ compiler (%s) to build the observer of PyTorch's allocator" % cxx
    if not shutil.which("ninja"):
        try:
            import ninja  # noqa: F401  (the pip package puts its binary next to it)
        except ImportError:
            return False, "no ninja to build the observer of PyTorch's allocator"
    include = sysconfig.get_paths().get("include") or ""
    if not os.path.isfile(os.path.join(include, "Python.h")):
        return False, "no Python headers (%s/Python.h) to build the observer of PyTorch's allocator" % include
    return True, None
