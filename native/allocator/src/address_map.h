// address_map.h — a flat hash map from device addresses to a small value, for the per-event paths.
//
// Note [Flat address map]: the observer looks up, inserts and erases one live block per PyTorch trace entry,
// under PyTorch's allocator lock, on the workload's own threads. With std::unordered_map each insert was a heap
// node and each lookup a bucket and a node, both cold by the next event (the workload's own work runs between
// two allocations): on the lent H100 the observer's bookkeeping took ≈ 0.6 µs per event, 1.4 ms of a ResNet-50
// step (Note [Self time]). Open addressing with linear probing keeps a lookup to about one cache line; erase
// shifts the following entries back (no tombstones, so a long run never slows down); the table doubles at half
// full. ~0 (all ones) marks an empty slot: no device allocation starts at the top of the address space.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace gpumem::rec {

template <class V>
class AddressMap {
 public:
  AddressMap() { rehash(1u << 12); }

  V* find(uint64_t key) {
    for (size_t i = home(key);; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.key == key) return &s.value;
      if (s.key == kEmpty) return nullptr;
    }
  }

  // Inserts or overwrites.
  void put(uint64_t key, const V& value) {
    if ((n_ + 1) * 2 > slots_.size()) rehash(slots_.size() * 2);
    for (size_t i = home(key);; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.key == key) {
        s.value = value;
        return;
      }
      if (s.key == kEmpty) {
        s.key = key;
        s.value = value;
        n_++;
        return;
      }
    }
  }

  bool erase(uint64_t key) {
    size_t i = home(key);
    for (;; i = (i + 1) & mask_) {
      if (slots_[i].key == key) break;
      if (slots_[i].key == kEmpty) return false;
    }
    // Backward shift: move each following entry of the run into the hole if its home does not lie
    // cyclically in (hole, its slot].
    for (size_t j = (i + 1) & mask_; slots_[j].key != kEmpty; j = (j + 1) & mask_) {
      const size_t h = home(slots_[j].key);
      const bool stays = i <= j ? (i < h && h <= j) : (i < h || h <= j);
      if (!stays) {
        slots_[i] = slots_[j];
        i = j;
      }
    }
    slots_[i].key = kEmpty;
    n_--;
    return true;
  }

  size_t size() const { return n_; }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t(0);
  struct Slot {
    uint64_t key = kEmpty;
    V value{};
  };

  // Fibonacci hashing: addresses are 512-byte aligned, so the low bits carry nothing; the multiply spreads
  // the rest and the top bits index the table.
  size_t home(uint64_t key) const { return size_t((key * 0x9E3779B97F4A7C15ull) >> shift_); }

  void rehash(size_t capacity) {
    std::vector<Slot> old;
    old.swap(slots_);
    slots_.assign(capacity, Slot{});
    mask_ = capacity - 1;
    shift_ = 64;
    for (size_t c = capacity; c > 1; c >>= 1) shift_--;
    n_ = 0;
    for (const Slot& s : old)
      if (s.key != kEmpty) put(s.key, s.value);
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  int shift_ = 64;
  size_t n_ = 0;
};

}  // namespace gpumem::rec
