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

struct PickleLimits {
  size_t maxStack = 1u << 24;       // values on the VM stack at once
  size_t maxMemo = 1u << 26;        // memo entries
  size_t maxValues = 1u << 30;      // total values built
  size_t maxContainerItems = 1u << 30;
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

  uint32_t root() const { return root_; }
  int protocol() const { return protocol_; }
  // Note [Absent is None]: every accessor takes kNone (a missing dict key) and answers as for None, so
  // readers of optional keys need no checks before use.
  const PValue& at(uint32_t i) const { return i < values_.size() ? values_[i] : kNoneValue; }
  size_t valueCount() const { return values_.size(); }

  // Container children: lists/tuples hold items; dicts hold key, value, key, value, …; else empty.
  ItemSpan items(uint32_t i) const {
    PType t = at(i).type;
    if (t != PType::List && t != PType::Tuple && t != PType::Dict) return {};
    const Cont& c = containers_[values_[i].aux];
    return ItemSpan{arena_.data() + c.off, c.len};
  }
  std::string_view str(uint32_t i) const;  // Str or Bytes
  bool isStr(uint32_t i) const { return at(i).type == PType::Str; }
  bool isInt(uint32_t i) const {
    PType t = at(i).type;
    return t == PType::Int || t == PType::UInt || t == PType::Bool;
  }
  // Integer as int64 (UInt wraps to its two's-complement bits: addresses ≥ 2^63 stay exact as u64).
  int64_t asInt(uint32_t i, int64_t fallback = 0) const;
  uint64_t asU64(uint32_t i, uint64_t fallback = 0) const { return (uint64_t)asInt(i, (int64_t)fallback); }
  double asNumber(uint32_t i, double fallback = 0) const;
  // Dict lookup by string key (linear: snapshot dicts have ≤ 15 keys). Returns UINT32_MAX when absent.
  uint32_t get(uint32_t dict, std::string_view key) const;
  // Returns the tree's big buffers' pages to the kernel in small steps before the tree is destroyed
  // (Note [Gentle release] in pickle_reader.cpp). The tree must not be read afterwards.
  void dropPages();
  static constexpr uint32_t kNone = UINT32_MAX;
  static inline const PValue kNoneValue{PType::None, false, 0, 0};

 private:
  uint32_t push(PValue v);
  uint32_t newContainer(PType t);
  // Appends n items to container `cont` (Note [Item arena]).
  void appendItems(uint32_t cont, const uint32_t* items, size_t n);
  void parse();

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
};

}  // namespace gpumem
