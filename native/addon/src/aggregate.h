// Queries answered natively over a Model, each returned as one JSON document shaped like the
// TypeScript types in src/core/model/types.ts.
#pragma once
#include <string>

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
std::string devicesJson(const Model& m);
std::string problemsJson(const Model& m);

// Events with time ≤ tUs (Infinity/NaN-safe).
size_t eventsUpTo(const DeviceData& d, double tUs);

}  // namespace gpumem
