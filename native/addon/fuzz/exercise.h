// Runs every model query a view can make, at the moments that stress the replay (before the first
// event, mid-trace, the end). Shared by the fuzz targets and the C++ tests.
#pragma once
#include <cmath>

#include "aggregate.h"
#include "export_pickle.h"
#include "policy_replay.h"

namespace gpumem {

inline void exercise_model(Model& m) {
  summary_json(m);
  ooms_json(m);
  file_info_json(m);
  devices_json(m);
  problems_json(m);
  for (auto& [idx, d] : m.devices) {
    double t0 = d.count() ? (double)d.t.front() : 0, t1 = d.count() ? (double)d.t.back() : 1;
    for (double t : {t0 - 1, (t0 + t1) / 2, t1, (double)INFINITY}) state_json(m, idx, t);
    timeline_json(m, idx, t0, t1, 64);
    timeline_json(m, idx, t0 - 1, t1 + 1, 64, true);
    spans_json(m, idx, t0, t1, 50, 0);
    line_stats_json(m, idx);
    spans_json(m, idx, t0, t1, 50);
    markers_json(m, idx);
    diff_json(m, idx, t0, m, t1);
    current_json(m, idx);
    time_range_json(m, idx);
    // What-if and replay (policy_replay.cpp) on a small device: a state or trace they cannot use is a
    // clear error, never a crash. The capacity keeps expandable page tables small for the fuzzers.
    for (core::Policy p : {core::Policy::kPytorch, core::Policy::kLens}) {
      try {
        replay_json(replay_policy(m, idx, p, 1ull << 30));
      } catch (const std::runtime_error&) {}
      WhatIfQuery q;
      q.have_policy = true, q.policy = p, q.capacity = 1ull << 30, q.requests = {4096, 64ull << 20, 1ull << 62};
      try {
        what_if_json(m, idx, (t0 + t1) / 2, q);
      } catch (const std::runtime_error&) {}
    }
  }
  for (uint32_t s = 0; s < m.stacks.size() && s < 64; s++) stack_json(m, s);
  export_pickle(m, INFINITY);
}

}  // namespace gpumem
