// restore.cc — DeviceAllocator::restore: an allocator state recorded elsewhere, rebuilt on the
// simulated device so that its own policy can be asked what it would do next (Note [What-if]).
//
// Note [Restored state]: what is and is not reproduced.
//  Reproduced exactly (restore(segments()) == segments(), test_what_if.cc):
//   - every segment at its address, stream, pool (small, large, graph-private by pool id) and stack;
//   - every block: address, size, state (allocated, pending free, free), requested bytes, stack;
//   - expandable segments as their mapped runs (what segments() and PyTorch's snapshot show);
//   - the statistics the policy reads: reserved/allocated/active/requested bytes, segment and
//     inactive-split counts, and the reserved peak when given (trim on growth defends it).
//  Not reproduced (not in a snapshot), and what is assumed instead:
//   - expandable reservations: one per (pool, stream), starting at its lowest mapped run and
//     kExpandableRangeFactor × capacity long (shorter where another segment begins), so address
//     space below the lowest run that the original may have had is not there. Runs of one (pool,
//     stream) that are not whole pages apart (PyTorch opens a second reservation when one is full)
//     cannot share one reservation: RestoreError;
//   - timing: a pending free waits for one event on a stream of its own that completes only when the
//     allocator waits for it (empty_cache, the OOM ladder), as if the other stream were still busy;
//     the streams that used it (record_stream) are not known;
//   - graph-private pools are in use (use count 1, not freeable) and no capture is underway;
//   - counters of past events (retries, driver calls, trims at this peak) start at zero;
//   - page moves in flight (Note [Page moves]) are over: moving pages count as unmapped.
#include <algorithm>
#include <map>
#include <string>

#include "../../format/gpumem_format.h"
#include "device_allocator.h"
#include "oom_message.h"
#include "sim_backend.h"

namespace gpumem::core {

namespace fmt = gpumem::fmt;

namespace {
std::string hex(uint64_t a) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(a));
  return b;
}

void check_blocks(const SegmentView& v) {
  if (v.size == 0 || v.blocks.empty()) throw RestoreError("segment " + hex(v.addr) + " has no blocks");
  uint64_t at = v.addr;
  for (const BlockView& b : v.blocks) {
    if (b.addr != at || b.size == 0)
      throw RestoreError("segment " + hex(v.addr) + ": its blocks do not cover it contiguously (block at " +
                         hex(b.addr) + ", expected " + hex(at) + ")");
    if (b.addr % kMinBlockSize || b.size % kMinBlockSize)
      throw RestoreError("segment " + hex(v.addr) + ": block " + hex(b.addr) + " is not 512-byte aligned");
    if (b.state > fmt::BLOCK_ACTIVE_PENDING_FREE)
      throw RestoreError("segment " + hex(v.addr) + ": block " + hex(b.addr) + " has an unknown state");
    at += b.size;
  }
  if (at != v.addr + v.size) throw RestoreError("segment " + hex(v.addr) + ": its blocks do not add up to its size");
}
}  // namespace

