// Queries answered natively over a Model, each returned as one JSON document shaped like the
// TypeScript types in src/core/base/model/types.ts.
#pragma once
#include <string>
#include <vector>

#include "model.h"

namespace gpumem {

std::string summary_json(const Model& m);
std::string time_range_json(const Model& m, int dev);
std::string current_json(const Model& m, int dev);
// owners: also the owner groups per bucket (Note [Owner bands]); the live view's polls leave them out.
std::string timeline_json(Model& m, int dev, double t0, double t1, int buckets, bool owners = false);
// The allocator state after the events up to t_us, or, when events >= 0, after exactly that many events: a moment
// inside one microsecond (a peak whose free came in the same µs, Note [Moment events] in categories.cpp).
std::string state_json(const Model& m, int dev, double t_us, int64_t events = -1);
std::string line_stats_json(const Model& m, int dev, bool backward_on_caller = false);
// Note [Backward on the forward line]: the highest allocated while a backward ran, and the bytes backward made then,
// by forward line and module (null: no backward phase in the capture).
std::string backward_peak_json(const Model& m, int dev);
std::string stack_json(const Model& m, uint32_t id);
std::string markers_json(const Model& m, int dev);
std::string ooms_json(const Model& m);
// The max_count largest allocations overlapping [t0, t1]; owner ≥ 0: only those of that owner group.
std::string spans_json(const Model& m, int dev, double t0, double t1, size_t max_count, int owner = -1);
// Bytes live per line (innermost user frame) at a_us in `a` and b_us in `b` (b may be a).
std::string diff_json(const Model& a, int dev, double a_us, const Model& b, double b_us);
// Per step (ends ascending, µs): peak allocated inside it, allocated/reserved at its end, and bytes live per
// line at each end (Note [Step table]).
std::string step_table_json(const Model& m, int dev, const std::vector<double>& ends_us);
std::string devices_json(const Model& m);
// Memory labels (trace entries' user_metadata: a pickle's, or a capture's REC_USER_METADATA): per device and label,
// the allocations made under it (restated ones not counted), their bytes, and the bytes of those live at the peak.
std::string user_metadata_json(const Model& m);
std::string problems_json(const Model& m);
// Identity and integrity facts of the file: time origin, last time, REC_DEVICE names, REC_END, REC_LOST.
std::string file_info_json(const Model& m);
// Note [Snapshot extras]: allocator settings, unknown keys (raw), user metadata and compile contexts, host memory.
std::string extras_json(const Model& m);
// A device worth showing: it has events, a stated allocator state or an OOM (Note [Devices with no events]).
bool has_memory_data(const DeviceData& d);

// Events with time ≤ t_us (Infinity/NaN-safe).
size_t events_up_to(const DeviceData& d, double t_us);

}  // namespace gpumem
