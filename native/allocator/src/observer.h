// observer.h — PyTorch's own caching allocator, observed (the "pytorch" allocator mode).
//
// Note [Observer]: in pytorch mode PyTorch's CUDACachingAllocator serves every allocation and the
// lens allocator core is never used. What PyTorch did arrives as its trace entries (TraceEntry, from
// a trace tracker attached with attachAllocatorTraceTracker by a tiny extension built against the
// user's torch, native/python/gpumem/_observe.py). on_event() is the ONE conversion from a trace entry
// to capture records; the tracker and the CPU tests on real snapshot pickles both call it (through
// gpumem_observe_event), so what is tested is what runs.
//
// The conversion: alloc → REC_ALLOC; free_requested/free_completed → REC_FREE_*; segment_alloc/free/
// map/unmap → REC_SEGMENT_*; oom (addr = the driver's free bytes) → REC_OOM; snapshot → nothing.
// Frees of addresses the observer never saw handed out (they predate it and were not seeded) are
// dropped and counted (dropped_frees): a reader would otherwise infer an allocation from nothing. An
// alloc of an address that is still live (CUDA-graph trees restore a pool's checkpoint without trace
// entries) first closes the old block with free records, so no address is ever counted twice.
// Running figures (allocated, reserved, peaks, OOMs) follow the same events and feed REC_STATS and the
// control channel's ping. REC_STATE comes from the host (PyTorch's own _snapshot(), which knows graph
// pool ids and expandable segments), through the Host callbacks.
//
// Note [Observer stacks]: on_event runs under PyTorch's allocator lock; another thread may hold the
// GIL while it waits for that lock, so nothing there may take the GIL. The stack is therefore taken
// where PyTorch takes its own history's stacks: in the context recorder that
// CUDACachingAllocator::recordHistory installs, which malloc calls on the allocating thread BEFORE it
// takes the allocator lock ("Must be called outside of `mutex` or deadlocks are possible with
// Python", CUDACachingAllocator.cpp). The tracker extension's recorder calls gather() (the lens
// allocator's own capture: cached, mostly GIL-free, the GIL taken only for a new call site; autograd
// threads get the open backward() bracket's stack, exactly as in lens mode) and returns no context,
// so PyTorch stores nothing. The stack waits in a thread-local until the same thread's trace entries
// come: take_stack() hands it to the malloc's segment entries and consumes it at its ALLOC or OOM.
// An entry with no gathered stack (a CUDA-graph tree restoring a pool's checkpoint, or a torch whose
// allocator never calls the recorder) falls back to stacks::capture_if_gil_held(), which never takes
// the GIL. Probed on an H100 with torch 2.11 (test/gpu/probes/context_recorder.py): the recorder ran
// for every ALLOC entry, on the main thread, autograd threads, user threads and under cudnn.benchmark,
// and never with the GIL held.
#pragma once
#include <cstdint>
#include <string>

#include "allocator_api.h"
#include "sequencer.h"

