// Runs every model query a view can make, at the moments that stress the replay (before the first
// event, mid-trace, the end). Shared by the fuzz targets and the C++ tests.
#pragma once
#include <cmath>

#include "aggregate.h"
#include "export_pickle.h"

namespace gpumem {

inline void exerciseModel(Model& m) {
  summaryJson(m);
  oomsJson(m);
  for (auto& [idx, d] : m.devices) {
    double t0 = d.count() ? (double)d.t.front() : 0, t1 = d.count() ? (double)d.t.back() : 1;
    for (double t : {t0 - 1, (t0 + t1) / 2, t1, (double)INFINITY}) stateJson(m, idx, t);
    timelineJson(m, idx, t0, t1, 64);
    timelineJson(m, idx, t0 - 1, t1 + 1, 64, true);
    spansJson(m, idx, t0, t1, 50, 0);
    lineStatsJson(m, idx);
    spansJson(m, idx, t0, t1, 50);
    markersJson(m, idx);
    diffJson(m, idx, t0, m, t1);
    currentJson(m, idx);
    timeRangeJson(m, idx);
  }
  for (uint32_t s = 0; s < m.stacks.size() && s < 64; s++) stackJson(m, s);
  exportPickle(m, INFINITY);
}

}  // namespace gpumem