void DeviceAllocator::restore(const std::vector<SegmentView>& views, uint64_t reserved_peak) {
  Lock lock(mu_);
  auto* sim = dynamic_cast<SimBackend*>(&backend_);
  if (!sim) throw RestoreError("restore needs the simulated backend");
  if (!segments_.empty() || !private_pools_.empty() || !active_.empty())
    throw RestoreError("restore needs a new allocator (this one already holds memory)");

  std::vector<const SegmentView*> order;
  for (const SegmentView& v : views) {
    check_blocks(v);
    const bool expandable = (v.flags & fmt::kSegExpandable) != 0;
    const bool policy_expandable = options_.expandable;
    if (expandable != policy_expandable)
      throw RestoreError(std::string("the state has ") + (expandable ? "expandable" : "fixed") +
                         " segments, but this policy uses " + (policy_expandable ? "expandable" : "fixed") +
                         " ones: replay the run under this policy instead");
    order.push_back(&v);
  }
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->addr < b->addr; });
  // Untrusted sizes (a file's) are bounded by the device before anything is built from them.
  uint64_t total_bytes = 0;
  for (const SegmentView* v : order) {
    if (v->size > total_ - std::min(total_, total_bytes)) {
      throw RestoreError("the state holds more memory than the simulated device's " + format_size(total_) +
                         " (at segment " + hex(v->addr) + "): choose a larger capacity");
    }
    total_bytes += v->size;
  }
  for (size_t i = 1; i < order.size(); i++)
    if (order[i - 1]->addr + order[i - 1]->size > order[i]->addr)
      throw RestoreError("segments " + hex(order[i - 1]->addr) + " and " + hex(order[i]->addr) + " overlap");

  auto pool_of = [&](const SegmentView& v) -> BlockPool* {
    const bool small = (v.flags & fmt::kPoolSmall) != 0;
    if (!(v.flags & fmt::kPoolPrivate) && v.pool0 == 0 && v.pool1 == 0) return small ? &small_ : &large_;
    PoolId id{v.pool0, v.pool1};
    auto it = private_pools_.find(id);
    if (it == private_pools_.end()) it = private_pools_.emplace(id, std::make_unique<PrivatePool>(id)).first;
    return small ? &it->second->small : &it->second->large;
  };
  // Appends blocks to a segment's chain (after `tail`), merging free neighbours that are both mapped
  // or both unmapped, as the allocator keeps them; returns the new tail.
  auto append = [&](Segment* seg, Block* tail, uint64_t addr, uint64_t size, uint64_t requested, uint32_t stack,
                    uint8_t state, bool mapped) -> Block* {
    const bool free = state == fmt::BLOCK_INACTIVE;
    if (tail && free && tail->is_free() && tail->mapped == mapped) {
      tail->size += size;
      return tail;
    }
    Block* b = new Block;
    b->addr = addr;
    b->size = size;
    b->stream = seg->stream;
    b->pool = seg->pool;
    b->segment = seg;
    b->mapped = mapped;
    b->stack = stack;  // free blocks keep the stack of their last hand-out, as segments() shows
    b->prev = tail;
    if (tail)
      tail->next = b;
    else
      seg->head = b;
    if (!free) {
      b->requested = requested;
      b->allocated = state == fmt::BLOCK_ACTIVE_ALLOCATED;
      b->pending_free = state == fmt::BLOCK_ACTIVE_PENDING_FREE;
    }
    return b;
  };
  // Statistics and pool membership of a finished chain (what hand_out/free_block keep incrementally).
  auto account = [&](Segment* seg) {
    for (Block* b = seg->head; b; b = b->next) {
      if (b->is_free()) {
        if (b->mapped) b->pool->blocks.insert(b);
        if (b->mapped && !seg->expandable && b->is_split()) {
          add_stats(stats_.inactive_split, b->pool, 1);
          add_stats(stats_.inactive_split_bytes, b->pool, int64_t(b->size));
        }
        continue;
      }
      if (b->allocated) {
        active_[b->addr] = b;
        add_stats(stats_.allocation, b->pool, 1);
        add_stats(stats_.allocated_bytes, b->pool, int64_t(b->size));
      } else {  // pending free: waits for an event only empty_cache or the OOM ladder waits for
        events_.emplace_back(backend_.record_event(device_, kRestoredUseStream), b);
        b->event_count = 1;
      }
      add_stats(stats_.active, b->pool, 1);
      add_stats(stats_.active_bytes, b->pool, int64_t(b->size));
      add_stats(stats_.requested_bytes, b->pool, int64_t(b->requested));
    }
  };
  auto capacity_error = [&](uint64_t addr) {
    uint64_t free_b = 0, total_b = 0;
    backend_.mem_get_info(device_, &free_b, &total_b);
    return RestoreError("the state holds more memory than the simulated device's " + format_size(total_b) +
                        " (at segment " + hex(addr) + "): choose a larger capacity");
  };

  // Fixed segments: one driver allocation each.
  {
    for (const SegmentView* v : order) {
      if (v->flags & fmt::kSegExpandable) continue;
      if (!sim->adopt_segment(device_, v->addr, v->size)) throw capacity_error(v->addr);
      auto seg = std::make_unique<Segment>();
      seg->addr = v->addr;
      seg->size = v->size;
      seg->stream = v->stream;
      seg->pool = pool_of(*v);
      seg->stack = v->stack;
      Block* tail = nullptr;
      for (const BlockView& b : v->blocks)
        tail = append(seg.get(), tail, b.addr, b.size, b.requested, b.stack, b.state, true);
      add_stats(stats_.segment, seg->pool, 1);
      add_stats(stats_.reserved_bytes, seg->pool, int64_t(seg->size));
      account(seg.get());
      segments_[seg->addr] = std::move(seg);
    }
  }
  if (options_.expandable) {
    // Expandable: the mapped runs of one (pool, stream) share one reservation.
    std::map<std::pair<BlockPool*, Stream>, std::vector<const SegmentView*>> groups;
    for (const SegmentView* v : order)
      if (v->flags & fmt::kSegExpandable) groups[{pool_of(*v), v->stream}].push_back(v);
    for (auto& [key, runs] : groups) {
      BlockPool* pool = key.first;
      const size_t page = pool->is_small ? kSmallPage : kLargePage;
      const uint64_t base = runs.front()->addr;
      const uint64_t last_end = runs.back()->addr + runs.back()->size;
      if (last_end - base > kExpandableRangeFactor * total_)
        throw RestoreError("the expandable segments of stream " + std::to_string(key.second) + " span " +
                           format_size(last_end - base) + ", more than one reservation (" +
                           std::to_string(kExpandableRangeFactor) + " x the device) holds");
      // The reservation ends where another group's first segment after it begins.
      uint64_t limit = base + std::max<uint64_t>(kExpandableRangeFactor * total_, last_end - base);
      for (const SegmentView* o : order) {
        const bool ours = std::find(runs.begin(), runs.end(), o) != runs.end();
        if (ours || o->addr < base) continue;
        if (o->addr < last_end)
          throw RestoreError("expandable segment " + hex(o->addr) + " lies inside the range of another stream's (" +
                             hex(base) + "–" + hex(last_end) + ")");
        limit = std::min(limit, o->addr);
      }
      const uint64_t size = (limit - base) / page * page;
      for (const SegmentView* r : runs)
        if ((r->addr - base) % page || r->size % page)
          throw RestoreError("expandable segment " + hex(r->addr) + " is not whole " + format_size(page) +
                             " pages from " + hex(base) +
                             " (several reservations of one stream cannot be restored as one)");
      if (size < last_end - base)
        throw RestoreError("expandable segment " + hex(base) + " does not fit its reservation");
      sim->adopt_range(device_, base, size);
      auto seg = std::make_unique<Segment>();
      seg->addr = base;
      seg->size = size;
      seg->stream = key.second;
      seg->pool = pool;
      seg->stack = runs.front()->stack;
      seg->expandable = true;
      seg->page = page;
      seg->mapped.assign(size / page, kPageUnmapped);
      Block* tail = nullptr;
      uint64_t at = base;
      for (const SegmentView* r : runs) {
        if (r->addr > at) tail = append(seg.get(), tail, at, r->addr - at, 0, 0, fmt::BLOCK_INACTIVE, false);
        for (uint64_t a = r->addr; a < r->addr + r->size; a += page) {
          if (!sim->adopt_page(device_, a, page)) throw capacity_error(a);
          seg->mapped[(a - base) / page] = kPageMapped;
        }
        // A segment, as reported, is one contiguous mapped run: adjacent runs count as one.
        for (const BlockView& b : r->blocks)
          tail = append(seg.get(), tail, b.addr, b.size, b.requested, b.stack, b.state, true);
        seg->mapped_bytes += r->size;
        add_stats(stats_.reserved_bytes, pool, int64_t(r->size));
        at = r->addr + r->size;
      }
      if (at < base + size) append(seg.get(), tail, at, base + size - at, 0, 0, fmt::BLOCK_INACTIVE, false);
      account(seg.get());
      Segment* raw = seg.get();
      segments_[base] = std::move(seg);
      expandable_[key] = raw;
    }
  }
  // Counters of events the restored allocator did not perform start at zero (Note [Restored state]);
  // the accumulated figures are the restored blocks' own (allocated − freed == current still holds).
  Stat& reserved = stats_.reserved_bytes[kAll];
  reserved.peak = std::max<int64_t>(reserved.current, int64_t(reserved_peak));
}

}  // namespace gpumem::core
