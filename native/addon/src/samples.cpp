// samples.cpp — which sample a figure or a moment's device used is read from (samples.h).
#include "samples.h"

#include <algorithm>
#include <limits>

#include "aggregate.h"
#include "gpumem_format.h"

namespace gpumem {

size_t figures_after_events(const Model& m, const DeviceData& d) {
  if (!m.events_off || d.count() == 0) return d.figures.size();
  return std::lower_bound(d.figures.begin(), d.figures.end(), m.events_off_us,
                          [](const FigureSample& f, int64_t t) { return f.t_us < t; }) -
         d.figures.begin();
}

size_t first_figure_read(const Model& m, const DeviceData& d) {
  return d.figures_only() ? 0 : figures_after_events(m, d);
}

int64_t figures_from_us(const Model& m, const DeviceData& d) {
  if (d.figures_only()) return std::numeric_limits<int64_t>::min();
  if (figures_after_events(m, d) < d.figures.size()) return m.events_off_us;
  return std::numeric_limits<int64_t>::max();
}

const FigureSample* figure_at(const Model& m, const DeviceData& d, double t_us, double after_us) {
  const size_t first = first_figure_read(m, d);
  auto it = std::upper_bound(d.figures.begin() + (ptrdiff_t)first, d.figures.end(), t_us,
                             [](double t, const FigureSample& f) { return t < (double)f.t_us; });
  if (it == d.figures.begin() + (ptrdiff_t)first) return nullptr;
  const FigureSample& f = *std::prev(it);
  return (double)f.t_us > after_us ? &f : nullptr;
}

// Note [Device samples of a moment]: device used (NVML's figure) and "not from the allocator" (device used −
// reserved) describe one moment (the peak, a step end, now), so both come from ONE device sample, with the reserved
// bytes of that sample's own moment: what the events say at its time, or, where PyTorch's figures are read (figures
// only, after the events: Note [Figures from stats] in model.h), the figure sample the sampler read in the same
// pass (it writes REC_DEVICE_SAMPLE, then REC_STATS). A sample whose device used is below its own reserved read the
// two at different instants while memory moved, and describes no moment: it is never picked. Under cudaMallocAsync
// the pool grows and shrinks between the two reads of one pass (test/fixtures/conformance/figures_async-auto, a
// cudnn.benchmark ConvNeXt on an H200: 46 of its 169 passes read device used below reserved, by up to 112 GiB).
// Which sample:
//  - events: reserved changes only at segment events, and a failed growth (an OOM) maps and gives back pages with no
//    event at all, so a moment's reserved holds from its last segment event or OOM up to the next one (or up to the
//    events' stop); the sample of the moment is the latest of that stretch at or before the moment, else its earliest
//    after it (a stretch that starts at an OOM includes a sample stamped in the OOM's microsecond: the recorder's
//    sample taken once the growth was undone, Note [Settled samples] in native/allocator/src/device_sampler.cc). A
//    stretch that ends at an OOM ends before the failed call began (at the event before the OOM record), since a
//    sample read during the growth counts its pages.
//  - figures: the moment's reserved is the figure sample at or before it; the sample of the moment is the device
//    sample of that figure's pass.
//  - only when the moment has no such sample does another stand in, and for "not from the allocator" alone (what
//    lies outside the allocator changes far less often than reserved does): the latest before the moment, else the
//    earliest after, never one taken while a failed call was running (between the event before an OOM and the OOM).
//    Device used itself is not shown for the moment then (DeviceReading::of_moment false): the stand-in's reading
//    belongs to another moment, and next to the moment's reserved it read below it (the peak of
//    test/fixtures/conformance/alloc_conf-auto: 6.9 GiB used beside 7.3 GiB reserved, the sample from before a
//    growth). Why a stand-in at all: an OOM script on an H100 had its peak right after the OOM, and the latest sample
//    before the peak had been read while the failed 90 % growth had ~55 GiB mapped; "not from the allocator" said
//    54.8 GiB where NVML at the end said about 1 GiB.
MomentSamples::MomentSamples(const Model& m, const DeviceData& d)
    : m_(m), d_(d), figures_from_(figures_from_us(m, d)), first_figure_(first_figure_read(m, d)) {
  for (size_t i = 0; i < d.count(); i++) {
    const uint8_t a = d.action[i];
    if (a == ACT_SEGMENT_ALLOC || a == ACT_SEGMENT_FREE || a == ACT_SEGMENT_MAP || a == ACT_SEGMENT_UNMAP ||
        a == ACT_OOM)
      changes_.push_back(i);
    if (a == ACT_OOM) failed_.push_back({i ? d.t[i - 1] : std::numeric_limits<int64_t>::min(), d.t[i]});
  }
  by_time_.resize(d.samples.size());
  for (size_t k = 0; k < by_time_.size(); k++) by_time_[k] = k;
  std::stable_sort(by_time_.begin(), by_time_.end(),
                   [&](size_t a, size_t b) { return d.samples[a].t_us < d.samples[b].t_us; });
  reserved_.assign(d.samples.size(), 0);
  consistent_.assign(d.samples.size(), 0);
  for (size_t p = 0; p < by_time_.size(); p++) {
    const size_t k = by_time_[p];
    const SampleData& s = d.samples[k];
    int64_t r = 0;
    bool known = false;
    if (s.t_us < figures_from_) {
      const size_t n = events_up_to(d, (double)s.t_us);
      r = n ? d.reserved[n - 1] : d.start_reserved, known = true;
    } else {
      // The figure of this sample's pass: the first at or after it, unless the next device sample came first (a
      // sample of its own, as after an OOM, has no figure).
      auto f = std::lower_bound(d.figures.begin() + (ptrdiff_t)first_figure_, d.figures.end(), s.t_us,
                                [](const FigureSample& x, int64_t t) { return x.t_us < t; });
      const bool next_first = p + 1 < by_time_.size() && f != d.figures.end() &&
                              d.samples[by_time_[p + 1]].t_us <= f->t_us && d.samples[by_time_[p + 1]].t_us > s.t_us;
      if (f != d.figures.end() && !next_first) r = f->reserved, known = true;
    }
    reserved_[k] = r;
    consistent_[k] = known && r >= 0 && s.used >= (uint64_t)r;
  }
}

template <class Ok>
const SampleData* MomentSamples::nearest(double t_us, Ok ok) const {
  auto it = std::upper_bound(by_time_.begin(), by_time_.end(), t_us,
                             [&](double t, size_t k) { return t < (double)d_.samples[k].t_us; });
  for (auto b = it; b != by_time_.begin();) {
    --b;
    if (consistent_[*b] && ok(d_.samples[*b])) return &d_.samples[*b];
  }
  for (auto a = it; a != by_time_.end(); ++a)
    if (consistent_[*a] && ok(d_.samples[*a])) return &d_.samples[*a];
  return nullptr;
}

bool MomentSamples::during_failed_call(int64_t t) const {
  for (const auto& [begin, end] : failed_)
    if (t > begin && t < end) return true;
  return false;
}

DeviceReading MomentSamples::reading(const SampleData* s, bool of_moment) const {
  DeviceReading r;
  if (!s) return r;
  r.sample = s;
  r.reserved = reserved_[(size_t)(s - d_.samples.data())];
  r.of_moment = of_moment;
  return r;
}

DeviceReading MomentSamples::pick(size_t after, double t_us) const {
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min(), kMax = std::numeric_limits<int64_t>::max();
  const auto hi = std::lower_bound(changes_.begin(), changes_.end(), after);
  int64_t from = kMin;  // the stretch's first time, inclusive
  if (hi != changes_.begin()) {
    const size_t lo = *(hi - 1);
    from = d_.action[lo] == ACT_OOM ? d_.t[lo] : d_.t[lo] + 1;
  }
  int64_t to = kMax;  // exclusive
  if (hi != changes_.end()) to = d_.action[*hi] == ACT_OOM ? (*hi ? d_.t[*hi - 1] : kMin) : d_.t[*hi];
  to = std::min(to, figures_from_);  // after the events' stop reserved is PyTorch's figure, another stretch
  if (const SampleData* in = nearest(t_us, [&](const SampleData& s) { return s.t_us >= from && s.t_us < to; }))
    return reading(in, true);
  return reading(nearest(t_us, [&](const SampleData& s) { return !during_failed_call(s.t_us); }), false);
}

DeviceReading MomentSamples::pick_figure(double t_us) const {
  if (const FigureSample* f = figure_at(m_, d_, t_us)) {
    // The device sample of f's pass: the latest at or before it whose own figure is f.
    const SampleData* own = nullptr;
    auto it = std::upper_bound(by_time_.begin(), by_time_.end(), f->t_us,
                               [&](int64_t t, size_t k) { return t < d_.samples[k].t_us; });
    if (it != by_time_.begin()) {
      const size_t k = *std::prev(it);
      if (consistent_[k] && d_.samples[k].t_us >= figures_from_ && reserved_[k] == f->reserved) {
        // the same pass: no other figure between the sample and f
        auto g = std::lower_bound(d_.figures.begin() + (ptrdiff_t)first_figure_, d_.figures.end(), d_.samples[k].t_us,
                                  [](const FigureSample& x, int64_t t) { return x.t_us < t; });
        if (g != d_.figures.end() && &*g == f) own = &d_.samples[k];
      }
    }
    if (own) return reading(own, true);
  }
  return reading(nearest(t_us, [&](const SampleData& s) { return !during_failed_call(s.t_us); }), false);
}

}  // namespace gpumem
