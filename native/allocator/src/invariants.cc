// invariants.cc — DeviceAllocator::check_invariants: recompute everything from the block chains and
// compare with the incrementally kept state. Cheap enough for tests to call after every operation.
#include <algorithm>
#include <sstream>

#include "device_allocator.h"

namespace gpumem::core {

std::string DeviceAllocator::check_invariants() {
  Lock lock(mu_);
  std::ostringstream err;
  DeviceStats want;  // recomputed "current" values
  auto add = [&](Stat* s, const BlockPool* p, int64_t n) {
    s[kAll].current += n;
    s[p->is_small ? kSmallPool : kLargePool].current += n;
  };
  size_t free_mapped = 0, handed_out = 0;
  for (auto& [addr, seg] : segments_) {
    if (seg->addr != addr || !seg->head || seg->head->addr != addr || seg->head->prev) {
      err << "segment " << addr << ": head block does not start the segment";
      return err.str();
    }
    uint64_t covered = 0, mapped_bytes = 0;
    for (Block* b = seg->head; b; b = b->next) {
      if (b->segment != seg.get() || b->pool != seg->pool || b->stream != seg->stream) {
        err << "block " << b->addr << ": segment/pool/stream differ from its segment's";
        return err.str();
      }
      if (b->addr != seg->addr + covered || b->size == 0 || (b->next && b->next->prev != b)) {
        err << "block " << b->addr << ": chain is not contiguous";
        return err.str();
      }
      covered += b->size;
      if (b->size % kMinBlockSize != 0 || b->addr % kMinBlockSize != 0) {
        err << "block " << b->addr << ": not 512-byte aligned";
        return err.str();
      }
      if (b->next && b->is_free() && b->next->is_free() && b->mapped == b->next->mapped) {
        err << "blocks " << b->addr << " and " << b->next->addr << ": adjacent free blocks not merged";
        return err.str();
      }
      const bool in_set = seg->pool->blocks.count(b) != 0;
      if (in_set != (b->is_free() && b->mapped)) {
        err << "block " << b->addr << ": pool membership " << in_set << " disagrees with its state";
        return err.str();
      }
      if (b->allocated != (active_.count(b->addr) && active_.at(b->addr) == b)) {
        err << "block " << b->addr << ": allocated flag disagrees with the active map";
        return err.str();
      }
      if (b->allocated && b->pending_free) {
        err << "block " << b->addr << ": both allocated and pending free";
        return err.str();
      }
      if (!b->mapped && (!b->is_free() || !seg->expandable)) {
        err << "block " << b->addr << ": unmapped but in use or not expandable";
        return err.str();
      }
      if (seg->expandable) {
        // Pages are wholly mapped or unmapped; blocks never straddle a mapping boundary.
        for (uint64_t a = b->addr; a < b->end(); a += seg->page - (a - seg->addr) % seg->page) {
          if ((seg->mapped[(a - seg->addr) / seg->page] == kPageMapped) != b->mapped) {
            err << "block " << b->addr << ": mapped flag disagrees with page " << (a - seg->addr) / seg->page;
            return err.str();
          }
        }
        if (b->mapped) mapped_bytes += b->size;
      }
      if (b->is_free() && b->mapped) free_mapped++;
      if (b->allocated) {
        handed_out++;
        add(want.allocation, seg->pool, 1);
        add(want.allocated_bytes, seg->pool, int64_t(b->size));
      }
      if (!b->is_free()) {
        add(want.active, seg->pool, 1);
        add(want.active_bytes, seg->pool, int64_t(b->size));
        add(want.requested_bytes, seg->pool, int64_t(b->requested));
      }
      if (b->is_free() && b->is_split() && !seg->expandable) {
        add(want.inactive_split, seg->pool, 1);
        add(want.inactive_split_bytes, seg->pool, int64_t(b->size));
      }
    }
    if (covered != seg->size) {
      err << "segment " << addr << ": blocks cover " << covered << " of " << seg->size << " bytes";
      return err.str();
    }
    if (seg->expandable) {
      if (mapped_bytes != seg->mapped_bytes) {
        err << "expandable segment " << addr << ": mapped bytes " << seg->mapped_bytes << " but blocks say "
            << mapped_bytes;
        return err.str();
      }
      add(want.reserved_bytes, seg->pool, int64_t(mapped_bytes));
    } else {
      add(want.segment, seg->pool, 1);
      add(want.reserved_bytes, seg->pool, int64_t(seg->size));
    }
  }
  // Note [Page moves]: every kPageMoving page is queued exactly once, none while a capture runs.
  size_t moving_pages = 0;
  for (auto& [addr, seg] : segments_)
    if (seg->expandable) moving_pages += size_t(std::count(seg->mapped.begin(), seg->mapped.end(), kPageMoving));
  for (const Moving& m : moving_) {
    if (m.page >= m.seg->mapped.size() || m.seg->mapped[m.page] != kPageMoving) {
      err << "a queued page move of segment " << m.seg->addr << " names page " << m.page << ", which is not moving";
      return err.str();
    }
  }
  if (moving_pages != moving_.size() || (capturing() && !moving_.empty())) {
    err << moving_pages << " pages are moving but " << moving_.size() << " moves are queued"
        << (capturing() ? " during a capture" : "");
    return err.str();
  }
  size_t in_sets = small_.blocks.size() + large_.blocks.size();
  for (auto& [id, pp] : private_pools_) in_sets += pp->small.blocks.size() + pp->large.blocks.size();
  if (in_sets != free_mapped) {
    err << "pools hold " << in_sets << " blocks but " << free_mapped << " free mapped blocks exist";
    return err.str();
  }
  if (handed_out != active_.size()) {
    err << "active map has " << active_.size() << " entries but " << handed_out << " blocks are allocated";
    return err.str();
  }
  const std::pair<const char*, std::pair<const Stat*, const Stat*>> pairs[] = {
      {"allocation", {stats_.allocation, want.allocation}},
      {"segment", {stats_.segment, want.segment}},
      {"active", {stats_.active, want.active}},
      {"inactive_split", {stats_.inactive_split, want.inactive_split}},
      {"allocated_bytes", {stats_.allocated_bytes, want.allocated_bytes}},
      {"reserved_bytes", {stats_.reserved_bytes, want.reserved_bytes}},
      {"active_bytes", {stats_.active_bytes, want.active_bytes}},
      {"inactive_split_bytes", {stats_.inactive_split_bytes, want.inactive_split_bytes}},
      {"requested_bytes", {stats_.requested_bytes, want.requested_bytes}}};
  const char* types[] = {"all", "small_pool", "large_pool"};
  for (auto& [name, p] : pairs) {
    for (int t = 0; t < kNumStatTypes; t++) {
      const Stat& have = p.first[t];
      if (have.current != p.second[t].current || have.peak < have.current ||
          (!accumulated_reset_ && have.allocated - have.freed != have.current)) {
        err << name << "." << types[t] << ": current " << have.current << " (peak " << have.peak << ", allocated-freed "
            << have.allocated - have.freed << ") but the blocks say " << p.second[t].current;
        return err.str();
      }
    }
  }
  return "";
}

}  // namespace gpumem::core