namespace gpumem::rec::observer {

// PyTorch's c10::cuda::CUDACachingAllocator::TraceEntry::Action, in its order (2.1–2.11).
enum Action : int {
  ALLOC = 0,
  FREE_REQUESTED = 1,
  FREE_COMPLETED = 2,
  SEGMENT_ALLOC = 3,
  SEGMENT_FREE = 4,
  SEGMENT_MAP = 5,
  SEGMENT_UNMAP = 6,
  SNAPSHOT = 7,
  OOM = 8,
  USER_DEFINED = 9,
  // Not PyTorch's: the private pool (TraceEntry::mempool_, a MempoolId_t) of the same device's next segment entry, as
  // addr = id.first and size = id.second, which the tracker sends just before a segment entry of a private pool
  // (a CUDA graph's or a torch.cuda.MemPool's). It goes through the same queue, so it stays next to its entry; the
  // segment record then carries the pool id and kPoolPrivate, as the lens allocator's do.
  SEGMENT_POOL = 16,
};

// What the workload does for the recorder when the core is not PyTorch's allocator (all optional).
struct Host {
  // torch.cuda.empty_cache(); reports reserved bytes of all devices before and after. 0 on success.
  int (*empty_cache)(uint64_t* before, uint64_t* after) = nullptr;
  // Writes REC_STATE records (through gpumem_observe_state) for `device` (-1 = all) with `reason`, and
  // if pickle_path is non-empty PyTorch's own snapshot pickle there. Returns the first state's offset,
  // or -1.
  int64_t (*state)(int device, uint32_t reason, const char* pickle_path) = nullptr;
};

// Observer mode on: from now on the recorder's figures, states and empty-cache come from here.
void start(const Host& host);
bool active();
const Host& host();

// One PyTorch trace entry, applied now (after whatever the tracker queued). t_ns = 0 means now. Returns false if
// the entry was dropped (unknown free, unknown action). The CPU tests, the snapshot pickles' traces and the history
// fallback come this way.
bool on_event(int device, int action, uint64_t addr, uint64_t size, uint64_t stream, uint32_t stack, uint64_t t_ns);
// The live tracker's way (Note [Deferred observation] in sequencer.h): the entry's time and thread are taken now and
// it is applied, in order, by the sequencer's thread; inline when no sequencer runs. False only for a device or
// action out of range (or, inline, a dropped entry).
bool queue_event(int device, int action, uint64_t addr, uint64_t size, uint64_t stream, uint32_t stack, uint64_t t_ns);
// What the sequencer's thread calls for each queued entry.
void apply(const sequencer::Event& e);

// PyTorch's rounding and splitting settings, the JSON of _snapshot()["allocator_settings"] (Note [PyTorch's block
// sizes] in observer.cc); false when it is not a JSON object (the defaults stay).
bool set_rounding(const std::string& settings_json);

// Figures read from PyTorch's stats API, for allocators that offer neither trace trackers nor history
// (backend:cudaMallocAsync): the stats-only source (Note [Observing PyTorch's allocator]).
void set_figures(int device, uint64_t allocated, uint64_t reserved, uint64_t peak_allocated, uint64_t peak_reserved,
                 uint64_t num_ooms);
// Note [Figures on the sampler's thread]: where the figures come from PyTorch's stats (figures only, and after the
// recorded steps), the tracker extension's C reader gives them to the sampler's pass (recorder.h's Sources::refresh),
// so no thread of the host's wakes to poll them holding the GIL the user's steps need. `read(device, out)` fills
// allocated, reserved, peak allocated, peak reserved, OOMs, requested and returns 0; it takes PyTorch's allocator
// lock, so it is only ever called from the sampler's thread, holding no lock of ours but the reader's own.
// Lock order: the reader's mutex, then PyTorch's allocator lock (inside read, released on return), then a device's
// figures lock (set_figures); nothing of ours is taken under PyTorch's lock here. nullptr clears the reader and
// returns once a read in progress has ended (the host clears it before its interpreter goes away), having read every
// device's figures once more, on the caller's thread, for the capture's last pass (Note [Last figures]).
using FiguresReader = int (*)(int device, int64_t* out);
void set_figures_reader(FiguresReader read);
// One device's figures through the reader, when one is set (the sampler's pass, before it writes REC_STATS).
void refresh_figures(int device);
// The device's figures as the events made them (summed when device == -1).
core::Figures figures(int device);
uint64_t dropped_frees();
// 1 + the highest device index seen in an event or noted with note_device (0 before any).
int device_count();
void note_device(int device);
// The calling thread's stack, taken by PyTorch's context recorder before the allocator lock (may take
// the GIL; never call it under a lock another thread could hold while waiting for the GIL). It waits
// for this thread's next trace entries (Note [Observer stacks]); returns its id.
uint32_t gather();
// The stack for a trace entry of `action` on the calling thread: the gathered one (consumed by ALLOC
// and OOM), else whatever can be had without the GIL. Safe under PyTorch's allocator lock.
uint32_t take_stack(int action);

// Note [Recorded steps] (native/python/gpumem/_recorded_steps.py): from now on the tracker's entries and the context
// recorder's calls return at once (one relaxed load), for good. Whatever was queued is applied first, then a
// MARK_EVENTS_OFF marker (name = why) is written in its place after the last event, so a reader knows from when the
// figures are the REC_STATS samples' (the host sets them through set_figures from PyTorch's stats); the sequencer's
// thread then ends, its queue having nothing left to order. The live-block map
// is kept as it was at that moment: a state record names a block's stack only where a block of the same address and
// size was live then (a persistent tensor, or the same tensor of a repeating step), else none.
void events_off(const std::string& why);
bool events_are_off();
// Note [Figures only] (native/python/gpumem/_observe.py): a source with no event at all (PyTorch's stats: figures only,
// the cudaMallocAsync backend) ends the sequencer's thread at the start, as events_off does after the recorded steps:
// it would wake 200 times a second to drain a queue that only markers, tags and notices use, and those then go to the
// writer at once. No marker: there is no event for one to follow.
void unqueued();
// Whether trace entries may still come (false after events_off or unqueued): the recorder's one stack a backward()
// (stacks::backward_begin, for the autograd threads' allocations) is walked only then; in the lens mode, where the
// observer never starts, always true.
bool entries_expected();

// The stack of the live block at addr (0 if unknown), for state records; with size, 0 too when the events are off and
// the block there then had another size (Note [Recorded steps]).
uint32_t stack_of(int device, uint64_t addr, uint64_t size = 0);

// A state record of one device from a JSON array of PyTorch snapshot segments (keys: address,
// total_size, stream, segment_type, segment_pool_id, is_expandable, blocks: [address, size,
// requested_size, state]). Returns the capture offset, or -1 (and *err) on bad input / no capture.
int64_t write_state_json(int device, uint32_t reason, const std::string& segments_json, std::string* err);

}  // namespace gpumem::rec::observer
