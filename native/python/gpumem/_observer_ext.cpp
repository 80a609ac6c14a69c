// The observer of PyTorch's allocator: a trace tracker and context recorders, built at first use against the user's
// torch (native/python/gpumem/_observer_build.py, Note [Observer build watchdog] there), in the PyTorch-allocator mode
// (Note [Observing PyTorch's allocator] in native/python/README.md).
//
// Note [Observer stacks] (native/allocator/src/observer.h): the tracker hands each TraceEntry to
// gpumem_observe_event under PyTorch's allocator lock, where the GIL must never be taken; the stack comes
// from PyTorch's context recorder, which malloc calls on the allocating thread before it takes that lock.
// record() installs our recorder through CUDACachingAllocator::recordHistory, chained with PyTorch's own
// Python/C++ traceback when the user asked _record_memory_history for stacks (so their snapshot keeps its
// frames), and with the user's trace size, context level and skipped actions.
#include <ATen/SequenceNumber.h>
#include <ATen/record_function.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/python_function.h>
#include <torch/csrc/profiler/combined_traceback.h>
#include <torch/extension.h>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>
#include <typeinfo>
#include <unordered_map>
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
// Note [Recorded steps] (native/python/gpumem/_recorded_steps.py): once on, the tracker and our context recorders
// return at once, for good.
static std::atomic<bool> g_off{false};
void events_off() { g_off.store(true); }
// Note [User metadata] (native/format/gpumem_format.h): PyTorch 2.10+ stamps each trace entry with its thread's
// _set_memory_metadata label (TraceEntry::user_metadata_); older ones have no such field (nothing to pass on).
template <class T>
auto label_of(const T& te, int) -> decltype(&te.user_metadata_) {
  return &te.user_metadata_;
}
template <class T>
const std::string* label_of(const T&, long) {
  return nullptr;
}
// The private pool (a CUDA graph's, a torch.cuda.MemPool's) of a segment entry, where the torch stamps entries with it
// (TraceEntry::mempool_); (0, 0): the default pools, or a torch without the field. The policy replay keeps a pool's
// allocations in it (Note [Policy replay] in native/addon/src/policy_replay.cpp).
template <class T>
auto pool_of(const T& te, int) -> decltype(te.mempool_.first, std::pair<uint64_t, uint64_t>()) {
  return {static_cast<uint64_t>(te.mempool_.first), static_cast<uint64_t>(te.mempool_.second)};
}
template <class T>
std::pair<uint64_t, uint64_t> pool_of(const T&, long) {
  return {0, 0};
}
static constexpr int kSegmentPool = 16;  // the library's SEGMENT_POOL (native/allocator/src/observer.h)
// Note [Figures without the dict] (native/python/gpumem/_observer_figures.py): one device's counters as PyTorch's
// allocator keeps them, read under its lock as memory_stats() reads them, without the ~150-entry dict: allocated,
// reserved, peak allocated, peak reserved, OOMs, requested (current; index 0 of each stat array is StatType::AGGREGATE
// in every torch since 1.4).
std::vector<int64_t> figures(int64_t device) {
  const auto s = CCA::get()->getDeviceStats(static_cast<c10::DeviceIndex>(device));
  return {s.allocated_bytes[0].current,
          s.reserved_bytes[0].current,
          s.allocated_bytes[0].peak,
          s.reserved_bytes[0].peak,
          s.num_ooms,
          s.requested_bytes[0].current};
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
    if (a >= CCA::TraceEntry::SEGMENT_ALLOC && a <= CCA::TraceEntry::SEGMENT_UNMAP) {
      const std::pair<uint64_t, uint64_t> pool = pool_of(te, 0);
      if (pool.first || pool.second)
        g_event(static_cast<int>(te.device_), kSegmentPool, pool.first, pool.second, 0, 0u, 0);
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
extern "C" __attribute__((visibility("default"))) void* gpumem_glue_malloc(size_t size, int device,
                                                                           cudaStream_t stream) {
  try {
    return g_lens_malloc(size, device, stream);
  } catch (const std::exception& e) {
    if (std::string(e.what()).rfind("CUDA out of memory.", 0) == 0) TORCH_CHECK_WITH(OutOfMemoryError, false, e.what());
    throw;
  }
}
extern "C" __attribute__((visibility("default"))) void gpumem_glue_free(void* p, size_t size, int device,
                                                                        cudaStream_t stream) {
  g_lens_free(p, size, device, stream);
}
// Context recorders: malloc calls one before it takes the allocator lock, on the allocating thread.
static void gather_ours() {
  if (!g_off.load(std::memory_order_relaxed)) g_gather();
}
static std::shared_ptr<c10::GatheredContext> ours() {
  gather_ours();
  return nullptr;
}
static std::shared_ptr<c10::GatheredContext> ours_and_python() {
  gather_ours();
  return torch::CapturedTraceback::gather(true, true, false);
}
static std::shared_ptr<c10::GatheredContext> ours_and_cpp() {
  gather_ours();
  return torch::CapturedTraceback::gather(true, true, true);
}
static std::shared_ptr<c10::GatheredContext> theirs_python() {
  return torch::CapturedTraceback::gather(true, true, false);
}
static std::shared_ptr<c10::GatheredContext> theirs_cpp() { return torch::CapturedTraceback::gather(true, true, true); }
// recordHistory's signature grew over the versions (4 arguments, + clearHistory, + skip_actions in 2.11).
template <class F>
auto rh(bool on, F f, size_t n, CCA::RecordContext w, const std::vector<std::string>& skip, int)
    -> decltype(CCA::recordHistory(on, f, n, w, false, skip), std::string()) {
  CCA::recordHistory(on, f, n, w, false, skip);
  return "6";
}
template <class F>
auto rh(bool on, F f, size_t n, CCA::RecordContext w, const std::vector<std::string>&, long)
    -> decltype(CCA::recordHistory(on, f, n, w, false), std::string()) {
  CCA::recordHistory(on, f, n, w, false);
  return "5";
}
template <class F>
std::string rh(bool on, F f, size_t n, CCA::RecordContext w, const std::vector<std::string>&, ...) {
  CCA::recordHistory(on, f, n, w);
  return "4";
}
// ours_on: our stacks wanted (GPUMEM_STACKS); user_stacks: 0 none, 1 Python, 2 Python and C++ (the user's
// own _record_memory_history, if on); when: RecordContext (0 never … 3 all), at least STATE (1) while
// ours_on, since malloc gathers at STATE; max_entries: PyTorch's trace ring (1 when the user keeps none).
std::string record(bool ours_on, int64_t user_stacks, int64_t max_entries, int64_t when,
                   std::vector<std::string> skip) {
  py::gil_scoped_release no_gil;  // recordHistory takes each device's allocator lock
  CCA::CreateContextFn f = ours_on ? (user_stacks == 2   ? ours_and_cpp
                                      : user_stacks == 1 ? ours_and_python
                                                         : ours)
                                   : (user_stacks == 2 ? theirs_cpp : theirs_python);
  const bool on = ours_on || user_stacks > 0 || max_entries > 1;
  if (ours_on && when < 1) when = 1;
  return rh(on, f, size_t(max_entries < 1 ? 1 : max_entries), static_cast<CCA::RecordContext>(when), skip, 0);
}

// Note [Backward on the forward line] (native/allocator/src/backward_links.h): one RecordFunction callback, at each
// op's end (FUNCTION scope), where the library files the autograd nodes the thread made that no allocation filed; the
// library switches it off while a backward() runs and once a step is learned (Note [Learned steps]). It needs no
// inputs, outputs or ids: PyTorch boxes nothing for it. In backward, the library asks at each allocation which node
// the thread evaluates (current_node(): the engine's own record of it, no callback per node). Turned on through C
// (ctypes, both modes: the lens loads this module only as a library, Note [Lens OOM type]); off at the end of the
// recorded steps.
typedef void (*OpEndFn)();
typedef int (*CurrentNodeFn)(uint64_t*, uint64_t*, const char**);
typedef void (*ConnectFn)(uint64_t (*)(), uint64_t (*)(), void (*)(int), CurrentNodeFn);
static OpEndFn g_op_end = nullptr;
static std::atomic<uint64_t> g_op_handle{0};
static std::unique_ptr<at::ObserverContext> op_start(const at::RecordFunction&) { return nullptr; }
static void op_end(const at::RecordFunction&, at::ObserverContext*) { g_op_end(); }
static uint64_t next_sequence() { return at::sequence_number::peek(); }
static uint64_t thread_id() { return at::RecordFunction::currentThreadId(); }
static void op_callback(int on) {
  const uint64_t h = g_op_handle.load();
  if (!h) return;
  if (on)
    at::reenableCallback(h);
  else
    at::disableCallback(h);
}
// A node's name without the GIL: a Python Function's node (PyNode, whose name() takes the GIL and whose typeinfo
// libtorch_python does not export) is named by its Python class; any other by name(), once per node type on this
// thread (a generated node's name() builds a string each call). The strings live as long as the thread or the class.
static const char* node_name(torch::autograd::Node* n) {
  const std::type_info& type = typeid(*n);
  if (std::strcmp(type.name(), "N5torch8autograd6PyNodeE") == 0)
    return Py_TYPE(static_cast<torch::autograd::PyNode*>(n)->obj)->tp_name;
  thread_local std::unordered_map<const std::type_info*, std::string> names;
  auto it = names.find(&type);
  if (it == names.end()) it = names.emplace(&type, n->name()).first;
  return it->second.c_str();
}
static int current_node(uint64_t* seq, uint64_t* thread, const char** name) {
  std::shared_ptr<torch::autograd::Node> n = torch::autograd::get_current_node();
  if (!n) return 0;
  *seq = n->sequence_nr();
  *thread = n->thread_id();
  *name = node_name(n.get());
  return 1;
}
extern "C" __attribute__((visibility("default"))) int gpumem_links_on(void* connect, void* op_end_fn) {
  if (g_op_handle.load()) return 0;
  try {
    g_op_end = reinterpret_cast<OpEndFn>(op_end_fn);
    reinterpret_cast<ConnectFn>(connect)(next_sequence, thread_id, op_callback, current_node);
    g_op_handle.store(
        at::addGlobalCallback(at::RecordFunctionCallback(op_start, op_end).scopes({at::RecordScope::FUNCTION})));
    return 0;
  } catch (...) {
    return -1;
  }
}
// The library keeps the node source (current_node lives in this module, which stays loaded); an op running now ends
// through the callback it began with (PyTorch keeps each RecordFunction's callbacks).
extern "C" __attribute__((visibility("default"))) void gpumem_links_off() {
  const uint64_t op = g_op_handle.exchange(0);
  if (op) at::removeCallback(op);
}

// The module's functions, bound as torch.utils.cpp_extension.load_inline binds `functions=` (each wrapped so a C++
// exception reaches Python as torch's error types, its docstring its name).
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("attach", torch::wrap_pybind_function(attach), "attach");
  m.def("record", torch::wrap_pybind_function(record), "record");
  m.def("events_off", torch::wrap_pybind_function(events_off), "events_off");
  m.def("figures", torch::wrap_pybind_function(figures), "figures");
}
