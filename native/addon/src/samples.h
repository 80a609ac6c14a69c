// Which of a device's samples a figure is read from, and which device sample describes a moment: the figures of
// PyTorch's stats (Notes [Figures from stats] and [Figures after the events] in model.h) and the device used of
// NVML's samples (Note [Device samples of a moment] in samples.cpp).
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "model.h"

namespace gpumem {

// Note [Figures after the events]: the first of d's figure samples read after its events stopped, or
// d.figures.size() when the reader reads none (no MARK_EVENTS_OFF, a device without events, no sample at or after
// the marker).
size_t figures_after_events(const Model& m, const DeviceData& d);
// The first of d's figure samples any figure is read from: all of them for a device of figures only (Note [Figures
// from stats]), those from the events' stop on otherwise, none (d.figures.size()) else.
size_t first_figure_read(const Model& m, const DeviceData& d);
// From this time (µs) on, d's allocated and reserved are PyTorch's figures at each sample rather than its events':
// INT64_MIN for a device of figures only, the events' stop where samples follow it, INT64_MAX otherwise.
int64_t figures_from_us(const Model& m, const DeviceData& d);
// The latest figure sample d's figures are read from with after_us < t ≤ t_us; null when there is none.
const FigureSample* figure_at(const Model& m, const DeviceData& d, double t_us, double after_us = -INFINITY);

// One device sample and the reserved bytes of its own moment (what the events say at its time, or the figures the
// sampler read with it), so that device used and reserved always come from one sample.
struct DeviceReading {
  const SampleData* sample = nullptr;
  int64_t reserved = 0;
  // the sample belongs to the moment asked about: reserved then is the moment's (device used may be shown with it)
  bool of_moment = false;
  uint64_t outside() const { return sample->used - (uint64_t)reserved; }  // device used − reserved (never negative)
};

// Note [Device samples of a moment] (samples.cpp).
class MomentSamples {
 public:
  MomentSamples(const Model& m, const DeviceData& d);
  // The moment after events [0, after) at t_us (before the figures take over: figures_from_us).
  DeviceReading pick(size_t after, double t_us) const;
  // The moment of a figure sample (PyTorch's figures at t_us: a device of figures only, or after the events).
  DeviceReading pick_figure(double t_us) const;

 private:
  bool reserved_at(size_t k, int64_t* reserved) const;  // k: index into d.samples
  template <class Ok>
  const SampleData* nearest(double t_us, Ok ok) const;
  bool during_failed_call(int64_t t) const;
  DeviceReading reading(const SampleData* s, bool of_moment) const;

  const Model& m_;
  const DeviceData& d_;
  int64_t figures_from_;
  size_t first_figure_;
  std::vector<size_t> changes_;                      // event indices that change reserved, and OOMs
  std::vector<std::pair<int64_t, int64_t>> failed_;  // (event before an OOM, the OOM): open intervals
  std::vector<size_t> by_time_;                      // sample indices in time order
  std::vector<int64_t> reserved_;                    // per sample (by index): reserved at its moment
  std::vector<uint8_t> consistent_;                  // per sample: its reserved is known and used ≥ it
};

}  // namespace gpumem
