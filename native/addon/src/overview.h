// overview.h — the first view of a big PyTorch snapshot pickle: see Note [First view] in overview.cpp.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gpumem::json {
class Writer;
}

namespace gpumem {

// Allocated and reserved over the whole trace of every device, as `buckets` min/max buckets between the
// device's first and last moment, with the peaks; a JSON document (OverviewView in
// src/core/base/model/types.ts). Exact: each bucket equals what timeline_json gives the full model for the
// same t0, t1 and bucket count. Throws std::runtime_error when the file is not a snapshot this pass reads
// (the caller then waits for the full open). file_mapped: `data` is a private read-only file mapping whose
// pages may be dropped behind the scan (Note [Overview window]; never pass heap memory).
std::string pickle_overview_json(const uint8_t* data, size_t size, int buckets, bool file_mapped = false);

// A device's four overview series (allocatedMin/Max, reservedMin/Max) into the open device object `j`: the one
// writer of that part of OverviewView, for pickles (overview.cpp) and captures (capture_overview.cpp).
void write_overview_series(json::Writer& j, const std::vector<int64_t>& amin, const std::vector<int64_t>& amax,
                           const std::vector<int64_t>& rmin, const std::vector<int64_t>& rmax);

}  // namespace gpumem
