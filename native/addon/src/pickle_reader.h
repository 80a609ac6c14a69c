// A pickle reader that executes nothing: it runs the pickle VM's data opcodes only and builds a tree
// of plain values (None, bool, int, float, str, bytes, list, tuple, dict). Any opcode that would import
// or call code (GLOBAL, REDUCE, BUILD, …) stops the read with an error naming the opcode and its offset.
//
// Note [Zero-copy strings]: binary string opcodes keep (offset, length) into the caller's buffer, so the
// buffer must outlive the PickleTree. Only text-protocol strings (UNICODE 'V') are decoded into owned
// storage.
#pragma once
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace gpumem {

enum class PType : uint8_t { None, Bool, Int, UInt, BigInt, Float, Str, Bytes, List, Tuple, Dict, Mark };

struct PValue {
  PType type;
  bool flag;     // Bool: the value; Str/Bytes: true when the bytes live in PickleTree::owned
  uint32_t aux;  // Str/Bytes: length (or owned index); List/Tuple/Dict: container index
  uint64_t raw;  // Int: int64 bits; UInt: value ≥ 2^63; Float: double bits; Str/Bytes: buffer offset
};

class PickleError : public std::runtime_error {
 public:
  PickleError(const std::string& what, size_t offset) : std::runtime_error(what), offset(offset) {}
  size_t offset;
};

// Note [Trace entries as rows]: a 10 M-event snapshot is 10 M small dicts. Building each as a tree node
// (~160 bytes of values, items and containers) and walking the tree afterwards was most of the open's time
// and memory. With a decoder, the VM offers every dict it completes with one SETITEMS; when the decoder
// takes it (a trace entry), it is decoded into the decoder's columns at once, and the dict and everything
// created since the dict began are forgotten (the tree rolls back to the dict's start). References to it
// become tagged refs: an entry ref (row) in place of the dict, a stack ref (stack id) in place of its fresh
// frames list and a frame ref (frame id) in place of each fresh frame dict in it (PyTorch pickles
// memoise them all; a later entry may name them again). Fresh memoised strings and other scalars are
// kept: moved down to where the dict was. A rollback happens only when nothing else can still reach
// what it forgets: no other memo entry, no older container that got items since, no second stack
// reference; otherwise the dict stays in the tree and the importer reads it as before. Tagged refs read as None
// through every accessor below, so code that does not expect them sees an absent value.
class PickleTree;

// Note [Flat entries]: a trace entry is a dict whose keys and strings are mostly memo references and
// whose values are integers, strings and a frames list: EMPTY_DICT, MEMOIZE, MARK, (key, value)…,
// SETITEMS. The VM reads such a dict without building it: each value is kept as a FastValue, the decoder
// gets the pairs, and the dict is never a tree node at all. A frames list is read the same way (a list
// named again, or a fresh list of frame dicts, fresh or named again, as PyTorch dumps them): its frames
// are interned as they come, and memo references to the list and its dicts become stack and frame refs.
// Anything else in the dict (a nested dict, an unexpected opcode) rewinds to the dict's first opcode and
// the general path (Note [Trace entries as rows]) reads it.
struct FastValue {
  enum Kind : uint8_t { Ref, Int, UInt, None, Bool, Stack } kind;
  uint32_t ref;  // Ref: a tree ref (value index or tagged)
  uint64_t raw;  // Int: int64 bits; UInt: the value; Bool: 0/1; Stack: a stack id
};
struct FastPair {
  uint32_t key;  // a tree ref (a string value, normally)
  FastValue value;
};

class EntryDecoder {
 public:
  virtual ~EntryDecoder() = default;
  // Phase 1: is this dict (its items as key, value, …) a row? frames_ref: the value it keeps as a stack
  // (kNone when none); it may be a fresh list, forgotten with the dict. Nodes ≥ floor may be forgotten
  // (the decoder must not cache them).
  virtual bool is_entry(const PickleTree& t, const uint32_t* kv, size_t n, uint32_t floor, uint32_t& frames_ref) = 0;
  // Phase 2: decode it; nodes ≥ floor are forgotten afterwards (the decoder must not cache them).
  // Returns the row; stack_out: what frames_ref became.
  virtual uint32_t decode(const PickleTree& t, const uint32_t* kv, size_t n, uint32_t floor, uint32_t& stack_out) = 0;
  // The decoder's row count, for the limit on tagged refs.
  virtual size_t row_count() const = 0;
  // After decode(): the frame id each item of a fresh frames list became (UINT32_MAX: not a frame).
  virtual const std::vector<uint32_t>& fresh_frames() const = 0;
  // A flat dict read without building it (Note [Flat entries]); false: not a row, read it the general way
  // (nothing may have been recorded then). Nodes ≥ floor are forgotten when it answers false.
  virtual bool decode_flat(const PickleTree& t, const FastPair* kv, size_t n, uint32_t floor, uint32_t& row) = 0;
  // Frames of a flat entry's list: a fresh frame dict's pairs, or a frame dict the tree holds (or a frame
  // ref) → frame id (UINT32_MAX: not a frame, read the entry the general way); frame ids → stack id.
  virtual uint32_t flat_frame(const PickleTree& t, const FastPair* kv, size_t n, uint32_t floor) = 0;
  virtual uint32_t frame_of(const PickleTree& t, uint32_t ref) = 0;
  virtual uint32_t flat_stack(const uint32_t* frame_ids, size_t n) = 0;
};

struct PickleLimits {
  size_t max_stack = 1u << 24;   // values on the VM stack at once
  size_t max_memo = 1u << 26;    // memo entries
  size_t max_values = 1u << 30;  // total values built
  size_t max_container_items = 1u << 30;
};

// A container's children: a view into the tree's item arena (valid until the tree is destroyed).
struct ItemSpan {
  const uint32_t* p = nullptr;
  size_t n = 0;
  const uint32_t* begin() const { return p; }
  const uint32_t* end() const { return p + n; }
  size_t size() const { return n; }
  bool empty() const { return n == 0; }
  uint32_t operator[](size_t i) const { return p[i]; }
};

class PickleTree {
 public:
  // Parses `data` (which must outlive the tree). Throws PickleError with the byte offset on bad input.
  PickleTree(const uint8_t* data, size_t size, PickleLimits limits = {});
  // With a decoder (Note [Trace entries as rows]). drop_input: `data` is a read-only file mapping whose
  // pages may be dropped behind the parser and faulted in again on use (never pass heap memory).
  PickleTree(const uint8_t* data, size_t size, EntryDecoder* decoder, bool drop_input, PickleLimits limits = {});

  uint32_t root() const { return root_; }
  int protocol() const { return protocol_; }
  // Note [Absent is None]: every accessor takes kNone (a missing dict key) and answers as for None, so
  // readers of optional keys need no checks before use.
  const PValue& at(uint32_t i) const { return i < values_.size() ? values_[i] : kNoneValue; }
  size_t value_count() const { return values_.size(); }

  // Container children: lists/tuples hold items; dicts hold key, value, key, value, …; else empty.
  ItemSpan items(uint32_t i) const {
    PType t = at(i).type;
    if (t != PType::List && t != PType::Tuple && t != PType::Dict) return {};
    const Cont& c = containers_[values_[i].aux];
    return ItemSpan{arena_.data() + c.off, c.len};
  }
  std::string_view str(uint32_t i) const;  // Str or Bytes
  bool is_str(uint32_t i) const { return at(i).type == PType::Str; }
  bool is_int(uint32_t i) const {
    PType t = at(i).type;
    return t == PType::Int || t == PType::UInt || t == PType::Bool;
  }
  // Integer as int64 (UInt wraps to its two's-complement bits: addresses ≥ 2^63 stay exact as u64).
  int64_t as_int(uint32_t i, int64_t fallback = 0) const;
  uint64_t as_u64(uint32_t i, uint64_t fallback = 0) const { return (uint64_t)as_int(i, (int64_t)fallback); }
  double as_number(uint32_t i, double fallback = 0) const;
  // Dict lookup by string key (linear: snapshot dicts have ≤ 15 keys). Returns UINT32_MAX when absent.
  uint32_t get(uint32_t dict, std::string_view key) const;
  // Returns the tree's big buffers' pages to the kernel in small steps before the tree is destroyed
  // (Note [Gentle release] in pickle_reader.cpp). The tree must not be read afterwards.
  void drop_pages();
  static constexpr uint32_t kNone = UINT32_MAX;
  // Tagged refs (Note [Trace entries as rows]): values stay below 2^30 (PickleLimits::max_values).
  // Bit 31: tagged; bits 30–29: what it stands for; the rest: a row, a stack id or a frame id.
  static constexpr uint32_t kTagged = 0x80000000u, kKindMask = 0xE0000000u;
  static constexpr uint32_t kEntryTag = 0x80000000u, kStackTag = 0xA0000000u, kFrameTag = 0xC0000000u;
  static constexpr uint32_t kMaxTagged = 0x1FFFFFFEu;
  static bool is_entry_ref(uint32_t r) { return (r & kKindMask) == kEntryTag; }
  static bool is_stack_ref(uint32_t r) { return (r & kKindMask) == kStackTag; }
  static bool is_frame_ref(uint32_t r) { return (r & kKindMask) == kFrameTag; }
  static uint32_t tag_value(uint32_t r) { return r & ~kKindMask; }
  // Dicts taken as rows, and dicts the decoder was offered but that had to stay in the tree.
  size_t rows_taken() const { return rows_taken_ + rows_flat_; }
  size_t rows_flat() const { return rows_flat_; }
  size_t rows_kept() const { return rows_kept_; }
  static inline const PValue kNoneValue{PType::None, false, 0, 0};

 private:
  uint32_t push(PValue v);
  uint32_t new_container(PType t);
  // Appends n items to container `cont` (Note [Item arena]).
  void append_items(uint32_t cont, const uint32_t* items, size_t n);
  void parse();
  // SETITEMS on the dict at stack[m - 1] with items stack[m, end): true when the decoder took it.
  bool try_row(std::vector<uint32_t>& stack, std::vector<uint32_t>& max_below, size_t m, std::vector<uint32_t>& memo);

  // Note [Item arena]: every container's items live in one arena (no allocation per container: a
  // 10 M-event trace has 10 M dicts). A container filled at once (most: SETITEMS, APPENDS after MARK)
  // takes the arena's end; one that grows again while it is not at the end moves there with double
  // capacity, so growth stays amortised O(1) and the abandoned space is at most the live space.
  struct Cont {
    uint64_t off = 0;
    uint32_t len = 0, cap = 0;
  };

  const uint8_t* data_;
  size_t size_;
  PickleLimits limits_;
  std::vector<PValue> values_;
  std::vector<Cont> containers_;
  std::vector<uint32_t> arena_;
  std::vector<std::string> owned_;
  uint32_t root_ = 0;
  int protocol_ = 0;
  EntryDecoder* decoder_ = nullptr;
  bool drop_input_ = false;
  // What a rollback must know (Note [Trace entries as rows]): memo puts of values ≥ track_floor_ and
  // container appends since the log started (at values_.size() = track_floor_). Only a dict created after
  // that can be rolled back. The log restarts after each entry offered, and when it would pass kLogCap
  // entries (the segments before the trace put thousands).
  static constexpr size_t kLogCap = 256;
  std::vector<std::pair<uint64_t, uint32_t>> memo_log_;  // (memo key, value)
  std::vector<uint32_t> append_log_;                     // (container index, values_.size() then) pairs
  uint32_t track_floor_ = 0;
  uint64_t log_epoch_ = 0;
  void restart_log() {
    memo_log_.clear(), append_log_.clear();
    track_floor_ = (uint32_t)values_.size();
    log_epoch_++;
  }
  size_t rows_taken_ = 0, rows_kept_ = 0, rows_flat_ = 0;
};

}  // namespace gpumem
