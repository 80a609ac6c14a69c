// capture_overview.h — the first view of a .gpumem capture: Note [Capture first view] in
// capture_overview.cpp.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace gpumem {

// Allocated and reserved over the whole run of every device with events or with figures only (its REC_STATS samples:
// Note [Figures after the events in the index] in capture_index.h), as `buckets` min/max buckets between the device's
// first and last moment, with the peaks: the JSON of a pickle's overview (OverviewView in
// src/core/base/model/types.ts) plus "source" ("index": read from the capture's REC_INDEX; "scan": computed from
// the records, the capture having no index) and "complete" (false: the capture ends without REC_END, or damaged,
// and the view is of the records before that), and "row" when the index carries what a rank row needs (Note [Rank
// row from the index] in capture_overview.cpp). Throws std::runtime_error when the bytes are not a capture, and with
// index_only when the capture has no index (the caller opens it in full instead of paying for a pass).
// With a window, every device's buckets span it (µs, the model's times) instead of the device's own range, and a
// device's series is 0 outside its own range, and only the max series are written (the min ones are empty): the
// ranks view's shared axis. buckets 0: the figures without series.
struct OverviewWindow {
  double t0_us, t1_us;
};
std::string capture_overview_json(const uint8_t* data, size_t size, int buckets, bool index_only = false,
                                  const OverviewWindow* window = nullptr);

}  // namespace gpumem
