// id_map.h — a capture's ids (strings, frames, stacks) to a reader's own, for the capture decoder and the index
// builder alike.
//
// Ids are dense from 1 in practice (a writer hands them out in order): a vector, with a hash map for the improbable
// huge ids a damaged or hostile file could use, so a far-off id cannot make the table allocate gigabytes.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace gpumem::fmt {

struct IdMap {
  std::vector<uint32_t> dense;
  std::unordered_map<uint32_t, uint32_t> sparse;
  size_t entries = 0;
  void set(uint32_t id, uint32_t v) {
    entries++;
    // Dense while ids stay near the number defined so far.
    if (id < dense.size() || id < 4096 + 4 * entries) {
      if (id >= dense.size()) dense.resize(std::max<size_t>(id + 1, dense.size() * 2), UINT32_MAX);
      dense[id] = v;
    } else {
      sparse[id] = v;
    }
  }
  bool get(uint32_t id, uint32_t& v) const {
    if (id < dense.size()) return (v = dense[id]) != UINT32_MAX;
    auto it = sparse.find(id);
    if (it == sparse.end()) return false;
    v = it->second;
    return true;
  }
};

}  // namespace gpumem::fmt
