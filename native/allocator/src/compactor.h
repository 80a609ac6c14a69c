// compactor.h — turns the oldest part of a budgeted capture's full-detail window into a compacted range
// (FORMAT.md §5, Note [Capture budget] in compactor.cc). Runs on the writer thread only; no locks.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "../../format/gpumem_format.h"

namespace gpumem::rec::compactor {

// One record as the file holds it: header fields and payload.
struct RecordView {
  uint8_t type, device;
  uint16_t flags;
  const uint8_t* payload;
  uint32_t n;
};
// Calls `fn` for every record of a range, in file order (the caller reads the file).
using RecordSource = std::function<void(const std::function<void(const RecordView&)>& fn)>;

class Compactor {
 public:
  explicit Compactor(uint64_t budget_bytes) : budget_(budget_bytes) {}
  // Appends to `out` the compacted form of the records `source` yields (the range right after the previous
  // one). `source` is called twice (the first pass finds each device's peak in the range).
  void compact(const RecordSource& source, std::string* out);
  // Appends to `out` the records of `compacted` (every compacted range of a capture, from its first record on)
  // merged into one range, thinned: Note [Budget as a cap] (compactor.cc). Uses a compactor of its own; this
  // one's state (the blocks at the start of the window) is the same before and after.
  static void merge(const RecordSource& compacted, uint64_t budget_bytes, std::string* out);
  uint64_t ranges() const { return ranges_; }

 private:
  struct Live {
    uint64_t size, requested, stream;
    uint32_t stack, thread;
    uint16_t flags;
    // Its free was requested and has not completed (record_stream, or a range cut between the two events):
    // still a block of the segment, no longer allocated. Note [Pending frees across a cut] (compactor.cc).
    bool pending = false;
    // The block's category tag (REC_TAG), if one fell in it: restated with the block, Note [Tags of restated blocks].
    fmt::TagRec tag{};
    bool tagged = false;
    // The label its thread had when it was allocated (REC_USER_METADATA's string id, 0 none): restated with the
    // block, Note [Labels of restated blocks].
    uint32_t label = 0;
    // The same allocation (whatever its state).
    bool same_block(const Live& o) const {
      return size == o.size && requested == o.requested && stream == o.stream && stack == o.stack && flags == o.flags &&
             label == o.label;
    }
  };
  struct Dev {
    // Blocks allocated or pending at the start of the next range (= what a reader has).
    std::map<uint64_t, Live> live;  // by address: a tag names an address inside its block
    int64_t allocated = 0, reserved = 0;
    int64_t best = 0;  // highest allocated bytes of all compacted ranges (restated at its first moment)
  };
  uint64_t budget_;
  uint64_t ranges_ = 0;
  bool thin_ = false;  // merging compacted ranges (merge()): Note [Budget as a cap]
  std::unordered_map<uint8_t, Dev> devs_;
  // Each thread's label as a reader has it at the start of the next range (REC_USER_METADATA, thread → string id).
  std::unordered_map<uint32_t, uint32_t> labels_;
};

}  // namespace gpumem::rec::compactor
