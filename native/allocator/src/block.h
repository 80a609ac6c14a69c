// block.h — blocks, segments and pools: the data the caching allocator arranges (PyTorch's layout).
#pragma once
#include <cstdint>
#include <set>
#include <vector>

#include "constants.h"

namespace gpumem::core {

struct BlockPool;
struct PrivatePool;
struct Segment;

// A contiguous piece of a segment. The blocks of a segment form an address-ordered chain
// (prev/next) that covers it exactly; for an expandable segment the chain covers the whole reserved
// range and `mapped` says whether physical pages back the block.
struct Block {
  uint64_t addr = 0;
  size_t size = 0;
  size_t requested = 0;  // bytes the caller asked for (0 while free)
  Stream stream = 0;     // the allocation stream that owns the block
  BlockPool* pool = nullptr;
  Segment* segment = nullptr;
  Block* prev = nullptr;
  Block* next = nullptr;
  bool allocated = false;           // handed out to a caller
  bool pending_free = false;        // freed by the caller, waiting on record_stream events
  bool mapped = true;               // false only for unmapped pages of an expandable segment
  int event_count = 0;              // outstanding events before a pending free completes
  uint32_t stack = 0;               // stack of the last hand-out
  std::vector<Stream> stream_uses;  // other streams that used the block (record_stream)

  bool is_free() const { return !allocated && !pending_free; }
  bool is_split() const { return prev != nullptr || next != nullptr; }
  uint64_t end() const { return addr + size; }
};

// Best fit: the first free block of the same stream that is large enough, lowest address on ties.
struct BlockOrder {
  bool operator()(const Block* a, const Block* b) const {
    if (a->stream != b->stream) return a->stream < b->stream;
    if (a->size != b->size) return a->size < b->size;
    return a->addr < b->addr;
  }
};

// Free, mapped blocks available for reuse. Unmapped expandable blocks are reachable only through
// their segment's chain.
struct BlockPool {
  BlockPool(bool small, PrivatePool* owner_pool) : is_small(small), owner(owner_pool) {}
  std::set<Block*, BlockOrder> blocks;
  const bool is_small;
  PrivatePool* const owner;  // nullptr for the default pools
};

// An expandable segment's page. kPageMoving: its physical memory now also backs another address
// (Note [Page moves] in device_allocator.h); this address is unmapped once an event completes, and
// until then it is neither usable nor mappable.
enum PageState : uint8_t { kPageUnmapped = 0, kPageMapped = 1, kPageMoving = 2 };

// Memory from the driver: one cuMemAlloc range (fixed) or one reserved VA range (expandable).
struct Segment {
  uint64_t addr = 0;
  size_t size = 0;
  Stream stream = 0;
  BlockPool* pool = nullptr;
  uint32_t stack = 0;  // stack of the malloc that created it
  bool expandable = false;
  size_t page = 0;              // expandable: page size
  std::vector<uint8_t> mapped;  // expandable: per page, a PageState
  size_t mapped_bytes = 0;      // expandable: bytes mapped (what counts as reserved)
  Block* head = nullptr;
};

// A graph-private pool (CUDA graph capture, MempoolId_t): its memory never serves other code and is
// kept until the pool is released (use_count reaches 0) and the cache is emptied.
struct PrivatePool {
  explicit PrivatePool(PoolId pool_id) : id(pool_id), small(true, this), large(false, this) {}
  PoolId id;
  BlockPool small, large;
  int use_count = 1;
  bool freeable = false;
};

}  // namespace gpumem::core
