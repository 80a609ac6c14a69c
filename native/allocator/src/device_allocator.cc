// device_allocator.cc — caching, splitting, coalescing, record_stream deferral, graph pools and the
// OOM ladder for one device. Structure and accounting follow PyTorch's DeviceCachingAllocator
// (c10/cuda/CUDACachingAllocator.cpp) so that memory_stats() numbers mean the same thing.
#include "device_allocator.h"

#include <algorithm>
#include <cstring>
#include <iterator>

#include "../../format/gpumem_format.h"
#include "clock.h"
#include "oom_message.h"

namespace gpumem::core {

namespace fmt = gpumem::fmt;

namespace {
// A segment of [addr, addr + size) whose one block spans all of it (fixed and expandable segments start so).
std::unique_ptr<Segment> new_segment(BlockPool* pool, uint64_t addr, size_t size, Stream stream, uint32_t stack) {
  auto seg = std::make_unique<Segment>();
  seg->addr = addr;
  seg->size = size;
  seg->stream = stream;
  seg->pool = pool;
  seg->stack = stack;
  Block* b = new Block;
  b->addr = addr;
  b->size = size;
  b->stream = stream;
  b->pool = pool;
  b->segment = seg.get();
  seg->head = b;
  return seg;
}
}  // namespace

DeviceAllocator::DeviceAllocator(int device, Backend& backend, Options options, EventSink& sink)
    : device_(device), backend_(backend), options_(options), sink_(sink), total_(backend.total_memory(device)) {}

DeviceAllocator::~DeviceAllocator() {
  for (auto& s : segments_) {
    Block* b = s.second->head;
    while (b) {
      Block* n = b->next;
      delete b;
      b = n;
    }
  }
}

void DeviceAllocator::add_stats(Stat* stat, const BlockPool* pool, int64_t delta) {
  stat[kAll].increase(delta);
  stat[pool->is_small ? kSmallPool : kLargePool].increase(delta);
}

uint16_t DeviceAllocator::pool_flags(const Segment* seg) const {
  uint16_t f = seg->pool->is_small ? fmt::kPoolSmall : fmt::kPoolLarge;
  if (seg->pool->owner) f |= fmt::kPoolPrivate;
  if (seg->expandable) f |= fmt::kSegExpandable;
  return f;
}

void DeviceAllocator::emit_block(uint8_t type, const Block* b, size_t requested, uint32_t stack) {
  if (!sink_.wants_events()) return;
  fmt::BlockEvent e{event_ns(), b->addr, b->size, requested, b->stream, stack, clock::thread_number()};
  sink_.emit(type, uint8_t(device_), pool_flags(b->segment), &e, sizeof e);
}

void DeviceAllocator::emit_segment(uint8_t type, const Segment* seg, uint64_t addr, size_t size) {
  if (!sink_.wants_events()) return;
  PoolId id = seg->pool->owner ? seg->pool->owner->id : PoolId{};
  fmt::SegmentEvent e{event_ns(), addr, size, seg->stream, id.first, id.second, seg->stack, 0};
  sink_.emit(type, uint8_t(device_), pool_flags(seg), &e, sizeof e);
}

// ---- malloc ----------------------------------------------------------------------------------

// Note [One clock read per call]: the events of one malloc or free (alloc, free requested/completed,
// segment growth, stats) share one timestamp, read once after the lock is taken: three to five
// clock reads per malloc+free pair were a measurable part of recording's cost, and a reader only needs
// them non-decreasing in file order (FORMAT.md), which equal stamps are.
uint64_t DeviceAllocator::event_ns() const { return call_ns_ ? call_ns_ : clock::now_ns(); }

DeviceAllocator::CallClock::CallClock(DeviceAllocator& d, Lock& lock) : d_(d), lock_(lock) {
  d_.call_ns_ = d_.sink_.wants_events() ? clock::now_ns() : 0;
}
// Only while the lock is still ours: out_of_memory() clears it itself before unlocking.
DeviceAllocator::CallClock::~CallClock() {
  if (lock_.owns_lock()) d_.call_ns_ = 0;
}

void* DeviceAllocator::malloc(size_t requested, Stream stream, uint32_t stack) {
  // Note [PyTorch's OOM texts]: PyTorch's own guard, before any rounding (which could overflow). Like
  // PyTorch's it is an argument check: no num_ooms, no OOM record, nothing reserved.
  if (requested >= kOneExaByte) throw OutOfMemory(exabyte_message(device_, requested, total_));
  Lock lock(mu_);
  CallClock clock(*this, lock);
  // Note [Zero-byte requests]: a zero-byte request that reaches the core (a replayed trace, a direct caller) gets a
  // real minimum-size (512 B) block with requested size 0: counted in allocated/reserved like any block, never NULL
  // and never shared. PyTorch's zero-byte tensors never get here: the C API answers them with a null pointer, as
  // PyTorch's own allocator does (Note [Zero-byte tensors] in c_api.cc).
  const size_t size = round(requested);
  if (!capturing()) process_events();
  BlockPool* pool = get_pool(size, stream);
  const size_t alloc_size = allocation_size(size);
  Block* block = get_free_block(pool, size, stream);
  if (!block) block = alloc_segment(pool, size, stream, stack, false);
  // Note [PyTorch's settings]: with max_split_size set, cached oversize segments go before everything else.
  if (!block && release_available_cached_blocks(pool, size, stream))
    block = alloc_segment(pool, size, stream, stack, false);
  // The OOM ladder: wait for pending record_stream events, give every fully free cached segment (and
  // free expandable page) back to the driver, then try once more. Not during a capture: event
  // queries and frees are illegal then (Note [Interaction with CUDA graph capture]).
  if (!block && !capturing()) {
    uint64_t before = uint64_t(stats_.reserved_bytes[kAll].current);
    release_cached_blocks();
    if (sink_.wants_events()) {
      fmt::EmptyCacheRec r{clock::now_ns(), before, uint64_t(stats_.reserved_bytes[kAll].current), 2, 0};
      sink_.emit(fmt::REC_EMPTY_CACHE, uint8_t(device_), 0, &r, sizeof r);
    }
    block = get_free_block(pool, size, stream);  // events that completed may have freed a fit
    if (!block) {
      stats_.num_alloc_retries++;  // counted per retry, successful or not, like PyTorch
      block = alloc_segment(pool, size, stream, stack, true);
    }
  }
  if (!block) out_of_memory(lock, requested, size, alloc_size, stream, stack);
  void* p = hand_out(block, size, requested, stack);
  maybe_emit_stats();
  return p;
}

size_t DeviceAllocator::round(size_t requested) const {
  return pytorch_round(requested, options_.roundup_power2_divisions);
}

BlockPool* DeviceAllocator::get_pool(size_t size, Stream stream) {
  for (auto& c : captures_) {
    if (c.second(stream)) {
      PrivatePool* pp = private_pools_.at(c.first).get();
      return size <= kSmallSize ? &pp->small : &pp->large;
    }
  }
  return size <= kSmallSize ? &small_ : &large_;
}

Block* DeviceAllocator::get_free_block(BlockPool* pool, size_t size, Stream stream) {
  Block key;
  key.stream = stream;
  key.size = size;
  key.addr = 0;
  auto it = pool->blocks.lower_bound(&key);
  if (it == pool->blocks.end() || (*it)->stream != stream) return nullptr;
  if (options_.expandable_fit && (*it)->segment->expandable) {
    // Note [PyTorch's settings]: a block at a segment's growing end counts as large as it could grow.
    auto could_grow_to = [](const Block* b) { return b->size + (b->next && !b->next->mapped ? b->next->size : 0); };
    for (auto next = std::next(it); (*it)->segment->expandable && next != pool->blocks.end() &&
                                    (*next)->stream == stream && could_grow_to(*next) < could_grow_to(*it);)
      it = next++;
  }
  // Note [PyTorch's settings]: an oversize block serves only a request of its kind, and not much smaller.
  const uint64_t max_split = options_.max_split_size;
  if (size < max_split && (*it)->size >= max_split) return nullptr;
  if (size >= max_split && (*it)->size >= size + options_.max_non_split_rounding) return nullptr;
  Block* b = *it;
  pool->blocks.erase(it);
  return b;
}

bool DeviceAllocator::release_available_cached_blocks(BlockPool* pool, size_t size, Stream stream) {
  const uint64_t max_split = options_.max_split_size;
  if (max_split == kNoMaxSplit) return false;
  Block key;
  key.stream = stream;
  key.size = std::max<uint64_t>(size, max_split);
  key.addr = 0;
  auto it = pool->blocks.lower_bound(&key);
  std::vector<Segment*> go;
  uint64_t released = 0;
  if (it != pool->blocks.end() && (*it)->stream == stream && !(*it)->segment->expandable) {
    go.push_back((*it)->segment);  // the smallest oversize block that covers the request
    released = key.size;
  } else if (it != pool->blocks.begin()) {
    // None covers it alone: the largest oversize blocks of the stream, until they add up to it.
    --it;
    while (released < key.size && (*it)->size >= max_split && (*it)->stream == stream) {
      Block* b = *it;
      const bool first = it == pool->blocks.begin();
      if (!first) --it;
      if (!b->segment->expandable) go.push_back(b->segment), released += b->size;
      if (first) break;
    }
  }
  // Oversize blocks are whole segments (they are never split); a split one is left alone.
  for (Segment* seg : go)
    if (!seg->head->is_split()) release_segment(seg);
  return !go.empty() && released >= key.size;
}

Block* DeviceAllocator::alloc_segment(BlockPool* pool, size_t size, Stream stream, uint32_t stack, bool retry) {
  if (options_.expandable) return grow_expandable(pool, size, stream, stack, retry);
  const size_t alloc_size = allocation_size(size);
  if (limit_ && uint64_t(stats_.reserved_bytes[kAll].current) + alloc_size > limit_) return nullptr;
  uint64_t addr = 0;
  if (!backend_.malloc(device_, alloc_size, capturing(), &addr)) return nullptr;
  auto seg = new_segment(pool, addr, alloc_size, stream, stack);
  Block* b = seg->head;
  add_stats(stats_.segment, pool, 1);
  add_stats(stats_.reserved_bytes, pool, int64_t(alloc_size));
  stats_.num_device_alloc++;
  emit_segment(fmt::REC_SEGMENT_ALLOC, seg.get(), addr, alloc_size);
  segments_[addr] = std::move(seg);
  return b;
}

// Splits `block` at `offset`; the new tail block follows it in the chain and shares its state.
Block* DeviceAllocator::split(Block* block, size_t offset) {
  Block* tail = new Block;
  tail->addr = block->addr + offset;
  tail->size = block->size - offset;
  tail->stream = block->stream;
  tail->pool = block->pool;
  tail->segment = block->segment;
  tail->mapped = block->mapped;
  tail->prev = block;
  tail->next = block->next;
  if (block->next) block->next->prev = tail;
  block->next = tail;
  block->size = offset;
  return tail;
}

void* DeviceAllocator::hand_out(Block* block, size_t size, size_t requested, uint32_t stack) {
  const bool expandable = block->segment->expandable;
  const bool already_split = block->is_split();
  const size_t remaining = block->size - size;
  // PyTorch's should_split: small pool and expandable blocks split off any usable remainder; large
  // blocks only a remainder above 1 MiB (smaller ones are not worth the fragmentation), and never for a
  // request of max_split_size or more (Note [PyTorch's settings]).
  const bool should_split = (block->pool->is_small || expandable)
                                ? remaining >= kMinBlockSize
                                : size < options_.max_split_size && remaining > kSmallSize;
  if (should_split) {
    Block* rest = split(block, size);
    block->pool->blocks.insert(rest);
    if (!expandable) {
      if (already_split) {
        add_stats(stats_.inactive_split_bytes, block->pool, -int64_t(block->size));
      } else {
        add_stats(stats_.inactive_split_bytes, block->pool, int64_t(rest->size));
        add_stats(stats_.inactive_split, block->pool, 1);
      }
    }
  } else if (already_split && !expandable) {
    add_stats(stats_.inactive_split_bytes, block->pool, -int64_t(block->size));
    add_stats(stats_.inactive_split, block->pool, -1);
  }
  block->allocated = true;
  block->requested = requested;
  block->stack = stack;
  active_[block->addr] = block;
  add_stats(stats_.allocation, block->pool, 1);
  add_stats(stats_.allocated_bytes, block->pool, int64_t(block->size));
  add_stats(stats_.active, block->pool, 1);
  add_stats(stats_.active_bytes, block->pool, int64_t(block->size));
  add_stats(stats_.requested_bytes, block->pool, int64_t(requested));
  emit_block(fmt::REC_ALLOC, block, requested, stack);
  return reinterpret_cast<void*>(block->addr);
}

// ---- free --------------------------------------------------------------------------------------

bool DeviceAllocator::free(void* ptr) {
  Lock lock(mu_);
  CallClock clock(*this, lock);
  auto it = active_.find(reinterpret_cast<uint64_t>(ptr));
  if (it == active_.end()) return false;
  Block* b = it->second;
  active_.erase(it);
  b->allocated = false;
  add_stats(stats_.allocation, b->pool, -1);
  add_stats(stats_.allocated_bytes, b->pool, -int64_t(b->size));
  emit_block(fmt::REC_FREE_REQUESTED, b, b->requested, 0);
  if (!b->stream_uses.empty()) {
    // Other streams may still use the memory: reuse waits until events recorded on them complete
    // (checked at later mallocs, empty_cache and the OOM ladder).
    b->pending_free = true;
    if (capturing())
      deferred_.push_back(b);  // no event calls during a capture; recorded once it ends
    else
      insert_events(b);
  } else {
    free_block(b);
  }
  maybe_emit_stats();
  return true;
}

void DeviceAllocator::insert_events(Block* b) {
  for (Stream s : b->stream_uses) {
    events_.emplace_back(backend_.record_event(device_, s), b);
    b->event_count++;
  }
  b->stream_uses.clear();
}

// Merges free neighbours with the same mapping into one block. The lower-address block survives so
// that callers holding the first block of a run keep a valid pointer.
Block* DeviceAllocator::merge_free_neighbours(Block* b) {
  auto mergeable = [&](Block* n) { return n && n->is_free() && n->mapped == b->mapped; };
  if (mergeable(b->prev)) {
    Block* p = b->prev;
    if (p->mapped) p->pool->blocks.erase(p);
    p->size += b->size;
    p->next = b->next;
    if (b->next) b->next->prev = p;
    delete b;
    b = p;
  }
  if (mergeable(b->next)) {
    Block* n = b->next;
    if (n->mapped) n->pool->blocks.erase(n);
    b->size += n->size;
    b->next = n->next;
    if (n->next) n->next->prev = b;
    delete n;
  }
  return b;
}

void DeviceAllocator::free_block(Block* block) {
  const size_t original_size = block->size;
  const size_t requested = block->requested;
  const bool expandable = block->segment->expandable;
  BlockPool* pool = block->pool;
  // Record the completion with the block as it was handed out, before merging changes it.
  emit_block(fmt::REC_FREE_COMPLETED, block, requested, 0);
  block->pending_free = false;
  block->requested = 0;
  int64_t net_blocks = 0, net_bytes = 0;
  for (Block* n : {block->prev, block->next}) {
    if (n && n->is_free() && n->mapped == block->mapped) {
      net_blocks -= 1;
      net_bytes -= int64_t(n->size);
    }
  }
  block = merge_free_neighbours(block);
  pool->blocks.insert(block);
  if (block->is_split()) {
    net_blocks += 1;
    net_bytes += int64_t(block->size);
  }
  // Like PyTorch, inactive_split excludes expandable segments: their free pages can always be
  // released, so "not releasable" does not apply.
  if (!expandable) {
    add_stats(stats_.inactive_split, pool, net_blocks);
    add_stats(stats_.inactive_split_bytes, pool, net_bytes);
  }
  add_stats(stats_.active, pool, -1);
  add_stats(stats_.active_bytes, pool, -int64_t(original_size));
  add_stats(stats_.requested_bytes, pool, -int64_t(requested));
}

void DeviceAllocator::record_stream(void* ptr, Stream stream) {
  Lock lock(mu_);
  auto it = active_.find(reinterpret_cast<uint64_t>(ptr));
  if (it == active_.end()) return;  // not ours or already freed: nothing to protect
  Block* b = it->second;
  if (stream == b->stream) return;  // the owning stream is ordered with itself
  if (std::find(b->stream_uses.begin(), b->stream_uses.end(), stream) == b->stream_uses.end())
    b->stream_uses.push_back(stream);
}

// ---- events ------------------------------------------------------------------------------------

void DeviceAllocator::process_events() {
  if (!moving_.empty()) finish_page_moves(false);
  if (!deferred_.empty()) {
    for (Block* b : deferred_) insert_events(b);
    deferred_.clear();
  }
  if (events_.empty()) return;
  size_t kept = 0;
  for (size_t i = 0; i < events_.size(); i++) {
    auto [e, b] = events_[i];
    if (!backend_.query_event(device_, e)) {
      events_[kept++] = events_[i];
      continue;
    }
    backend_.destroy_event(device_, e);
    if (--b->event_count == 0) free_block(b);
  }
  events_.resize(kept);
}

void DeviceAllocator::synchronize_and_free_events() {
  stats_.num_sync_all_streams++;
  if (!deferred_.empty()) {
    for (Block* b : deferred_) insert_events(b);
    deferred_.clear();
  }
  for (auto [e, b] : events_) {
    backend_.synchronize_event(device_, e);
    backend_.destroy_event(device_, e);
    if (--b->event_count == 0) free_block(b);
  }
  events_.clear();
}

// ---- releasing memory ----------------------------------------------------------------------------

void DeviceAllocator::release_segment(Segment* seg) {
  BlockPool* pool = seg->pool;
  Block* b = seg->head;
  pool->blocks.erase(b);
  backend_.free(device_, seg->addr);
  add_stats(stats_.segment, pool, -1);
  add_stats(stats_.reserved_bytes, pool, -int64_t(seg->size));
  stats_.num_device_free++;
  emit_segment(fmt::REC_SEGMENT_FREE, seg, seg->addr, seg->size);
  delete b;
  segments_.erase(seg->addr);
}

void DeviceAllocator::release_pool_blocks(BlockPool* pool) {
  if (options_.expandable) {
    for (auto& [key, seg] : expandable_)
      if (key.first == pool) unmap_free_pages(seg);
    return;
  }
  std::vector<Segment*> whole;
  for (Block* b : pool->blocks)
    if (!b->is_split()) whole.push_back(b->segment);
  for (Segment* s : whole) release_segment(s);
}

void DeviceAllocator::release_cached_blocks() {
  synchronize_and_free_events();
  finish_page_moves(true);  // old addresses hold no memory of their own, but nothing may linger
  release_pool_blocks(&small_);
  release_pool_blocks(&large_);
  for (auto& [id, pp] : private_pools_) {
    if (!pp->freeable) continue;
    release_pool_blocks(&pp->small);
    release_pool_blocks(&pp->large);
  }
  erase_empty_private_pools();
}

void DeviceAllocator::erase_empty_private_pools() {
  for (auto it = private_pools_.begin(); it != private_pools_.end();) {
    PrivatePool* pp = it->second.get();
    bool in_capture = std::any_of(captures_.begin(), captures_.end(), [&](auto& c) { return c.first == pp->id; });
    bool empty = pp->freeable && !in_capture;
    for (auto& [addr, seg] : segments_)
      if (seg->pool->owner == pp && (!seg->expandable || seg->mapped_bytes > 0)) empty = false;
    if (!empty) {
      ++it;
      continue;
    }
    // Only fully unmapped expandable ranges remain: give their address space back too.
    for (auto s = segments_.begin(); s != segments_.end();) {
      Segment* seg = s->second.get();
      if (seg->pool->owner != pp) {
        ++s;
        continue;
      }
      expandable_.erase({seg->pool, seg->stream});
      backend_.free_address(device_, seg->addr, seg->size);
      delete seg->head;
      s = segments_.erase(s);
    }
    it = private_pools_.erase(it);
  }
}

void DeviceAllocator::empty_cache(uint64_t* before, uint64_t* after, int origin) {
  Lock lock(mu_);
  uint64_t b = uint64_t(stats_.reserved_bytes[kAll].current);
  // During a capture no memory may go back to the driver; the request becomes a no-op.
  if (!capturing()) release_cached_blocks();
  uint64_t a = uint64_t(stats_.reserved_bytes[kAll].current);
  if (before) *before = b;
  if (after) *after = a;
  if (sink_.wants_events()) {
    fmt::EmptyCacheRec r{clock::now_ns(), b, a, uint32_t(origin), 0};
    sink_.emit(fmt::REC_EMPTY_CACHE, uint8_t(device_), 0, &r, sizeof r);
  }
  maybe_emit_stats();
}

void DeviceAllocator::set_memory_fraction(double fraction) {
  Lock lock(mu_);
  fraction_ = fraction;
  limit_ = fraction >= 1.0 || fraction <= 0 ? (fraction >= 1.0 ? total_ : 0) : uint64_t(fraction * double(total_));
}

uint64_t DeviceAllocator::limit() {
  Lock lock(mu_);
  return limit_;
}

// ---- graph pools -----------------------------------------------------------------------------------

void DeviceAllocator::begin_allocate_to_pool(PoolId id, std::function<bool(Stream)> filter) {
  Lock lock(mu_);
  // Note [Page moves]: none may be pending during a capture (no event calls or unmaps then).
  // PyTorch calls this before cudaStreamBeginCapture; with a capture already underway there are
  // none (trims stop while one runs).
  if (!capturing()) finish_page_moves(true);
  auto it = private_pools_.find(id);
  if (it == private_pools_.end())
    private_pools_.emplace(id, std::make_unique<PrivatePool>(id));
  else
    it->second->use_count++, it->second->freeable = false;
  captures_.emplace_back(id, std::move(filter));
}

void DeviceAllocator::end_allocate_to_pool(PoolId id) {
  Lock lock(mu_);
  for (auto it = captures_.begin(); it != captures_.end(); ++it) {
    if (it->first == id) {
      captures_.erase(it);
      return;
    }
  }
}

void DeviceAllocator::release_pool(PoolId id) {
  Lock lock(mu_);
  auto it = private_pools_.find(id);
  if (it == private_pools_.end()) return;
  PrivatePool* pp = it->second.get();
  if (--pp->use_count > 0) return;
  // Like PyTorch, the pool's cached memory goes back to the driver at the next empty_cache or OOM
  // ladder; blocks still held by tensors stay valid until they are freed.
  pp->freeable = true;
}

void DeviceAllocator::empty_pool_cache(PoolId id) {
  Lock lock(mu_);
  auto it = private_pools_.find(id);
  if (it == private_pools_.end() || !it->second->freeable || capturing()) return;
  synchronize_and_free_events();
  release_pool_blocks(&it->second->small);
  release_pool_blocks(&it->second->large);
  erase_empty_private_pools();
}

// ---- expandable segments ---------------------------------------------------------------------------

Segment* DeviceAllocator::expandable_segment(BlockPool* pool, Stream stream, uint32_t stack) {
  auto it = expandable_.find({pool, stream});
  if (it != expandable_.end()) return it->second;
  const size_t page = pool->is_small ? kSmallPage : kLargePage;
  // Note [Expandable reservation]: one VA range per (pool, stream), reserved once and kept for the
  // process's life (VA is cheap; only mapped pages count as reserved memory), of
  // kExpandableRangeFactor (4) × the device's memory, rounded up to whole pages. A growth needs one
  // run of free address space (free blocks and unmapped pages) after the live tensors that bound it;
  // with a range only as large as the device, holes left between live tensors used up the range
  // long before the memory: replaying a real GPT-2 capture at 16 GiB, the lens policy failed a
  // 1.53 GiB request with 4.43 GiB free (test_what_if.cc:
  // expandable_range_outlasts_holes_between_live_tensors). PyTorch reserves 1.125 × and opens
  // another segment when one runs out; we keep one segment per (pool, stream) and a larger range.
  // Should the driver refuse that much address space, one device's worth is tried as before.
  size_t size = 0;
  uint64_t addr = 0;
  bool reserved = false;
  for (uint64_t factor : {kExpandableRangeFactor, uint64_t(1)}) {
    size = std::max<size_t>(page, (factor * total_ + page - 1) / page * page);
    // Alignment must be a power of two (cuMemAddressReserve rejects 20 MiB); 2 MiB is the granularity.
    if ((reserved = backend_.reserve_address(device_, size, kSmallPage, &addr))) break;
  }
  if (!reserved) return nullptr;
  auto seg = new_segment(pool, addr, size, stream, stack);
  seg->expandable = true;
  seg->page = page;
  seg->mapped.assign(size / page, 0);
  seg->head->mapped = false;  // the whole range starts as one unmapped block
  Segment* raw = seg.get();
  segments_[addr] = std::move(seg);
  expandable_[{pool, stream}] = raw;
  return raw;
}

// Marks one page (already mapped by the backend) as mapped: the unmapped block holding it is split
// around it and the page joins its free mapped neighbours.
void DeviceAllocator::map_page(Segment* seg, size_t index) {
  const uint64_t lo = seg->addr + index * seg->page, hi = lo + seg->page;
  Block* b = seg->head;
  while (b->end() <= lo) b = b->next;
  if (b->addr < lo) b = split(b, lo - b->addr);
  if (b->end() > hi) split(b, hi - b->addr);
  b->mapped = true;
  b = merge_free_neighbours(b);
  b->pool->blocks.insert(b);
  const bool left = index > 0 && seg->mapped[index - 1] == kPageMapped;
  const bool right = index + 1 < seg->mapped.size() && seg->mapped[index + 1] == kPageMapped;
  seg->mapped[index] = kPageMapped;
  seg->mapped_bytes += seg->page;
  // Note [Segment stat]: PyTorch's expandable-segment bookkeeping never counts segments (its
  // test_graph_memory_stats_… expects segment.*.current unchanged by a graph's expandable memory), so
  // the `segment` stat counts fixed segments only; segments() and snapshots still list each contiguous
  // mapped run as a segment, as PyTorch's snapshot does.
  (void)left, (void)right;
  add_stats(stats_.reserved_bytes, seg->pool, int64_t(seg->page));
  stats_.num_device_alloc++;
}

Block* DeviceAllocator::grow_expandable(BlockPool* pool, size_t size, Stream stream, uint32_t stack, bool retry) {
  Segment* seg = expandable_segment(pool, stream, stack);
  if (!seg) return nullptr;
  // The lowest run of free address space (free mapped blocks and unmapped pages) that fits.
  Block* start = nullptr;
  size_t run = 0;
  for (Block* b = seg->head; b; b = b->next) {
    if (!b->is_free()) {
      start = nullptr;
      continue;
    }
    if (!start) start = b, run = 0;
    run += b->size;
    if (run >= size) break;
  }
  if (!start || run < size) return nullptr;
  const uint64_t lo = start->addr, hi = lo + size;
  const size_t first = (lo - seg->addr) / seg->page, last = (hi - seg->addr + seg->page - 1) / seg->page;
  std::vector<size_t> pages;
  bool blocked = false;
  for (size_t i = first; i < last; i++) {
    if (seg->mapped[i] != kPageMapped) pages.push_back(i);
    blocked |= seg->mapped[i] == kPageMoving;
  }
  if (blocked) {
    // The old address of a moved page must be unmapped before it can map again (Note [Page moves];
    // none is pending during a capture).
    if (capturing()) return nullptr;
    finish_page_moves(true);
  }
  // Note [Futile trims]: away from the device's limit, trims only move pages and a budget refilled by new highs of
  // demand bounds them; near it (memory pressure), memory matters more than a synchronization: other streams' and
  // pools' pages may go too, and each reserved peak is defended up to kTrimsPerPressedPeak times.
  const int64_t demand = stats_.allocated_bytes[kAll].current + int64_t(size);
  if (demand > trims_demand_) trims_demand_ = demand, trims_left_ = options_.trims_per_demand;
  const int64_t reserved_peak = stats_.reserved_bytes[kAll].peak;
  if (reserved_peak != trims_peak_) trims_peak_ = reserved_peak, trims_at_this_peak_ = 0;
  const uint64_t capacity = limit_ ? limit_ : total_;
  const uint64_t grown = uint64_t(stats_.reserved_bytes[kAll].current) + pages.size() * seg->page;
  const bool pressed = capacity > 0 && grown > capacity / 10 * kPressedTenths;
  int64_t over = int64_t(grown) - reserved_peak;
  std::vector<std::pair<Segment*, size_t>> moved;  // Note [Page moves]: pages to map here instead
  const bool may_trim = pressed ? trims_at_this_peak_ < kTrimsPerPressedPeak : trims_left_ > 0;
  if (options_.trim_on_growth && !capturing() && over > 0 && may_trim) {
    // Note [Trim on growth]: give back just enough free pages elsewhere that this growth does not
    // raise the reserved peak (never the pages about to be mapped). Graph-private pools keep their
    // pages until released: a replay reuses blocks freed in capture. Pages that can move first (same stream, same
    // page size: Note [Page moves]); others, which cost a stream synchronization, only under pressure.
    const int64_t unmaps = stats_.num_device_free;
    for (const bool movable_pass : {true, false}) {
      if (!movable_pass && !pressed) break;
      for (auto& [key, other] : expandable_) {
        if (over <= 0) break;
        if (key.first->owner && !key.first->owner->freeable) continue;
        const bool movable = other->stream == seg->stream && other->page == seg->page;
        if (movable != movable_pass) continue;
        unmap_free_pages(other, &over, other == seg ? first : 0, other == seg ? last : 0, movable ? &moved : nullptr);
      }
    }
    if (pressed)
      trims_at_this_peak_++;
    else if (stats_.num_device_free > unmaps)
      trims_left_--;
  }
  size_t k = 0;
  if (!limit_ || uint64_t(stats_.reserved_bytes[kAll].current) + pages.size() * seg->page <= limit_) {
    for (; k < pages.size(); k++) {
      const uint64_t to = seg->addr + pages[k] * seg->page;
      const bool ok = k < moved.size()
                          ? backend_.remap_page(device_, moved[k].first->addr + moved[k].second * seg->page, to,
                                                seg->page, seg->stream)
                          : backend_.map_page(device_, to, seg->page, capturing());
      if (!ok) break;
      if (k < moved.size()) stats_.num_page_moves++;
    }
  }
  if (!moved.empty()) {  // the old addresses go once the stream has passed this point
    const Event e = backend_.record_event(device_, seg->stream);
    for (auto& [other, i] : moved) moving_.push_back({e, other, i});
  }
  if (k < pages.size()) {
    // Roll back this attempt's pages. No kernel can use them yet; the synchronization only keeps
    // the rule "every unmap follows a synchronize" without exceptions (this is the OOM path).
    if (k > 0 && !capturing()) backend_.synchronize_stream(device_, seg->stream);
    for (size_t j = 0; j < k; j++) backend_.unmap_page(device_, seg->addr + pages[j] * seg->page, seg->page);
    return nullptr;
  }
  for (size_t i : pages) map_page(seg, i);
  for (size_t k = 0; k < pages.size();) {  // one record per contiguous run of new pages
    size_t j = k + 1;
    while (j < pages.size() && pages[j] == pages[j - 1] + 1) j++;
    emit_segment(fmt::REC_SEGMENT_MAP, seg, seg->addr + pages[k] * seg->page, (j - k) * seg->page);
    k = j;
  }
  // [lo, hi) is now free and mapped, hence (free neighbours being merged) inside one block.
  Block* b = seg->head;
  while (b->end() <= lo) b = b->next;
  pool->blocks.erase(b);
  if (b->addr < lo) {  // cannot happen (start began a free run) but keeps the block exact if it did
    Block* t = split(b, lo - b->addr);
    pool->blocks.insert(b);
    b = t;
  }
  return b;
}

// Gives back every whole page covered only by free blocks (empty_cache, OOM ladder).
void DeviceAllocator::unmap_free_pages(Segment* seg, int64_t* budget, size_t keep_first, size_t keep_last,
                                       std::vector<std::pair<Segment*, size_t>>* moving) {
  const uint64_t page = seg->page;
  bool synced = false;
  for (Block* b = seg->head; b;) {
    if (!b->mapped || !b->is_free()) {
      b = b->next;
      continue;
    }
    uint64_t lo = seg->addr + (b->addr - seg->addr + page - 1) / page * page;
    uint64_t hi = seg->addr + (b->end() - seg->addr) / page * page;
    // Pages [keep_first, keep_last) stay mapped (the run of pages a growth is about to use).
    const uint64_t keep_lo = seg->addr + keep_first * page, keep_hi = seg->addr + keep_last * page;
    if (keep_lo < keep_hi && lo < keep_hi && hi > keep_lo) {
      if (lo >= keep_lo)
        lo = std::max(lo, keep_hi);
      else
        hi = keep_lo;
    }
    if (budget) {
      if (*budget <= 0) return;
      hi = std::min<uint64_t>(hi, lo + (uint64_t(*budget) + page - 1) / page * page);
    }
    if (lo >= hi) {
      b = b->next;
      continue;
    }
    if (budget) *budget -= int64_t(hi - lo);
    if (!synced && !moving) {
      // A free block may still be read or written by kernels queued on its stream before the free;
      // cuMemUnmap, unlike cuMemFree, does not wait for them.
      backend_.synchronize_stream(device_, seg->stream);
      synced = true;
      if (budget) stats_.num_trim_syncs++;
    }
    b->pool->blocks.erase(b);
    Block* mid = b;
    if (b->addr < lo) {
      mid = split(b, lo - b->addr);
      b->pool->blocks.insert(b);
    }
    if (mid->end() > hi) {
      Block* tail = split(mid, hi - mid->addr);
      tail->pool->blocks.insert(tail);
    }
    for (uint64_t a = lo; a < hi; a += page) {
      const size_t i = (a - seg->addr) / page;
      if (moving) {
        seg->mapped[i] = kPageMoving;
        moving->emplace_back(seg, i);
      } else {
        backend_.unmap_page(device_, a, page);
        seg->mapped[i] = kPageUnmapped;
      }
      seg->mapped_bytes -= page;
      const bool left = i > 0 && seg->mapped[i - 1] == kPageMapped;
      const bool right = i + 1 < seg->mapped.size() && seg->mapped[i + 1] == kPageMapped;
      (void)left, (void)right;  // Note [Segment stat]: mapped runs are not counted
      add_stats(stats_.reserved_bytes, seg->pool, -int64_t(page));
      stats_.num_device_free++;
    }
    emit_segment(fmt::REC_SEGMENT_UNMAP, seg, lo, hi - lo);
    mid->mapped = false;
    mid = merge_free_neighbours(mid);
    b = mid->next;
  }
}

// Note [Page moves]: moves are queued in the order their events were recorded.
void DeviceAllocator::finish_page_moves(bool wait) {
  size_t done = 0;
  while (done < moving_.size()) {
    const Event e = moving_[done].event;
    if (wait)
      backend_.synchronize_event(device_, e);
    else if (!backend_.query_event(device_, e))
      break;  // later moves were recorded after it
    for (; done < moving_.size() && moving_[done].event == e; done++) {
      Segment* seg = moving_[done].seg;
      const size_t i = moving_[done].page;
      backend_.unmap_page(device_, seg->addr + i * seg->page, seg->page);
      seg->mapped[i] = kPageUnmapped;
    }
    backend_.destroy_event(device_, e);
  }
  moving_.erase(moving_.begin(), moving_.begin() + ptrdiff_t(done));
}

// ---- OOM -----------------------------------------------------------------------------------------------

uint64_t DeviceAllocator::largest_free_block() const {
  uint64_t m = 0;
  for (const BlockPool* p : {&small_, &large_})
    for (Block* b : p->blocks) m = std::max<uint64_t>(m, b->size);
  for (auto& [id, pp] : private_pools_)
    for (const BlockPool* p : {&pp->small, &pp->large})
      for (Block* b : p->blocks) m = std::max<uint64_t>(m, b->size);
  return m;
}

void DeviceAllocator::out_of_memory(Lock& lock, size_t requested, size_t rounded, size_t alloc_size, Stream stream,
                                    uint32_t stack) {
  stats_.num_ooms++;
  OomFacts f;
  f.device = device_;
  f.requested = requested;
  f.rounded = rounded;
  f.alloc_size = options_.expandable ? rounded : alloc_size;
  f.reserved = uint64_t(stats_.reserved_bytes[kAll].current);
  f.allocated = uint64_t(stats_.allocated_bytes[kAll].current);
  f.largest_free = largest_free_block();
  f.limit = limit_;
  f.fraction = limit_ ? fraction_ : 1.0;
  f.capturing = capturing();
  f.expandable = options_.expandable;
  f.device_known = backend_.mem_get_info(device_, &f.device_free, &f.device_total);
  if (sink_.wants_events()) {
    fmt::OomRec r{clock::now_ns(), requested, f.device_free, f.device_total, f.reserved, f.allocated,
                  f.largest_free,  stream,    f.limit,       stack,          0};
    sink_.emit(fmt::REC_OOM, uint8_t(device_), 0, &r, sizeof r);
  }
  std::string msg = oom_message(f);
  call_ns_ = 0;  // Note [One clock read per call]: the next holder of the lock starts its own
  lock.unlock();
  // The state at the failure follows the OOM record: the sink may read the allocator (taking the device
  // lock itself); another thread may slip an event in between, which the capture shows in order.
  sink_.after_oom(device_);
  throw OutOfMemory(msg);
}

void DeviceAllocator::maybe_emit_stats() {
  if (!sink_.wants_events()) return;
  // REC_STATS at most every 50 ms of allocator activity: enough for a live status bar, negligible
  // next to the per-event records.
  const uint64_t now = event_ns();
  if (now - last_stats_ns_ < 50'000'000) return;
  last_stats_ns_ = now;
  fmt::StatsRec r{now,
                  uint64_t(stats_.allocated_bytes[kAll].current),
                  uint64_t(stats_.reserved_bytes[kAll].current),
                  uint64_t(stats_.active_bytes[kAll].current),
                  uint64_t(stats_.requested_bytes[kAll].current),
                  uint64_t(stats_.allocated_bytes[kAll].peak),
                  uint64_t(stats_.reserved_bytes[kAll].peak),
                  uint64_t(stats_.num_ooms),
                  uint64_t(stats_.num_alloc_retries)};
  sink_.emit(fmt::REC_STATS, uint8_t(device_), 0, &r, sizeof r);
}

// ---- queries ---------------------------------------------------------------------------------------

void* DeviceAllocator::base_allocation(void* ptr, size_t* size) {
  Lock lock(mu_);
  auto it = active_.find(reinterpret_cast<uint64_t>(ptr));
  if (it == active_.end()) return ptr;
  const Block* b = it->second;
  if (b->segment->expandable) {  // a mapped run has no fixed base: the block is its own base
    if (size) *size = b->size;
    return ptr;
  }
  if (size) *size = b->segment->size;
  return reinterpret_cast<void*>(b->segment->addr);
}

bool DeviceAllocator::owns(void* ptr) {
  Lock lock(mu_);
  return active_.count(reinterpret_cast<uint64_t>(ptr)) != 0;
}

DeviceStats DeviceAllocator::stats() {
  Lock lock(mu_);
  return stats_;
}
void DeviceAllocator::reset_peak_stats() {
  Lock lock(mu_);
  stats_.reset_peak();
}
void DeviceAllocator::reset_accumulated_stats() {
  Lock lock(mu_);
  stats_.reset_accumulated();
  accumulated_reset_ = true;
}

std::vector<SegmentView> DeviceAllocator::segments() {
  Lock lock(mu_);
  std::vector<SegmentView> out;
  for (auto& entry : segments_) {
    auto& seg = entry.second;  // not a structured binding: C++17 lambdas cannot capture those (clang)
    PoolId id = seg->pool->owner ? seg->pool->owner->id : PoolId{};
    auto view_of = [&](uint64_t a) {
      SegmentView v;
      v.device = device_;
      v.addr = a;
      v.size = 0;
      v.stream = seg->stream;
      v.pool0 = id.first;
      v.pool1 = id.second;
      v.stack = seg->stack;
      v.flags = pool_flags(seg.get());
      return v;
    };
    auto state_of = [](const Block* b) -> uint8_t {
      if (b->allocated) return fmt::BLOCK_ACTIVE_ALLOCATED;
      if (b->pending_free) return fmt::BLOCK_ACTIVE_PENDING_FREE;
      return fmt::BLOCK_INACTIVE;
    };
    if (!seg->expandable) {
      SegmentView v = view_of(seg->addr);
      v.size = seg->size;
      for (Block* b = seg->head; b; b = b->next)
        v.blocks.push_back({b->addr, b->size, b->requested, b->stack, state_of(b)});
      out.push_back(std::move(v));
      continue;
    }
    // Expandable: each contiguous mapped run is one segment, as PyTorch's snapshot shows them.
    SegmentView* cur = nullptr;
    for (Block* b = seg->head; b; b = b->next) {
      if (!b->mapped) {
        cur = nullptr;
        continue;
      }
      if (!cur) {
        out.push_back(view_of(b->addr));
        cur = &out.back();
      }
      cur->size += b->size;
      cur->blocks.push_back({b->addr, b->size, b->requested, b->stack, state_of(b)});
    }
  }
  return out;
}

}  // namespace gpumem::core
