// An open-addressing hash map from block address to event index, for pairing allocations with their
// frees (one insert and one erase per allocation; std::unordered_map's node allocations dominated the
// derive pass). Linear probing with backward-shift deletion, so no tombstones accumulate over a
// 10 M-event capture.
#pragma once
#include <cstdint>
#include <vector>

namespace gpumem {

class AddrIndexMap {
 public:
  AddrIndexMap() { slots_.assign(1024, Slot{0, kEmpty}); }

  void put(uint64_t key, uint32_t value) {
    if ((size_ + 1) * 2 > slots_.size()) grow();
    size_t i = home(key);
    while (slots_[i].value != kEmpty && slots_[i].key != key) i = (i + 1) & mask();
    if (slots_[i].value == kEmpty) size_++;
    slots_[i] = Slot{key, value};
  }

  // Removes `key` and returns its value, or kEmpty if absent.
  uint32_t take(uint64_t key) {
    size_t i = home(key);
    while (slots_[i].value != kEmpty) {
      if (slots_[i].key == key) {
        uint32_t v = slots_[i].value;
        erase(i);
        return v;
      }
      i = (i + 1) & mask();
    }
    return kEmpty;
  }

  // The value of `key`, or kEmpty if absent.
  uint32_t get(uint64_t key) const {
    for (size_t i = home(key); slots_[i].value != kEmpty; i = (i + 1) & mask())
      if (slots_[i].key == key) return slots_[i].value;
    return kEmpty;
  }

  size_t size() const { return size_; }
  static constexpr uint32_t kEmpty = UINT32_MAX;

 private:
  struct Slot {
    uint64_t key;
    uint32_t value;
  };
  size_t mask() const { return slots_.size() - 1; }
  size_t home(uint64_t key) const {
    // Addresses are 512-byte aligned: mix the bits so neighbours spread over the table.
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdULL;
    key ^= key >> 33;
    return (size_t)key & mask();
  }
  void erase(size_t i) {
    size_--;
    size_t j = i;
    while (true) {
      j = (j + 1) & mask();
      if (slots_[j].value == kEmpty) break;
      size_t h = home(slots_[j].key);
      // Move j back into the hole at i unless its home lies cyclically in (i, j].
      bool between = i <= j ? (i < h && h <= j) : (i < h || h <= j);
      if (!between) {
        slots_[i] = slots_[j];
        i = j;
      }
    }
    slots_[i].value = kEmpty;
  }
  void grow() {
    std::vector<Slot> old;
    old.swap(slots_);
    slots_.assign(old.size() * 2, Slot{0, kEmpty});
    size_ = 0;
    for (const Slot& s : old)
      if (s.value != kEmpty) put(s.key, s.value);
  }

  std::vector<Slot> slots_;
  size_t size_ = 0;
};

}  // namespace gpumem
