// pytorch_settings.cc — PyTorch's rounding and the settings it reads (pytorch_settings.h).
#include "pytorch_settings.h"

#include <algorithm>
#include <cstdlib>

namespace gpumem::core {

// PyTorch's roundup_power2_next_division: the next of `divisions` equal steps between the powers of two around
// `size` (a power of two stays as it is).
static size_t next_division(size_t size, size_t divisions) {
  auto bit_width = [](uint64_t v) { return v ? 64 - __builtin_clzll(v) : 0; };
  if ((size & (size - 1)) == 0) return size;
  const size_t floor = size_t(1) << (bit_width(size) - 1);
  const size_t step = floor >> (bit_width(divisions) - 1);
  if (step == 0) return floor << 1;
  const size_t down = size & ~(step - 1);
  return down == size ? size : down + step;
}

size_t pytorch_round(size_t requested, const std::array<uint32_t, kRoundupIntervals>& divisions_by_interval) {
  if (requested < kMinBlockSize) return kMinBlockSize;
  // The interval of the size: index 0 below 2 MiB, then one per power of two, the last from 32 GiB on.
  const size_t log2 = size_t(63 - __builtin_clzll(requested)), start = 20;
  const size_t index = std::min(log2 > start ? log2 - start : 0, kRoundupIntervals - 1);
  const size_t divisions = divisions_by_interval[index];
  if (divisions > 1 && requested > kMinBlockSize * divisions) return next_division(requested, divisions);
  return round_size(requested);
}

PytorchSettings pytorch_settings_from_json(const json::Value& settings) {
  PytorchSettings out;
  if (!settings.is_object()) return out;
  if (const json::Value* v = settings.find("max_split_size"); v && v->is_number()) {
    const double bytes = v->as_double();  // -1, or SIZE_MAX read as a double: unset
    out.max_split_size = bytes > 0 && bytes < 1.8e19 ? uint64_t(v->as_int()) : kNoMaxSplit;
  }
  if (const json::Value* v = settings.find("max_non_split_rounding");
      v && v->is_number() && v->as_double() > 0 && v->as_double() < 1.8e19)
    out.max_non_split_rounding = uint64_t(v->as_int());
  if (const json::Value* v = settings.find("roundup_power2_divisions")) {
    auto& d = out.roundup_power2_divisions;
    if (v->is_object()) {
      for (const auto& [k, n] : v->members()) {
        const uint64_t mib = std::strtoull(k.c_str(), nullptr, 10);
        if (mib && (mib & (mib - 1)) == 0 && n.is_number() && n.as_int() >= 0)
          d[std::min(size_t(63 - __builtin_clzll(mib)), d.size() - 1)] = uint32_t(n.as_int());
      }
    } else if (v->is_array() && v->items().size() == d.size()) {
      for (size_t k = 0; k < d.size(); k++)
        d[k] = v->items()[k].is_number() ? uint32_t(std::max<int64_t>(0, v->items()[k].as_int())) : 0;
    } else if (v->is_number() && v->as_int() >= 0) {
      d.fill(uint32_t(v->as_int()));
    }
  }
  return out;
}

}  // namespace gpumem::core
