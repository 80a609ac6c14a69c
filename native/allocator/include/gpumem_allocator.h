// gpumem_allocator.h — the C API of libgpumem_allocator.so, the lens allocator.
//
// Two audiences:
//  1. PyTorch, through CUDAPluggableAllocator (the hooks below, by symbol name; the bootstrap wires the
//     optional ones with alloc.allocator().set_*_fn(ctypes address)).
//  2. The Python bootstrap (ctypes) and the in-process control server: configuration, stats,
//     snapshots, markers.
// Streams are passed as void* (cudaStream_t); no CUDA header is needed to use this API.
// Functions returning int return 0 on success and -1 on failure (gpumem_last_error() says why).
#pragma once
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#include <functional>
#include <utility>
struct CUstream_st;  // cudaStream_t is CUstream_st*; declared here so no CUDA header is needed
extern "C" {
#endif

// ---- PyTorch hooks (CUDAPluggableAllocator) ----------------------------------------------------
// Never returns NULL: on OOM throws std::runtime_error("CUDA out of memory. Tried to allocate ...").
void* gpumem_malloc(size_t size, int device, void* stream);
void gpumem_free(void* ptr, size_t size, int device, void* stream);
void gpumem_init(int device_count);
void gpumem_reset(void);  // torch.cuda.empty_cache()
void gpumem_memory_fraction(double fraction, int device);
void gpumem_record_stream(void* ptr, void* stream);
void* gpumem_base_alloc(void* ptr, size_t* size);

// ---- Configuration (before the first gpumem_malloc) ------------------------------------------
// JSON object; every key optional:
//  {"capture_path": "/session/capture-<pid>.gpumem",   // no capture if absent
//   "header": {...},            // merged into the capture header JSON (argv, rank, versions…)
//   "backend": "cuda"|"sim",    // sim = simulated device (host memory), for tests and replay
//   "sim_capacity": 1073741824, "sim_devices": 1,
//   "segments": "expandable"|"fixed",   // default expandable
//   "trim_on_growth": true,     // expandable: unmap free pages before raising the reserved peak (default)
//   "stacks": true,             // capture Python stacks at malloc
//   "user_roots": ["/abs/workspace"],  // hint for marking user frames (reader decides attribution)
//   "sample_interval_ms": 200,  // device-used sampling period (0 = off)
//   "control_socket": "/session/ctl-<pid>.sock"}  // start the control server
int gpumem_configure(const char* json);
const char* gpumem_last_error(void);
const char* gpumem_version(void);

// ---- Stats (PyTorch memory_stats() key schema) --------------------------------------------------
// Writes a JSON object {"allocated_bytes.all.current": N, ...} (all 2.11 keys, plus the lens's own
// "num_trim_syncs" and "num_page_moves", Note [Page moves]) into buf; returns the length needed
// (call again with a larger buffer if it is >= cap).
size_t gpumem_stats_json(int device, char* buf, size_t cap);
uint64_t gpumem_allocated(int device);
uint64_t gpumem_reserved(int device);
// The bytes live allocations asked for, before rounding (-1 = all devices): the leak keeper's step-end read.
uint64_t gpumem_requested(int device);
void gpumem_reset_peak_stats(int device);
void gpumem_reset_accumulated_stats(int device);

// ---- Actions ----------------------------------------------------------------------------------------
// Release every fully free cached segment of `device` (-1 = all) after pending events; reports bytes.
int gpumem_empty_cache(int device, uint64_t* reserved_before, uint64_t* reserved_after, int origin);
// Write a REC_STATE of every device to the capture, and, if pickle_path is non-NULL, a PyTorch
// snapshot pickle (protocol 4; segments + device_traces from the in-memory trace ring).
// Returns the capture offset of the first state record (or -1).
int64_t gpumem_snapshot(const char* pickle_path);
// The same pickle as bytes (for torch.cuda.memory._snapshot()); free with gpumem_free_buffer.
int gpumem_snapshot_pickle(uint8_t** out, size_t* out_len);
void gpumem_free_buffer(void* p);
int gpumem_mark(const char* name, uint32_t kind);  // MarkerKind
// The memory at `addr` (a tensor's data_ptr on CUDA device `device`, `size` bytes) is a TagCategory
// (1 parameter, 2 gradient, 3 optimizer state); `name` may be NULL. Writes a REC_TAG (Note [Tags]).
int gpumem_tag(uint64_t addr, uint64_t size, uint32_t category, const char* name, int device);
// `count` tags at once, as gpumem_tag(addr, size, category, NULL, device) each, in order: `items` holds count
// quadruples (addr, size, category, device). The optimizer walk's way (native/python/gpumem/_tags.py): one call
// a step instead of one per gradient. All or nothing: a bad item writes none and returns -1.
int gpumem_tags(const uint64_t* items, uint32_t count);
int gpumem_notice(const char* text, uint32_t level);
// The calling thread's memory label from now on, as torch.cuda.memory._set_memory_metadata(text) sets PyTorch's
// (Note [User metadata] in format/gpumem_format.h): its block events, on any device, carry it as user_metadata in
// the capture and the snapshot pickle; "" clears it. 1: a REC_USER_METADATA was written (the label changed), 0: not
// (unchanged, or no capture open), -1: text is NULL. No allocator lock, no GIL: safe under PyTorch's allocator lock.
int gpumem_user_metadata(const char* text);
// Backward attribution (DESIGN §3): the bootstrap brackets torch.autograd.backward() with these on the
// calling thread; allocations made meanwhile on threads with no Python frames (autograd workers) get
// this thread's stack, flagged kStackBackward. Nestable (a counter), one per process.
void gpumem_backward_begin(void);
// Module paths from frames (src/module_marks.h, Note [Module paths from frames]): calibrate from a Python
// function whose first argument is `expected` (1: verified); enable on the calling thread with the
// workload's resolver, which calls gpumem_modules_learn(self, path or NULL) for each module `self` it is
// given (outermost first); forget a module that was collected.
int gpumem_modules_calibrate(const void* expected);
void gpumem_modules_enable(int (*resolve)(const void* const* selves, int n));
void gpumem_modules_learn(const void* self, const char* path);
void gpumem_modules_forget(const void* self);
void gpumem_backward_end(void);
// Backward on the forward line (Note [Backward on the forward line] in src/backward_links.h), called by the
// observer extension: PyTorch's next autograd sequence number and RecordFunction thread id of the calling thread, its
// op callback's switch, and the autograd node the calling thread evaluates now (1; its sequence number, UINT64_MAX
// for none, the thread that made it, its name) or 0; then, from its op callback, an op's end on a forward thread.
void gpumem_links_connect(uint64_t (*next_sequence)(void), uint64_t (*thread_id)(void), void (*op_callback)(int),
                          int (*current_node)(uint64_t* seq, uint64_t* thread, const char** name));
void gpumem_op_end(void);
// How Python stacks are being captured, as JSON (same length rule as gpumem_stats_json):
// {"python": bool, "gil_free_walk": bool, "not_gil_free_because": "...", "gil_free_answers": N,
//  "gil_walks": N, "mismatches": N} — see Note [GIL-free walk] in src/frame_walker.h.
size_t gpumem_stack_info(char* buf, size_t cap);
// Flush the writer and append REC_END (idempotent; also runs atexit).
void gpumem_shutdown(int exit_code);

// ---- Observer mode: PyTorch's own caching allocator, observed (src/observer.h, Note [Observer]) ------
// The bootstrap (gpumem/_observe.py) configures a capture with gpumem_configure, then calls
// gpumem_observe_start; PyTorch's trace entries go to gpumem_observe_event. Never call gpumem_malloc in
// this mode. The callbacks run on the control server's or the sampler's thread (no allocator lock held).
//  empty_cache_fn: torch.cuda.empty_cache(), reserved bytes before/after; 0 on success.
//  state_fn(device, reason, pickle_path): REC_STATE records via gpumem_observe_state (and PyTorch's own
//    pickle at pickle_path when it is not empty); returns the first record's offset or -1.
int gpumem_observe_start(int (*empty_cache_fn)(uint64_t*, uint64_t*), int64_t (*state_fn)(int, uint32_t, const char*));
// One TraceEntry (action = TraceEntry::Action: 0 alloc … 8 oom); t_ns 0 = now. 1 recorded, 0 dropped. Action 16 is
// not an entry: the private pool (addr, size = MempoolId_t's first, second) of the device's next segment entry
// (src/observer.h: SEGMENT_POOL).
// Safe under PyTorch's allocator lock: takes no GIL, no allocator lock, does no I/O.
int gpumem_observe_event(int device, int action, uint64_t addr, uint64_t size, uint64_t stream, uint32_t stack,
                         uint64_t t_ns);
// The live trace tracker's way (the same arguments): the same entry, queued with its time and thread and applied in
// order on the observer's own thread (Note [Deferred observation] in src/sequencer.h); inline when that thread does not
// run. 1 queued (or recorded inline), 0 out of range (or dropped inline). Safe under PyTorch's allocator lock.
int gpumem_observe_event_queued(int device, int action, uint64_t addr, uint64_t size, uint64_t stream, uint32_t stack,
                                uint64_t t_ns);
// Figures from PyTorch's stats API (the stats-only source, when no trace tracker or history is offered).
void gpumem_observe_figures(int device, uint64_t allocated, uint64_t reserved, uint64_t peak_allocated,
                            uint64_t peak_reserved, uint64_t num_ooms);
// PyTorch's rounding and splitting settings, as JSON: torch.cuda.memory._snapshot()["allocator_settings"] (Note
// [PyTorch's block sizes] in src/observer.cc), so that the blocks the observer records are PyTorch's under
// roundup_power2_divisions and max_split_size_mb. 0, or -1 when it is not a JSON object.
int gpumem_observe_rounding(const char* settings_json);
// Note [Figures on the sampler's thread] (src/observer.h): the sampler's thread reads each device's figures through
// `read` (device, out[6]: allocated, reserved, peak allocated, peak reserved, OOMs, requested; 0 = read) before each
// REC_STATS, instead of the host polling gpumem_observe_figures. 0 taken, -1 when the sampler does not run (the host
// polls). NULL clears it, returning once a read in progress has ended.
int gpumem_observe_figures_reader(int (*read)(int device, int64_t* out));
// Note [Recorded steps] (src/observer.h): from now on the tracker's entries and the recorder's calls return at once,
// for good; what was queued is applied, then a MARK_EVENTS_OFF marker named `why`. The figures then come from
// gpumem_observe_figures. 0, or -1 (why NULL).
int gpumem_observe_events_off(const char* why);
// Note [Figures only] (native/python/gpumem/_observe.py): no event will come (PyTorch's stats are the source), so the
// observer's thread ends; markers, tags and notices go to the writer at once.
void gpumem_observe_unqueued(void);
// From PyTorch's context recorder (malloc, before the allocator lock): takes the calling thread's stack,
// the GIL if needed, and keeps it for the thread's next trace entries (Note [Observer stacks]).
uint32_t gpumem_observe_gather(void);
// From the trace tracker (under the allocator lock; never takes the GIL): the stack for an entry of
// `action` on this thread, the gathered one if any (ALLOC and OOM consume it).
uint32_t gpumem_observe_take_stack(int action);
// Note [Probe switches] (src/c_api.cc): parts of the recording off and on inside a running workload, for the step
// cost probe only ("observe_hold", "stacks", "drain_ms", "drain_wake", "flush_ms"). 0, or -1 for an unknown name.
int gpumem_probe_set(const char* name, int64_t value);
// Interns a stack from JSON [[file, function, line], …] innermost first (e.g. a snapshot's frames).
uint32_t gpumem_observe_frames(const char* frames_json, uint32_t flags);
// A REC_STATE of `device` from PyTorch snapshot segments as JSON; returns its offset or -1.
int64_t gpumem_observe_state(int device, uint32_t reason, const char* segments_json);
// Announces a device (REC_DEVICE; NVML sampling by PCI bus id).
int gpumem_observe_device(int device, const char* name, uint64_t total_bytes, const char* pci_bus_id);
// {"active", "devices", "allocated", "reserved", "peak_allocated", "dropped_frees"} (length rule as above).
size_t gpumem_observe_info(char* buf, size_t cap);

#ifdef __cplusplus
}  // extern "C"

// CUDA graph pool hooks: C++ parameter types by value, exactly as PyTorch 2.x passes them
// (MempoolId_t = std::pair<unsigned long long, unsigned long long>). extern "C" linkage so the
// bootstrap can find them by unmangled name.
extern "C" void gpumem_begin_allocate_to_pool(int device, std::pair<unsigned long long, unsigned long long> pool,
                                              std::function<bool(CUstream_st*)> filter);
extern "C" void gpumem_end_allocate_to_pool(int device, std::pair<unsigned long long, unsigned long long> pool);
extern "C" void gpumem_release_pool(int device, std::pair<unsigned long long, unsigned long long> pool);
#endif
