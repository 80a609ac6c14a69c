// Allocator policies on the simulated device, for the reader: what-if questions on
// the allocator state at a moment (Note [What-if] in native/allocator/src/what_if.h) and the replay of
// a run's allocation stream under another policy and capacity (Note [Policy replay] in the .cpp).
//
// Addon API (ModelHandle, src/addon.cpp); each returns ONE JSON string of this shape, like every
// other ModelHandle query (parse it once in JS):
//   whatIf(device: number, tUs: number, q?: { policy?: Policy; capacityBytes?: number; requests?: number[] }): {
//     policy: Policy;  // default: the policy that made the data
//     policySource: 'capture-header' | 'pickle-segments' | 'pickle-settings' | 'assumed';
//     reservedBytes: number; emptyCacheReleasesBytes: number;
//     largestWithoutGrowthBytes: number;  // on the stream of the largest free block / default stream
//     requests: { bytes: number; outcome: 'from-cache' | 'grows' | 'oom'; growsByBytes: number }[];
//     // additions: dataPolicy (the data's own policy), capacityBytes, stream (of largestWithoutGrowth and
//     // requests), stateFrom: 'restored' (the recorded state) | 'replayed' (the run replayed under `policy`
//     // up to tUs, when its segment kind differs from the data's)
//   }
//   replay(device: number, policy: Policy, capacityBytes?: number): {
//     policy: Policy; capacityBytes: number; peakReservedBytes: number; peakAllocatedBytes: number; ratio: number;
//     peakAtUs: number;
//     emptyCacheAtMarkers: { tUs: number; name: string; releasesBytes: number }[];
//     oom: null | { tUs: number; requestedBytes: number; reservedBytes: number; allocatedBytes: number;
//                   cause: 'shortage' | 'fragmentation'; sentence: string };
//     // additions: events (replayed), startBlocks (live before the trace, allocated first),
//     // startRestored (the state before the trace was restored as it was instead)
//   }
//   type Policy = 'pytorch' | 'pytorch-expandable' | 'lens' | 'lens-no-trim';
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model.h"
#include "what_if.h"

namespace gpumem {

// The simulated device's memory when the data does not say (an H200-class "unknown").
constexpr uint64_t kUnknownCapacity = 192ull << 30;

struct DataPolicy {
  core::Policy policy;
  const char* source;  // "capture-header" | "pickle-segments" | "pickle-settings" | "assumed"
};
DataPolicy data_policy(const Model& m);
// The device's memory as the data records it (device samples, OOM records), else kUnknownCapacity.
uint64_t device_capacity(const DeviceData& d);
// Model segments as the allocator core reports them (DeviceAllocator::segments()).
std::vector<core::SegmentView> to_core_segments(const std::vector<SegmentData>& segs, int device);

struct WhatIfQuery {
  bool have_policy = false;
  core::Policy policy = core::Policy::kLens;
  uint64_t capacity = 0;  // 0: device_capacity
  std::vector<uint64_t> requests;
};
// Throws std::runtime_error (the message is for the user) when the state cannot be restored.
std::string what_if_json(const Model& m, int device, double t_us, const WhatIfQuery& q);

struct ReplayMarkerResult {
  int64_t t_us;
  std::string name;
  uint64_t releases;
};
struct ReplayOom {
  int64_t t_us = 0;
  uint64_t requested = 0, reserved = 0, allocated = 0;
  bool fragmentation = false;
  std::string sentence;
};
struct PolicyReplayResult {
  core::Policy policy = core::Policy::kLens;
  uint64_t capacity = 0, peak_reserved = 0, peak_allocated = 0, events = 0, start_blocks = 0;
  bool start_restored = false;  // the data's start state was restored (same segment kind as the policy)
  int64_t peak_at_us = 0;
  std::vector<ReplayMarkerResult> markers;
  bool have_oom = false;
  ReplayOom oom;
};
// capacity 0: device_capacity. Deterministic.
PolicyReplayResult replay_policy(const Model& m, int device, core::Policy policy, uint64_t capacity);
std::string replay_json(const PolicyReplayResult& r);

}  // namespace gpumem
