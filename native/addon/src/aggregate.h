// Queries answered natively over a Model, each returned as one JSON document shaped like the
// TypeScript types in src/core/model/types.ts.
#pragma once
#include <string>
#include <vector>

#include "model.h"

namespace gpumem {

std::string summaryJson(const Model& m);
std::string timeRangeJson(const Model& m, int dev);
std::string currentJson(const Model& m, int dev);
// owners: also the owner groups per bucket (Note [Owner bands]); the live view's polls leave them out.
std::string timelineJson(Model& m, int dev, double t0, double t1, int buckets, bool owners = false);
std::string stateJson(const Model& m, int dev, double tUs);
std::string lineStatsJson(const Model& m, int dev);
std::string stackJson(const Model& m, uint32_t id);
std::string markersJson(const Model& m, int dev);
std::string oomsJson(const Model& m);
// The maxCount largest allocations overlapping [t0, t1]; owner ≥ 0: only those of that owner group.
std::string spansJson(const Model& m, int dev, double t0, double t1, size_t maxCount, int owner = -1);
// Bytes live per line (innermost user frame) at aUs in `a` and bUs in `b` (b may be a).
std::string diffJson(const Model& a, int dev, double aUs, const Model& b, double bUs);
// Per step (ends ascending, µs): peak allocated inside it, allocated/reserved at its end, and bytes live per
// line at each end (Note [Step table]).
std::string stepTableJson(const Model& m, int dev, const std::vector<double>& endsUs);
std::string devicesJson(const Model& m);
std::string problemsJson(const Model& m);
// Identity and integrity facts of the file: time origin, last time, REC_DEVICE names, REC_END, REC_LOST.
std::string fileInfoJson(const Model& m);
// A device worth showing: it has events, a stated allocator state or an OOM (Note [Devices with no events]).
bool hasMemoryData(const DeviceData& d);

// Events with time ≤ tUs (Infinity/NaN-safe).
size_t eventsUpTo(const DeviceData& d, double tUs);

}  // namespace gpumem
