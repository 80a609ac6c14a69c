// device_allocator.h — the caching allocator of one device (PyTorch's DeviceCachingAllocator). What it
// does goes to the EventSink it is given (event_sink.h); it depends on nothing but its Backend.
// Locks: Note [Lock hierarchy] in native/allocator/README.md (mu_ is "the device lock" there).
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "allocator_api.h"
#include "backend.h"
#include "block.h"
#include "event_sink.h"
#include "pytorch_settings.h"
#include "stats.h"

namespace gpumem::core {

struct Options {
  bool expandable = false;  // segments: "expandable" (VA ranges + mapped pages) or "fixed"
  // Note [Trim on growth]: expandable only. Before mapping pages that would lift reserved memory
  // above its peak, unmap just as many whole free pages elsewhere (never the run about to be used),
  // so that the peak follows what tensors need rather than holes left by earlier, differently sized
  // steps. Replaying the GPT-2 varying-length capture (test/bench/allocator/replay.py): peak reserved /
  // peak allocated ×1.036 with 435 page unmaps in 40 steps, against ×1.115 and none without trimming,
  // and ×1.039 with 2,746 unmaps when every trim gave back all free pages.
  //
  // Note [Futile trims]: a trim remaps pages, which costs a step driver calls, and once cost it a stream
  // synchronization (another stream's or pool's pages cannot move: Note [Page moves]), which stalled the CPU until the
  // GPU drained. Trimming that never settles is real: on an H100 (torch 2.11, 2026-11-27) ResNet-50 b64 swapped a
  // 20 MiB large page for 2 MiB small pages and back in most of its first 80 steps (0.48 synchronizations and 1.3
  // driver calls a timed step), and GPT-2 small 16×512 moved 40–1540 MiB of pages in 30 of them; step time ×1.060
  // and ×1.020 against ×1.006 and ×1.006 with GPUMEM_TRIM=0 (bench_allocator.py --only steps, 3 lockstep rounds).
  // Replaying those captures, ResNet-50's peak reserved was the same with or without trimming. So, away from the
  // device's limit: (1) trims on growth only move pages, never synchronize (the OOM ladder still takes other
  // streams' and pools' free pages when memory runs out); (2) trims are budgeted by demand, not by the reserved
  // peak: each time a growth's demand (allocated + the request) is the highest yet, trims_per_demand trims may
  // follow. A varying workload (longer sequences) keeps refilling it; a settled one spends it and stops: its layout
  // then holds without driver calls. (3) Under memory pressure (the growth would take reserved memory above
  // kPressedTenths of the device or its limit), memory matters more than a synchronization, and the rule is the one
  // before: every free page may go, and each reserved peak is defended up to kTrimsPerPressedPeak times. That is
  // what lets the lens policy fit ResNet-50's trace on a 3.1 GiB device where PyTorch's policies fail from
  // fragmentation (test/unit/what-if-addon.test.mjs); without (3) it failed too.
  // (A budget per reserved peak alone refills at every rise of that peak, which a futile trim itself causes once the
  // budget runs out, so it settles only after many rises.) The budget, replaying the H100 GPT-2
  // capture of 80 steps (peak reserved / peak allocated; driver calls after the replay's first tenth, about step 8):
  // 1 ×1.152, 0; 2 ×1.228, 72; 4 ×1.056, 5; 8 ×1.055, 19; 16 ×1.044, 54; 64 ×1.038, 666 (no trims: ×1.1165). Four keeps
  // nearly all the gain and settles before a step benchmark's timed steps begin. The shapes are in test_expandable.cc.
  bool trim_on_growth = false;
  int trims_per_demand = kTrimsPerDemand;
  // Note [PyTorch's settings]: PYTORCH_CUDA_ALLOC_CONF settings of PyTorch 2.11's CUDACachingAllocator that the
  // `pytorch` policies model (the lens allocator leaves them at their defaults, which change nothing):
  //  - max_split_size (max_split_size_mb): a block of this size or more is never split; it serves a request below
  //    max_split_size never, and one at or above it only when the block is less than max_non_split_rounding
  //    (max_non_split_rounding_mb, default kLargeBuffer) larger; before the OOM ladder frees every cached
  //    segment, it frees cached oversize segments of the request's stream, the smallest that covers the request
  //    or else the largest first until they add up to it (release_available_cached_blocks);
  //  - roundup_power2_divisions: a request is rounded up to the next of `divisions` equal steps between the powers of
  //    two around it, by the value of its interval (kRoundupIntervals; index 0 below 2 MiB … 15 from 32 GiB), when
  //    that value is above 1 and the request above 512 B × divisions; else to 512 B as before;
  //  - expandable_fit (PyTorch's best fit among expandable blocks): a free block followed by unmapped pages counts
  //    as large as it could grow, so a request skips the growing end of a segment for the next larger block that
  //    is not at one (get_free_block's expandable_size). The lens's own best fit takes the smallest block.
  // Read from the source (c10/cuda/CUDACachingAllocator.cpp, c10/core/AllocatorConfig.cpp); garbage collection and the
  // cudaMallocAsync backend are not modelled (the reader says so: Note [Settings of the data] in policy_replay.cpp).
  uint64_t max_split_size = kNoMaxSplit;
  uint64_t max_non_split_rounding = kLargeBuffer;
  std::array<uint32_t, kRoundupIntervals> roundup_power2_divisions{};
  bool expandable_fit = false;
};

// Thrown by malloc when memory cannot be found even after the OOM ladder. Derives from
// std::runtime_error so PyTorch surfaces it as RuntimeError with our message.
struct OutOfMemory : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Thrown by restore when the given state cannot be rebuilt (malformed blocks, a segment kind the
// options do not use, more memory than the simulated device has). The message says which and why.
struct RestoreError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class DeviceAllocator {
 public:
  DeviceAllocator(int device, Backend& backend, Options options, EventSink& sink = null_sink());
  ~DeviceAllocator();  // drops bookkeeping only; the driver reclaims memory with the context
  DeviceAllocator(const DeviceAllocator&) = delete;
  DeviceAllocator& operator=(const DeviceAllocator&) = delete;

  // `stack`: an interned stack id taken by the caller BEFORE this call, as it may need the GIL
  // (Note [Lock hierarchy]); the core only passes it on to the sink.
  void* malloc(size_t size, Stream stream, uint32_t stack);
  // Returns false for a pointer this device never handed out (nothing changes then).
  bool free(void* ptr);
  void record_stream(void* ptr, Stream stream);
  void empty_cache(uint64_t* before, uint64_t* after, int origin);
  void set_memory_fraction(double fraction);
  uint64_t limit();  // 0 = no cap
  void begin_allocate_to_pool(PoolId id, std::function<bool(Stream)> filter);
  void end_allocate_to_pool(PoolId id);
  void release_pool(PoolId id);
  // Gives back the cached memory of private pool `id` once it is released, and nothing else (PyTorch's
  // emptyCache(mempool_id), which a MemPool's destructor calls).
  void empty_pool_cache(PoolId id);
  void* base_allocation(void* ptr, size_t* size);
  bool owns(void* ptr);

  // Runs `read` while no driver call of this device is halfway: under the device lock, so a growth's pages
  // are all mapped and counted, or all given back (Note [Settled samples] in device_sampler.cc).
  void settled(const std::function<void()>& read) {
    Lock lock(mu_);
    read();
  }
  DeviceStats stats();
  void reset_peak_stats();
  void reset_accumulated_stats();
  std::vector<SegmentView> segments();
  // Note [Restored state] (restore.cc): rebuilds `segments` (as segments() reports them) in this new,
  // empty allocator on the simulated backend, with this allocator's options; the reserved peak is
  // `reserved_peak` when larger than what the segments hold (trim on growth defends it).
  void restore(const std::vector<SegmentView>& segments, uint64_t reserved_peak = 0);
  // A restored pending free waits for an event recorded on this stream (Note [Restored state]).
  static constexpr Stream kRestoredUseStream = ~Stream(0) - 1;
  const Options& options() const { return options_; }
  // Recomputes every current stat and structural property from the block lists; "" when all hold,
  // else a description of the first violation. Tests call it after every operation.
  std::string check_invariants();
  int device() const { return device_; }

 private:
  using Lock = std::unique_lock<std::mutex>;

  // The block size a request of `requested` bytes takes (Note [PyTorch's settings]: roundup_power2_divisions).
  size_t round(size_t requested) const;
  BlockPool* get_pool(size_t size, Stream stream);
  Block* get_free_block(BlockPool* pool, size_t size, Stream stream);
  // Frees cached oversize segments of `stream` until `size` bytes are free (Note [PyTorch's settings]); false
  // when max_split_size is unset or they do not add up to it.
  bool release_available_cached_blocks(BlockPool* pool, size_t size, Stream stream);
  Block* alloc_segment(BlockPool* pool, size_t size, Stream stream, uint32_t stack, bool retry);
  Block* grow_expandable(BlockPool* pool, size_t size, Stream stream, uint32_t stack, bool retry);
  Segment* expandable_segment(BlockPool* pool, Stream stream, uint32_t stack);
  void map_page(Segment* seg, size_t page_index);
  // Unmaps whole free pages of `seg`: all of them, or (with `budget`) about that many bytes, which it
  // decreases; pages [keep_first, keep_last) stay mapped. With `moving`, the pages are not unmapped
  // but marked kPageMoving and listed there for the caller to move (Note [Page moves]).
  void unmap_free_pages(Segment* seg, int64_t* budget = nullptr, size_t keep_first = 0, size_t keep_last = 0,
                        std::vector<std::pair<Segment*, size_t>>* moving = nullptr);
  // Unmaps the old addresses of moved pages whose event completed (all of them, waiting, if `wait`).
  void finish_page_moves(bool wait);
  void* hand_out(Block* block, size_t size, size_t requested, uint32_t stack);
  void free_block(Block* block);
  Block* merge_free_neighbours(Block* block);
  Block* split(Block* block, size_t offset);
  void insert_events(Block* block);
  void process_events();
  void synchronize_and_free_events();
  void release_cached_blocks();
  void release_pool_blocks(BlockPool* pool);
  void release_segment(Segment* seg);
  void erase_empty_private_pools();
  [[noreturn]] void out_of_memory(Lock& lock, size_t requested, size_t rounded, size_t alloc_size, Stream stream,
                                  uint32_t stack);
  void maybe_emit_stats();
  uint64_t largest_free_block() const;
  bool capturing() const { return !captures_.empty(); }
  void add_stats(Stat* stat, const BlockPool* pool, int64_t delta);
  uint16_t pool_flags(const Segment* seg) const;
  void emit_block(uint8_t type, const Block* b, size_t requested, uint32_t stack);
  void emit_segment(uint8_t type, const Segment* seg, uint64_t addr, size_t size);

  const int device_;
  Backend& backend_;
  const Options options_;
  EventSink& sink_;
  std::mutex mu_;
  DeviceStats stats_;
  BlockPool small_{true, nullptr}, large_{false, nullptr};
  std::map<uint64_t, std::unique_ptr<Segment>> segments_;  // by address
  std::map<std::pair<const BlockPool*, Stream>, Segment*> expandable_;
  std::unordered_map<uint64_t, Block*> active_;   // handed-out blocks by address
  std::vector<std::pair<Event, Block*>> events_;  // outstanding record_stream events, oldest first
  std::vector<Block*> deferred_;                  // freed during a capture; events recorded after it
  std::map<PoolId, std::unique_ptr<PrivatePool>> private_pools_;
  std::vector<std::pair<PoolId, std::function<bool(Stream)>>> captures_;
  double fraction_ = 0;
  uint64_t limit_ = 0;
  const uint64_t total_;  // device total bytes (for the cap and expandable ranges)
  uint64_t last_stats_ns_ = 0;
  // Note [Page moves]: a trim on growth used to synchronize the stream, unmap free pages and map
  // fresh ones (cuMemCreate). When a free page lies in an expandable segment of the growing one's
  // stream and page size, its physical memory is instead mapped at the new address at once
  // (cuMemRetainAllocationHandle + cuMemMap) and its old address unmapped later, once an event
  // recorded on that stream after the move completes. Stream order makes that safe without waiting:
  // every kernel that used the old address was queued on the stream before the move, every kernel
  // using the new one is queued after it (the rule by which any cached block is reused on its
  // stream). Trims choose the same pages as before, so memory figures are unchanged; what goes is
  // the synchronization, which stalled the CPU until the GPU drained (ResNet-50's settling steps),
  // and a cuMemCreate/cuMemRelease per page. Until unmapped, an old address is kPageMoving: neither
  // usable nor mappable (a growth that needs it waits for its event). Moves happen only outside graph
  // capture, and begin_allocate_to_pool finishes them, so none is pending while a capture runs.
  struct Moving {
    Event event;  // recorded on the segment's stream after the move; shared by one trim's pages
    Segment* seg;
    size_t page;
  };
  std::vector<Moving> moving_;  // oldest first (guarded by mu_)
  // Note [Futile trims] (guarded by mu_): the highest demand at a growth so far, and the trims left since it; under
  // memory pressure, the reserved peak being defended and the trims spent on it.
  int64_t trims_demand_ = -1;
  int trims_left_ = 0;
  int64_t trims_peak_ = -1;
  int trims_at_this_peak_ = 0;
  // Note [One clock read per call]: the current malloc/free's timestamp (0 outside one). Guarded by mu_.
  uint64_t call_ns_ = 0;
  struct CallClock {
    CallClock(DeviceAllocator& d, Lock& lock);
    ~CallClock();
    DeviceAllocator& d_;
    Lock& lock_;
  };
  uint64_t event_ns() const;
  bool accumulated_reset_ = false;  // allocated - freed == current holds only until a reset
};

}  // namespace gpumem::core
