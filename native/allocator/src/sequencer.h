// sequencer.h — the PyTorch-allocator mode's trace entries, applied off the allocating thread, with the
// records that must keep their place among them.
//
// Note [Deferred observation]: in the PyTorch-allocator mode every allocation and free reaches us as three
// trace entries, under PyTorch's allocator lock, on the thread that allocates. Turning one into records (the
// live-block map, PyTorch's layout, the running figures, the record to the writer) took 226 ns in a tight loop
// and 620 ns inside a real step (GPUMEM_SELF_TIME=1, ResNet-50 on an H100: 1.4 ms of a 31 ms step), its data
// cold every time because PyTorch's own work runs between two entries. So the tracker only queues the entry
// (its time, thread and stack taken there, as before) and this module's thread applies the queue in order,
// about every 5 ms, its data staying warm on its own core.
//
// Order is what a reader relies on, so everything whose place among the events matters goes through the
// same queue: module marks (a forward's BEGIN/END, written before the allocation they bracket), step and phase
// markers, notices, tags and user-metadata labels (record(); each ≤ kMaxPayload bytes). Whatever reads the
// applied state first drains the queue on its own thread: the figures (the sampler's REC_STATS, the control
// channel), a state record (its blocks' stacks and PyTorch's layout), a snapshot, the end of the capture.
// Interned strings and stacks are still written at once: they only need to come before the records that use
// them, which are queued after them. A full queue (kMaxItems, the thread starved) is drained by the thread
// that fills it. Nothing here takes the GIL or any lock above the writer's.
//
// Locks (Note [Lock hierarchy] in README.md): drain lock → queue lock (a swap only); drain lock → whatever
// apply() takes (the observer's device lock → writer buffer). push() takes the queue lock alone, under
// PyTorch's allocator lock; a producer that drains (full queue) takes the drain lock under PyTorch's lock,
// which nothing below ever waits for.
#pragma once
#include <cstdint>

namespace gpumem::rec::sequencer {

// One trace entry as the tracker saw it: when, on which thread, with which stack.
struct Event {
  uint64_t t_ns, addr, size, stream;
  uint32_t stack, thread;
  int32_t device, action;
};

using Apply = void (*)(const Event&);

// Note [Folded frees]: PyTorch's free() writes FREE_REQUESTED and, when the block has no other stream's use to
// wait for, at once FREE_COMPLETED for the same block under the same allocator lock: two of every three trace
// entries of a step come as such a pair. push() folds the second into the queued first (the queue's last item,
// the same thread, device, address, size and stream), with its time as a delta in the first's unused `stack`
// (a free has no stack), so the pair costs the allocating thread one slot; apply() is still called twice, in
// order, with each entry's own time. Anything queued between the two (another thread's entry or record) leaves
// them unfolded.
constexpr int32_t kFreeRequested = 1, kFreeCompleted = 2;  // PyTorch's TraceEntry::Action (observer.h)

constexpr uint32_t kMaxPayload = 48;  // a queued record's payload (MarkerRec 16 B, TagRec 32 B)
constexpr uint32_t kWake = 4096;      // queued items that wake the thread before its 5 ms
constexpr uint32_t kMaxItems = 1u << 17;

// From now on push() queues and the sequencer's thread applies. False if it is already running.
bool start(Apply apply);
bool running();
// Queues one event. False when no sequencer runs (not started, stopped, a fork child): apply it yourself.
bool push(const Event& e);
// A record in its place among the queued events when the sequencer runs and it fits; otherwise the queue is
// drained first and the record goes straight to the writer (pinned records stay pinned: writer::pinned_type).
void record(uint8_t type, uint8_t device, uint16_t flags, const void* payload, uint32_t bytes);
// Note [Probe switches] (c_api.cc): how often the thread drains, and how many queued items wake it early (a probe
// of the workload's step cost sets them; 5 ms and kWake otherwise). 0 leaves one as it is.
void set_cadence(uint32_t period_ms, uint32_t wake_items);
// Applies everything queued so far, on the calling thread, and returns once it is applied.
void drain();
// drain(), then the thread ends; later pushes return false. Idempotent.
void stop();
// In a fork child: the thread is the parent's; nothing queued there is ours to apply.
void forget_after_fork();

struct Counters {
  uint64_t events, records, drains, full_drains, max_depth, folded;  // folded: FREE_COMPLETED entries folded
};
Counters counters();

}  // namespace gpumem::rec::sequencer
