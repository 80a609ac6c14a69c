#include "aggregate.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <unordered_map>

#include "json.h"
#include "replay.h"
#include "samples.h"

namespace gpumem {

namespace {

const char* const kMarkerKinds[] = {"user", "range_begin", "range_end", "empty_cache", "snapshot",
                                    "oom",  "notice",      "step",      "metadata"};
const char* const kPoolNames[] = {"large", "small", "private"};
constexpr const char* kNoUserFrame = "<no user frame>";

// A line key: (file string id, line); file id UINT32_MAX = the "<no user frame>" row.
using LineKey = std::pair<uint32_t, uint32_t>;
constexpr LineKey kNoUserLine{UINT32_MAX, 0};

LineKey self_line(const Model& m, uint32_t stack_id) {
  const StackData& s = m.stacks[stack_id];
  if (s.user_frame == UINT32_MAX) return kNoUserLine;
  const FrameData& f = m.frames[s.user_frame];
  return {f.file, f.line};
}

// The backward() caller's line of a stack made while an autograd node ran; else its own line.
LineKey caller_line(const Model& m, uint32_t stack_id) {
  const StackData& s = m.stacks[stack_id];
  if (s.separator == UINT32_MAX) return self_line(m, stack_id);
  if (s.caller_frame == UINT32_MAX) return kNoUserLine;
  const FrameData& f = m.frames[s.caller_frame];
  return {f.file, f.line};
}

std::string_view line_file(const Model& m, LineKey k) {
  // Both branches as string_view: a `const char*`/`std::string` conditional would yield a temporary.
  return k.first == UINT32_MAX ? std::string_view(kNoUserFrame) : std::string_view(m.strings[k.first]);
}

bool live_at_peak(const DeviceData& d, size_t i) {
  if (d.peak_index < 0 || (int64_t)i > d.peak_index) return false;
  return d.link[i] == kNoLink || (int64_t)d.link[i] > d.peak_index;
}

const DeviceData* dev(const Model& m, int index) {
  auto it = m.devices.find(index);
  return it == m.devices.end() ? nullptr : &it->second;
}

int64_t allocated_before(const DeviceData& d, size_t n) { return n ? d.allocated[n - 1] : d.start_allocated; }
int64_t reserved_before(const DeviceData& d, size_t n) { return n ? d.reserved[n - 1] : d.start_reserved; }

void write_segments(json::Writer& j, const Model& m, const std::vector<SegmentData>& segs, int device) {
  (void)m;
  j.open('[');
  for (const auto& s : segs) {
    j.open('{').kv("device", device).kvu("address", s.addr).kvu("totalSize", s.size).kvu("stream", s.stream);
    j.kvs("pool", kPoolNames[s.pool]).kvb("expandable", s.expandable).kv("stackId", s.stack);
    if (s.pool_id0 || s.pool_id1) j.key("poolId").open('[').item().unum(s.pool_id0).item().unum(s.pool_id1).close(']');
    j.key("blocks").open('[');
    for (const auto& b : s.blocks) {
      j.open('{').kvu("address", b.addr).kvu("size", b.size).kvu("requestedSize", b.requested);
      j.kvs("state", kBlockStateNames[b.state]).kv("stackId", b.stack);
      if (b.untraced) j.kvb("untraced", true);  // Note [Untraced blocks]
      j.close('}');
    }
    j.close(']').close('}');
  }
  j.close(']');
}

// Final allocator state: what the file states (pickle segments), else the replay to the end.
std::vector<SegmentData> final_state(const DeviceData& d) { return state_after(d, d.count()); }

}  // namespace

// double → int64 without undefined behaviour for out-of-range values.
static int64_t clamp_to_i64(double v) {
  if (std::isnan(v)) return 0;
  if (v >= 9.2e18) return std::numeric_limits<int64_t>::max();
  if (v <= -9.2e18) return std::numeric_limits<int64_t>::min();
  return (int64_t)v;
}

size_t events_up_to(const DeviceData& d, double t_us) {
  if (std::isnan(t_us) || t_us >= (double)std::numeric_limits<int64_t>::max()) return d.count();
  if (t_us < (double)std::numeric_limits<int64_t>::min()) return 0;
  int64_t t = clamp_to_i64(std::floor(t_us));
  return std::upper_bound(d.t.begin(), d.t.end(), t) - d.t.begin();
}

// Note [Devices with no events]: a device the process never allocated on still gets samples (the
// recorder samples every device it announced) and may carry process-wide markers; it has nothing to show
// and is left out of devices(), summaries and panels. Its markers stay reachable (markers_json).
bool has_memory_data(const DeviceData& d) {
  return d.count() > 0 || !d.final_segments.empty() || !d.ooms.empty() || d.figures_only();
}

std::string devices_json(const Model& m) {
  json::Writer j;
  j.open('[');
  for (const auto& [idx, d] : m.devices)
    if (has_memory_data(d)) j.item().num(idx);
  return j.close(']').s;
}

std::string problems_json(const Model& m) {
  json::Writer j;
  j.open('[');
  for (const auto& p : m.problems)
    j.open('{').kvu("offset", p.offset).kvs("message", p.message).kvs("kind", p.kind).close('}');
  return j.close(']').s;
}

std::string file_info_json(const Model& m) {
  json::Writer j;
  j.open('{');
  // Note [Time origin]: times are shown as seconds since the process's first allocator event (any device).
  bool have_origin = false;
  int64_t origin = 0;
  for (const auto& [idx, d] : m.devices)
    if (d.count() && (!have_origin || d.t.front() < origin)) origin = d.t.front(), have_origin = true;
  // A file with no event at all (figures only: Note [Figures from stats]) counts from the first sample that saw memory
  // allocated, the nearest it has to its first allocation.
  const bool from_events = have_origin;
  for (const auto& [idx, d] : m.devices) {
    if (from_events || !d.figures_only()) continue;
    for (const FigureSample& f : d.figures)
      if (f.allocated > 0 || f.reserved > 0) {
        if (!have_origin || f.t_us < origin) origin = f.t_us, have_origin = true;
        break;
      }
  }
  j.key("originUs");
  if (have_origin)
    j.num(origin);
  else
    j.raw("null");
  int64_t last = m.last_us;
  bool have_last = m.have_last_us;
  for (const auto& [idx, d] : m.devices)
    if (d.count() && (!have_last || d.t.back() > last)) last = d.t.back(), have_last = true;
  j.key("lastUs");
  if (have_last)
    j.num(last);
  else
    j.raw("null");
  j.key("devices").open('[');
  for (const auto& [idx, id] : m.device_ids) {
    j.open('{').kv("index", idx).kvs("name", id.name).kvu("totalBytes", id.total_bytes);
    if (!id.pci_bus_id.empty()) j.kvs("pciBusId", id.pci_bus_id);
    j.close('}');
  }
  j.close(']').key("recordDevices").open('[');
  for (const auto& [idx, d] : m.devices) j.item().num(idx);
  j.close(']').key("end");
  if (m.end.seen) {
    j.open('{')
        .kv("tUs", m.end.t_us)
        .kv("exitCode", m.end.exit_code)
        .kvu("reason", m.end.reason)
        .kvs("message", m.end.message)
        .close('}');
  } else {
    j.raw("null");
  }
  j.kvu("lostEvents", m.lost_events).key("firstLostUs");
  if (m.lost_events)
    j.num(m.first_lost_us);
  else
    j.raw("null");
  // Note [Figures after the events]: from when no event is recorded one by one (null: they never stopped).
  j.key("eventsOffUs");
  if (m.events_off)
    j.num(m.events_off_us);
  else
    j.raw("null");
  // Budgeted captures (FORMAT.md §5): the compacted ranges; full detail after the last one.
  j.key("aggregated").open('[');
  for (const auto& a : m.aggregated)
    j.open('{')
        .kv("fromUs", a.from_us)
        .kv("toUs", a.to_us)
        .kvu("events", a.events)
        .kvu("bytes", a.bytes)
        .kvu("budgetBytes", a.budget_bytes)
        .kvu("restated", a.restated)
        .kvu("peaks", a.peaks)
        .close('}');
  j.close(']');
  return j.close('}').s;
}

std::string summary_json(const Model& m) {
  json::Writer j;
  j.open('{').kvs("format", m.format).key("devices").open('[');
  std::map<LineKey, uint64_t> top;
  for (const auto& [idx, d] : m.devices) {
    if (!has_memory_data(d)) continue;  // Note [Devices with no events]
    std::vector<SegmentData> segs = final_state(d);
    FragFigures f = fragmentation(segs);
    int64_t peak_t = d.peak_index >= 0 ? d.t[d.peak_index] : (d.count() ? d.t[0] : 0);
    int64_t peak = d.peak_allocated;
    // The highest peak PyTorch reported, by the first sample that said so: of figures only, every sample's (Note
    // [Figures from stats]); after the events stopped, a higher one than the events' (a tie keeps the events' own
    // peak and its exact time: Note [Figures after the events]).
    int64_t peak_reserved = d.peak_reserved;
    if (d.figures_only()) peak = -1, peak_reserved = 0;
    const size_t first = first_figure_read(m, d);
    for (size_t i = first; i < d.figures.size(); i++) {
      if (d.figures[i].peak_allocated > peak) peak = d.figures[i].peak_allocated, peak_t = d.figures[i].t_us;
      peak_reserved = std::max(peak_reserved, d.figures[i].peak_reserved);
    }
    j.open('{').kv("device", idx);
    if (first < d.figures.size()) {
      // Note [Figures at the end]: the end lies where PyTorch's figures are read (figures only, after the events):
      // allocated and reserved as its last sample gave them, at that sample's time; the allocator's segments and
      // blocks then are not known (null, never the last recorded state's, nor zeros).
      const FigureSample& last = d.figures.back();
      j.kv("reserved_bytes", last.reserved).kv("allocated_bytes", last.allocated).kv("end_sample_us", last.t_us);
      j.key("segments").raw("null").key("blocks").raw("null").key("allocated_blocks").raw("null");
      j.key("largest_free_block_bytes").raw("null");
    } else {
      j.kvu("reserved_bytes", f.reserved).kvu("allocated_bytes", f.allocated);
      j.kvu("segments", segs.size()).kvu("blocks", f.blocks).kvu("allocated_blocks", f.allocated_blocks);
      j.kvu("largest_free_block_bytes", f.largest_free);
      peak_reserved = std::max<int64_t>(peak_reserved, (int64_t)f.reserved);  // a trace may begin after a growth
    }
    j.kvu("events", d.count()).kv("peak_allocated_bytes", peak).kv("peak_reserved_bytes", peak_reserved);
    j.kv("peak_at_time_us", peak_t).close('}');
    for (size_t i = 0; i < d.count(); i++)
      if (d.action[i] == ACT_ALLOC && live_at_peak(d, i)) top[self_line(m, d.stack[i])] += d.size[i];
  }
  j.close(']').key("top_lines").open('[');
  std::vector<std::pair<LineKey, uint64_t>> rows(top.begin(), top.end());
  std::sort(rows.begin(), rows.end(), [&](const auto& a, const auto& b) {
    if (a.second != b.second) return a.second > b.second;
    std::string_view fa = line_file(m, a.first), fb = line_file(m, b.first);
    if (fa != fb) return fa < fb;
    return a.first.second < b.first.second;
  });
  for (const auto& [k, bytes] : rows)
    j.open('{').kvs("file", line_file(m, k)).kv("line", k.second).kvu("bytes_at_peak", bytes).close('}');
  return j.close(']').close('}').s;
}

std::string user_metadata_json(const Model& m) {
  json::Writer j;
  j.open('[');
  for (const auto& [idx, d] : m.devices) {
    if (d.context_and_metadata.empty()) continue;
    struct Row {
      uint64_t allocations = 0, allocated = 0, at_peak = 0;
    };
    std::map<uint32_t, Row> rows;  // label string id → figures
    for (const auto& [i, ids] : d.context_and_metadata) {
      if (ids.second == 0 || i >= d.count() || d.action[i] != ACT_ALLOC) continue;
      Row& r = rows[ids.second];
      if (!std::binary_search(d.restated.begin(), d.restated.end(), i)) r.allocations++, r.allocated += d.size[i];
      if (live_at_peak(d, i)) r.at_peak += d.size[i];
    }
    std::vector<std::pair<uint32_t, Row>> sorted(rows.begin(), rows.end());
    std::sort(sorted.begin(), sorted.end(), [&](const auto& a, const auto& b) {
      if (a.second.at_peak != b.second.at_peak) return a.second.at_peak > b.second.at_peak;
      return m.strings[a.first] < m.strings[b.first];
    });
    for (const auto& [label, r] : sorted) {
      j.open('{').kv("device", idx).kvs("label", m.strings[label]).kvu("allocations", r.allocations);
      j.kvu("allocatedBytes", r.allocated).kvu("bytesAtPeak", r.at_peak).close('}');
    }
  }
  return j.close(']').s;
}

// Note [Snapshot extras]: what a snapshot carries beyond events and segments (model.h), as one document:
// allocator_settings as JSON, the keys this reader does not know (raw), per device the user_metadata values and
// compile contexts with the allocations they tagged, and pinned host memory (Note [Host memory]).
std::string extras_json(const Model& m) {
  json::Writer j;
  j.open('{').key("allocatorSettings").raw(m.allocator_settings_json.empty() ? "null" : m.allocator_settings_json);
  j.key("unknownKeys").open('[');
  for (const auto& u : m.unknown_keys)
    j.open('{').kvs("where", u.where).kvs("key", u.key).kvu("count", u.count).kvs("raw", u.raw).close('}');
  j.close(']').key("devices").open('[');
  for (const auto& [idx, d] : m.devices) {
    if (!has_memory_data(d)) continue;
    // value string id → (allocations, bytes, first, last time), for user_metadata and compile_context
    struct Tagged {
      uint64_t allocs = 0, bytes = 0;
      int64_t first = 0, last = 0;
    };
    std::map<uint32_t, Tagged> metadata, contexts;
    for (const auto& [i, ids] : d.context_and_metadata) {
      if (i >= d.count() || d.action[i] != ACT_ALLOC) continue;
      // (C++17: a lambda cannot capture structured bindings, so it is handed the time and size)
      auto add = [](std::map<uint32_t, Tagged>& to, uint32_t id, int64_t t_us, uint64_t size) {
        Tagged& t = to[id];
        if (t.allocs == 0 || t_us < t.first) t.first = t_us;
        if (t.allocs == 0 || t_us > t.last) t.last = t_us;
        t.allocs++, t.bytes += size;
      };
      if (ids.second) add(metadata, ids.second, d.t[i], d.size[i]);
      if (ids.first && m.strings[ids.first] != "N/A") add(contexts, ids.first, d.t[i], d.size[i]);
    }
    auto write = [&](const char* key, const std::map<uint32_t, Tagged>& rows) {
      std::vector<std::pair<uint32_t, Tagged>> sorted(rows.begin(), rows.end());
      std::sort(sorted.begin(), sorted.end(),
                [](const auto& a, const auto& b) { return a.second.first < b.second.first; });
      j.key(key).open('[');
      for (const auto& [id, t] : sorted)
        j.open('{')
            .kvs("value", m.strings[id])
            .kvu("allocs", t.allocs)
            .kvu("bytes", t.bytes)
            .kv("firstUs", t.first)
            .kv("lastUs", t.last)
            .close('}');
      j.close(']');
    };
    j.open('{').kv("device", idx);
    write("userMetadata", metadata);
    write("compileContexts", contexts);
    j.close('}');
  }
  j.close(']').key("host");
  if (!m.has_host) return j.raw("null").close('}').s;
  const DeviceData& h = m.host;
  int64_t peak_t = h.peak_index >= 0 ? h.t[h.peak_index] : (h.count() ? h.t[0] : 0);
  j.open('{').kvu("events", h.count()).kv("peakAllocatedBytes", h.peak_allocated).kv("peakAtTimeUs", peak_t);
  j.kv("startAllocatedBytes", h.start_allocated).kv("peakReservedBytes", h.peak_reserved);
  if (h.count()) j.kv("t0Us", h.t.front()).kv("t1Us", h.t.back());
  j.key("segments");
  write_segments(j, m, h.final_segments, -1);
  return j.close('}').close('}').s;
}

std::string time_range_json(const Model& m, int index) {
  const DeviceData* d = dev(m, index);
  int64_t t0 = 0, t1 = 0;
  if (d && d->count()) {
    t0 = d->t.front();
    t1 = d->t.back();
  }
  if (d) {
    // Markers and samples extend the range (a capture may hold samples before its first event).
    for (const auto& mk : d->markers) {
      if (!d->count() && t0 == 0 && t1 == 0) t0 = t1 = mk.t_us;
      t0 = std::min(t0, mk.t_us), t1 = std::max(t1, mk.t_us);
    }
    for (const auto& s : d->samples) {
      if (!d->count() && t0 == 0 && t1 == 0) t0 = t1 = s.t_us;
      t0 = std::min(t0, s.t_us), t1 = std::max(t1, s.t_us);
    }
    // The samples figures are read from (Notes [Figures from stats], [Figures after the events]).
    for (size_t i = first_figure_read(m, *d); i < d->figures.size(); i++) {
      const int64_t t = d->figures[i].t_us;
      if (t0 == 0 && t1 == 0) t0 = t1 = t;
      t0 = std::min(t0, t), t1 = std::max(t1, t);
    }
  }
  json::Writer j;
  return j.open('{').kv("t0Us", t0).kv("t1Us", t1).close('}').s;
}

std::string current_json(const Model& m, int index) {
  const DeviceData* d = dev(m, index);
  json::Writer j;
  j.open('{');
  if (!d)
    return j.kv("allocatedBytes", 0)
        .kv("reservedBytes", 0)
        .kv("peakAllocatedBytes", 0)
        .kv("peakReservedBytes", 0)
        .kv("timeUs", 0)
        .close('}')
        .s;
  size_t n = d->count();
  int64_t t_last = n ? d->t.back() : 0;
  if (d->figures_only()) {  // Note [Figures from stats]: PyTorch's figures as the last sample gave them
    const FigureSample& f = d->figures.back();
    j.kv("allocatedBytes", f.allocated).kv("reservedBytes", f.reserved);
    j.kv("peakAllocatedBytes", f.peak_allocated).kv("peakReservedBytes", f.peak_reserved);
    t_last = f.t_us;
  } else if (size_t after = figures_after_events(m, *d); after < d->figures.size()) {
    // Note [Figures after the events]: now is the last sample's; the peaks are the higher of the events' and the
    // samples' since the events stopped.
    const FigureSample& f = d->figures.back();
    int64_t peak_a = d->peak_allocated, peak_r = d->peak_reserved;
    for (size_t i = after; i < d->figures.size(); i++)
      peak_a = std::max(peak_a, d->figures[i].peak_allocated), peak_r = std::max(peak_r, d->figures[i].peak_reserved);
    j.kv("allocatedBytes", f.allocated).kv("reservedBytes", f.reserved);
    j.kv("peakAllocatedBytes", peak_a).kv("peakReservedBytes", peak_r);
    t_last = f.t_us;
  } else {
    j.kv("allocatedBytes", allocated_before(*d, n)).kv("reservedBytes", reserved_before(*d, n));
    j.kv("peakAllocatedBytes", d->peak_allocated).kv("peakReservedBytes", d->peak_reserved);
  }
  if (!d->samples.empty()) {
    // Now's device used with its own reserved (Note [Device samples of a moment] in samples.cpp): the latest sample
    // of the current stretch, or of the last figure's pass; device used only where that sample is of now.
    const MomentSamples moment(m, *d);
    const bool by_figures = d->figures_only() || figures_after_events(m, *d) < d->figures.size();
    const DeviceReading dr = by_figures ? moment.pick_figure(INFINITY) : moment.pick(n, INFINITY);
    if (dr.sample) {
      if (dr.of_moment) j.kvu("deviceUsedBytes", dr.sample->used);
      j.key("deviceSample").open('{').kv("timeUs", dr.sample->t_us).kvu("usedBytes", dr.sample->used);
      j.kv("reservedBytes", dr.reserved).close('}');
    }
    j.kvu("deviceTotalBytes", d->samples.back().total);
    for (const SampleData& s : d->samples) t_last = std::max(t_last, s.t_us);
  }
  return j.kv("timeUs", t_last).close('}').s;
}

namespace {

void build_pyramid(const std::vector<int64_t>& base, Pyramid& p) {
  if (p.built_for == base.size() && !p.mins.empty()) return;
  p.mins.clear();
  p.maxs.clear();
  const std::vector<int64_t>* lmin = &base;
  const std::vector<int64_t>* lmax = &base;
  while (lmin->size() > 1) {
    size_t n = (lmin->size() + 7) / 8;
    // Appended, not zero-filled first; the first level of a 4.6 M-event series is 4.6 MB a vector, so it is
    // advised as huge pages like the columns (Note [Huge columns] in model.h).
    std::vector<int64_t> mn, mx;
    mn.reserve(n), mx.reserve(n);
    advise_huge(mn.data(), n * sizeof(int64_t)), advise_huge(mx.data(), n * sizeof(int64_t));
    for (size_t k = 0; k < n; k++) {
      size_t a = k * 8, b = std::min(a + 8, lmin->size());
      int64_t lo = (*lmin)[a], hi = (*lmax)[a];
      for (size_t i = a + 1; i < b; i++) lo = std::min(lo, (*lmin)[i]), hi = std::max(hi, (*lmax)[i]);
      mn.push_back(lo), mx.push_back(hi);
    }
    p.mins.push_back(std::move(mn));
    p.maxs.push_back(std::move(mx));
    lmin = &p.mins.back();
    lmax = &p.maxs.back();
  }
  p.built_for = base.size();
}

// Min and max of base[i0, i1) through the pyramid: O(8 · log8 n).
void range_min_max(const std::vector<int64_t>& base, const Pyramid& p, size_t lo, size_t hi, int64_t& mn, int64_t& mx) {
  size_t level = 0;
  while (lo < hi) {
    const std::vector<int64_t>& vmin = level == 0 ? base : p.mins[level - 1];
    const std::vector<int64_t>& vmax = level == 0 ? base : p.maxs[level - 1];
    while (lo < hi && lo % 8) mn = std::min(mn, vmin[lo]), mx = std::max(mx, vmax[lo]), lo++;
    while (lo < hi && hi % 8) hi--, mn = std::min(mn, vmin[hi]), mx = std::max(mx, vmax[hi]);
    if (lo >= hi || level >= p.mins.size()) {
      for (size_t i = lo; i < hi; i++) mn = std::min(mn, vmin[i]), mx = std::max(mx, vmax[i]);
      break;
    }
    lo /= 8, hi /= 8, level++;
  }
}

}  // namespace

std::string state_json(const Model& m, int index, double t_us, int64_t events) {
  const DeviceData* d = dev(m, index);
  json::Writer j;
  std::vector<SegmentData> segs;
  double at = t_us;
  if (d) {
    size_t n = events >= 0 ? std::min<size_t>((size_t)events, d->count()) : events_up_to(*d, t_us);
    segs = state_after(*d, n);
    if (!std::isfinite(t_us)) at = d->count() ? (double)d->t.back() : 0;
  }
  FragFigures f = fragmentation(segs);
  j.open('{').kv("device", index).kvd("timeUs", at).key("segments");
  write_segments(j, m, segs, index);
  j.key("fragmentation").open('{').kvu("reservedBytes", f.reserved).kvu("allocatedBytes", f.allocated);
  j.kv("unallocatedBytes", wrap_diff(f.reserved, f.allocated)).kvu("largestFreeBlockBytes", f.largest_free);
  j.kvu("freeBlocks", f.free_blocks)
      .kvu("cachedFreeBytes", f.cached_free)
      .kvu("splitRemainderBytes", f.split_remainder);
  j.kvu("roundingWasteBytes", f.rounding_waste).kvu("pendingFreeBytes", f.pending_free).close('}');
  return j.close('}').s;
}

namespace {
// Per-line statistics (the sites table), ranked: bytes at the peak (self), then inclusive, then total.
struct StackAgg {
  uint64_t at_peak = 0, count_at_peak = 0, total = 0, count = 0, live_now = 0;
};
struct LineAgg {
  uint64_t self = 0, incl = 0, total = 0, count = 0, live_now = 0, backward = 0;
  std::vector<std::pair<uint32_t, const StackAgg*>> stacks;
};
struct LineTable {
  std::unordered_map<uint32_t, StackAgg> per_stack;
  std::map<LineKey, LineAgg> lines;
  std::vector<std::pair<LineKey, LineAgg*>> order;  // ranked
};

// on_caller: a linked stack's bytes go to the backward() caller's line instead of the forward line (Note [Backward on
// the forward line]: the Top sites tab's other grouping).
void rank_lines(const Model& m, const DeviceData* d, LineTable& out, bool on_caller = false) {
  auto& per_stack = out.per_stack;
  auto& lines = out.lines;
  // Budgeted captures (FORMAT.md §5): restated allocations are not hand-outs; compacted ranges' counts come whole.
  size_t next_restated = 0;
  for (const auto& [sid, cb] : d->compacted_lines) {
    StackAgg& a = per_stack[sid];
    a.count += cb.first, a.total += cb.second;
  }
  for (size_t i = 0; i < d->count(); i++) {
    if (d->action[i] != ACT_ALLOC) continue;
    StackAgg& a = per_stack[d->stack[i]];
    while (next_restated < d->restated.size() && d->restated[next_restated] < i) next_restated++;
    if (next_restated == d->restated.size() || d->restated[next_restated] != i) {
      a.total += d->size[i];
      a.count++;
    }
    if (live_at_peak(*d, i)) a.at_peak += d->size[i], a.count_at_peak++;
    if (d->link[i] == kNoLink) a.live_now += d->size[i];
  }

  for (const auto& [sid, a] : per_stack) {
    LineKey self = on_caller ? caller_line(m, sid) : self_line(m, sid);
    LineAgg& L = lines[self];
    L.self += a.at_peak, L.total += a.total, L.count += a.count, L.live_now += a.live_now;
    if (m.stacks[sid].backward) L.backward += a.at_peak;
    // Inclusive: every distinct user line of the stack (recursion counts once).
    std::vector<LineKey> seen;
    const StackData& s = m.stacks[sid];
    for (uint32_t k = 0; k < s.count; k++) {
      uint32_t fid = m.stack_frames[s.first + k];
      // Note [FX frames]: a compiled graph's line counts as the user's line it was traced from.
      if (!m.fx_frames.empty()) {
        auto fx = m.fx_frames.find(fid);
        if (fx != m.fx_frames.end() && fx->second.origin != UINT32_MAX) fid = fx->second.origin;
      }
      const FrameData& f = m.frames[fid];
      if (!m.is_user_file(f.file)) continue;
      LineKey key{f.file, f.line};
      if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
      seen.push_back(key);
      LineAgg& I = lines[key];
      I.incl += a.at_peak;
      I.stacks.push_back({sid, &a});
    }
    if (self == kNoUserLine) L.incl += a.at_peak, L.stacks.push_back({sid, &a});
  }
  auto& order = out.order;
  for (auto& [k, L] : lines) order.push_back({k, &L});
  std::sort(order.begin(), order.end(), [&](const auto& a, const auto& b) {
    if (a.second->self != b.second->self) return a.second->self > b.second->self;
    if (a.second->incl != b.second->incl) return a.second->incl > b.second->incl;
    if (a.second->total != b.second->total) return a.second->total > b.second->total;
    return a.first < b.first;
  });
}
}  // namespace

// Note [Owner bands]: at whole-trace zoom most allocations are too small or short to draw alone, and
// memory without an owner answers nothing. So every allocation belongs to an owner group: one of the
// top kOwnerLines source lines (innermost user frame, ranked as the sites table ranks them, among lines
// that own allocations), "other lines", or "before the trace" (blocks a pickle shows allocated before
// its trace began, freed by unpaired free_requested events). The timeline query samples each group's
// live bytes and live count at each bucket's centre, so the groups sum to allocated there exactly; the
// webview draws the bands it has on their owner's colour and each group's remainder as one band.
// Group totals are checkpointed every kOwnerStep events, so a window costs its own events only.
namespace {
constexpr size_t kOwnerLines = 12, kOwnerStep = 1u << 16;
}  // namespace

struct OwnerCache {
  size_t built_for = SIZE_MAX, stacks_for = 0;
  std::vector<LineKey> top;                 // group k < top.size(): this line
  std::vector<uint8_t> stack_group;         // stack id → group
  size_t groups = 0;                        // top.size() + 2: … other lines, before the trace
  std::vector<int64_t> bytes_at, count_at;  // per checkpoint (event kOwnerStep · c), groups each
  int64_t start_count = 0;
  size_t other() const { return top.size(); }
  size_t before_trace() const { return top.size() + 1; }
  uint8_t group_of_event(const DeviceData& d, size_t i) const {
    // A free counts against what it frees; an unpaired free frees memory from before the trace.
    if (d.action[i] == ACT_FREE_REQUESTED) {
      uint32_t j = d.link[i];
      return j == kNoLink ? (uint8_t)before_trace() : group_of_stack(d.stack[j]);
    }
    return group_of_stack(d.stack[i]);
  }
  uint8_t group_of_stack(uint32_t s) const { return s < stack_group.size() ? stack_group[s] : (uint8_t)other(); }
};

namespace {

const OwnerCache& owners_of(const Model& m, const DeviceData& d) {
  if (!d.owner_cache) d.owner_cache = std::make_shared<OwnerCache>();
  OwnerCache& c = *d.owner_cache;
  if (c.built_for == d.count() && c.stacks_for == m.stacks.size()) return c;
  c = OwnerCache{};
  LineTable table;
  rank_lines(m, &d, table);
  for (const auto& [k, L] : table.order)
    if (L->count > 0 && c.top.size() < kOwnerLines) c.top.push_back(k);
  c.groups = c.top.size() + 2;
  c.stack_group.assign(m.stacks.size(), (uint8_t)c.other());
  for (size_t s = 0; s < m.stacks.size(); s++) {
    LineKey k = self_line(m, (uint32_t)s);
    for (size_t g = 0; g < c.top.size(); g++)
      if (c.top[g] == k) c.stack_group[s] = (uint8_t)g;
  }
  // Blocks live before the trace: those allocated at its end, less the trace's allocations, plus its frees.
  if (d.have_final && !d.start_empty) {
    int64_t n = 0;
    for (const auto& seg : d.final_segments)
      for (const auto& b : seg.blocks) n += b.state == ST_ALLOCATED;
    for (size_t i = 0; i < d.count(); i++)
      n += d.action[i] == ACT_FREE_REQUESTED ? 1 : d.action[i] == ACT_ALLOC ? -1 : 0;
    c.start_count = std::max<int64_t>(n, 0);
  }
  std::vector<int64_t> bytes(c.groups, 0), count(c.groups, 0);
  bytes[c.before_trace()] = d.start_allocated;
  count[c.before_trace()] = c.start_count;
  for (size_t i = 0; i < d.count(); i++) {
    if (i % kOwnerStep == 0) {
      c.bytes_at.insert(c.bytes_at.end(), bytes.begin(), bytes.end());
      c.count_at.insert(c.count_at.end(), count.begin(), count.end());
    }
    uint8_t a = d.action[i];
    if (a != ACT_ALLOC && a != ACT_FREE_REQUESTED) continue;
    uint8_t g = c.group_of_event(d, i);
    if (a == ACT_ALLOC)
      bytes[g] = wrap_add(bytes[g], d.size[i]), count[g]++;
    else
      bytes[g] = wrap_sub(bytes[g], d.size[i]), count[g]--;
  }
  c.built_for = d.count();
  c.stacks_for = m.stacks.size();
  return c;
}

// Group bytes and counts after the first n events, walked forward from (bytes, count) after `from`.
void owners_advance(const OwnerCache& c, const DeviceData& d, size_t from, size_t n, std::vector<int64_t>& bytes,
                    std::vector<int64_t>& count) {
  for (size_t i = from; i < n; i++) {
    uint8_t a = d.action[i];
    if (a != ACT_ALLOC && a != ACT_FREE_REQUESTED) continue;
    uint8_t g = c.group_of_event(d, i);
    if (a == ACT_ALLOC)
      bytes[g] = wrap_add(bytes[g], d.size[i]), count[g]++;
    else
      bytes[g] = wrap_sub(bytes[g], d.size[i]), count[g]--;
  }
}

void owners_at(const OwnerCache& c, const DeviceData& d, size_t n, std::vector<int64_t>& bytes,
               std::vector<int64_t>& count) {
  size_t cp = std::min(n / kOwnerStep, c.bytes_at.size() / std::max<size_t>(c.groups, 1));
  if (cp == 0 && c.bytes_at.empty()) {
    bytes.assign(c.groups, 0), count.assign(c.groups, 0);
    bytes[c.before_trace()] = d.start_allocated, count[c.before_trace()] = c.start_count;
    return owners_advance(c, d, 0, n, bytes, count);
  }
  if (cp * c.groups >= c.bytes_at.size()) cp--;
  bytes.assign(c.bytes_at.begin() + (ptrdiff_t)(cp * c.groups), c.bytes_at.begin() + (ptrdiff_t)((cp + 1) * c.groups));
  count.assign(c.count_at.begin() + (ptrdiff_t)(cp * c.groups), c.count_at.begin() + (ptrdiff_t)((cp + 1) * c.groups));
  owners_advance(c, d, cp * kOwnerStep, n, bytes, count);
}

}  // namespace

std::string line_stats_json(const Model& m, int index, bool backward_on_caller) {
  const DeviceData* d = dev(m, index);
  json::Writer j;
  j.open('[');
  if (!d) return j.close(']').s;
  LineTable table;
  rank_lines(m, d, table, backward_on_caller);
  const OwnerCache& owners = owners_of(m, *d);
  for (auto& [k, L] : table.order) {
    std::sort(L->stacks.begin(), L->stacks.end(), [](const auto& a, const auto& b) {
      if (a.second->at_peak != b.second->at_peak) return a.second->at_peak > b.second->at_peak;
      return a.second->total > b.second->total;
    });
    j.open('{').kvs("file", line_file(m, k)).kv("line", k.second).kvu("selfBytesAtPeak", L->self);
    j.kvu("inclusiveBytesAtPeak", L->incl).kvu("totalAllocatedBytes", L->total).kvu("allocCount", L->count);
    j.kvu("liveNowBytes", L->live_now).kvu("backwardBytesAtPeak", L->backward);
    // Its timeline owner group: a top line's own, "other lines" (top.size()) for the rest that own memory.
    int group = L->count == 0 ? -1 : (int)owners.other();
    for (size_t g = 0; g < owners.top.size(); g++)
      if (owners.top[g] == k) group = (int)g;
    j.kv("ownerGroup", group).key("topStacks").open('[');
    for (size_t s = 0; s < L->stacks.size() && s < 5; s++)
      j.open('{')
          .kv("stackId", L->stacks[s].first)
          .kvu("bytesAtPeak", L->stacks[s].second->at_peak)
          .kvu("count", L->stacks[s].second->count)
          .close('}');
    j.close(']').close('}');
  }
  return j.close(']').s;
}

std::string stack_json(const Model& m, uint32_t id) {
  if (id >= m.stacks.size()) return "null";
  const StackData& s = m.stacks[id];
  json::Writer j;
  j.open('{').kv("id", id).key("frames").open('[');
  for (uint32_t k = 0; k < s.count; k++) {
    const FrameData& f = m.frames[m.stack_frames[s.first + k]];
    j.open('{').kvs("file", m.strings[f.file]).kv("line", f.line).kvs("name", m.strings[f.name]);
    j.kvb("user", m.is_user_file(f.file));  // Note [User frames]: the one rule, computed here for TS
    auto fx = m.fx_frames.find(m.stack_frames[s.first + k]);
    if (fx != m.fx_frames.end()) {  // Note [FX frames]
      const FxFrame& x = fx->second;
      j.key("fx")
          .open('{')
          .kvs("op", m.strings[x.op])
          .kvs("node", m.strings[x.name])
          .kvs("target", m.strings[x.target]);
      j.kvs("originalTrace", m.strings[x.trace]);
      if (x.origin != UINT32_MAX) {
        const FrameData& o = m.frames[x.origin];
        j.key("origin").open('{').kvs("file", m.strings[o.file]).kv("line", o.line).kvs("name", m.strings[o.name]);
        j.kvb("user", m.is_user_file(o.file)).close('}');
      }
      j.close('}');
    }
    j.close('}');
  }
  j.close(']').kvb("backward", s.backward);
  if (s.linked) {  // Note [Backward on the forward line]
    auto frame = [&](uint32_t fid) {
      const FrameData& f = m.frames[fid];
      j.open('{').kvs("file", m.strings[f.file]).kv("line", f.line).kvs("name", m.strings[f.name]).close('}');
    };
    j.key("backwardOf").open('{').kvs("node", s.node ? m.strings[s.node] : std::string());
    j.kvs("module", s.module ? m.strings[s.module] : std::string()).kvb("recomputed", s.recomputed);
    // the forward line: the stack's user frame, when it lies before the <backward> pseudo-frame
    bool forward_user = false;
    for (uint32_t k = 0; k < s.count && k < s.separator; k++)
      if (m.stack_frames[s.first + k] == s.user_frame) forward_user = true;
    j.key("line");
    if (forward_user)
      frame(s.user_frame);
    else
      j.raw("null");
    j.key("op");
    if (s.separator > 0 && s.count > 0 && m.strings[m.frames[m.stack_frames[s.first]].file][0] != '<')
      frame(m.stack_frames[s.first]);
    else
      j.raw("null");
    j.close('}');
  }
  return j.close('}').s;
}

// Note [Backward peak of the detail]: read from the events the capture keeps one by one, where the phases are; a
// budgeted capture's compacted ranges (Note [Capture budget]) keep whole-run figures but no backward phase, so there
// this is the backward peak of the detailed window (the recent part, the peaks, the OOMs).
std::string backward_peak_json(const Model& m, int index) {
  const DeviceData* d = dev(m, index);
  if (!d || d->phases.empty()) return "null";
  // The backward spans: [a PHASE_BACKWARD mark's event index, the next mark's).
  int64_t peak = -1;
  size_t at = 0, from = 0;
  for (size_t k = 0; k < d->phases.size(); k++) {
    if (d->phases[k].phase != PHASE_BACKWARD) continue;
    const size_t a = d->phases[k].event_index;
    const size_t b = k + 1 < d->phases.size() ? (size_t)d->phases[k + 1].event_index : d->count();
    for (size_t i = a; i < b && i < d->count(); i++)
      if (d->allocated[i] > peak) peak = d->allocated[i], at = i, from = a;
  }
  if (peak < 0) return "null";
  struct Row {
    LineKey line;
    uint32_t module, name = 0;  // name: the line's function (string id)
    uint64_t bytes = 0, count = 0, recomputed = 0;
  };
  std::map<std::pair<LineKey, uint32_t>, Row> rows;
  uint64_t made = 0, linked = 0, recomputed = 0;
  for (size_t i = from; i <= at; i++) {
    if (d->action[i] != ACT_ALLOC || (d->link[i] != kNoLink && d->link[i] <= at)) continue;
    const StackData& s = m.stacks[d->stack[i]];
    const uint64_t size = d->size[i];
    made += size;
    linked += s.linked ? size : 0;
    recomputed += s.recomputed ? size : 0;
    const uint32_t module = s.linked ? s.module : 0;
    const LineKey line = self_line(m, d->stack[i]);
    Row& r = rows[{line, module}];
    r.line = line, r.module = module;
    if (s.user_frame != UINT32_MAX) r.name = m.frames[s.user_frame].name;
    r.bytes += size, r.count++, r.recomputed += s.recomputed ? size : 0;
  }
  std::vector<const Row*> order;
  for (const auto& [k, r] : rows) order.push_back(&r);
  std::sort(order.begin(), order.end(), [](const Row* a, const Row* b) { return a->bytes > b->bytes; });
  json::Writer j;
  j.open('{').kv("device", index).kv("peakBytes", peak).kv("timeUs", d->t[at]);
  j.kvu("madeInBackwardBytes", made).kvu("linkedBytes", linked).kvu("recomputedBytes", recomputed);
  j.key("lines").open('[');
  for (size_t k = 0; k < order.size() && k < 20; k++) {
    const Row& r = *order[k];
    j.open('{').kvs("file", line_file(m, r.line)).kv("line", r.line.second);
    j.kvs("name", r.name ? m.strings[r.name] : std::string());
    j.kvs("module", r.module ? m.strings[r.module] : std::string());
    j.kvu("bytes", r.bytes).kvu("count", r.count).kvu("recomputedBytes", r.recomputed).close('}');
  }
  return j.close(']').close('}').s;
}

std::string markers_json(const Model& m, int index) {
  const DeviceData* d = dev(m, index);
  json::Writer j;
  j.open('[');
  if (!d) return j.close(']').s;
  std::vector<const MarkerData*> sorted;
  for (const auto& mk : d->markers) sorted.push_back(&mk);
  std::stable_sort(sorted.begin(), sorted.end(), [](auto a, auto b) { return a->t_us < b->t_us; });
  for (const MarkerData* mk : sorted) {
    j.open('{')
        .kv("device", index)
        .kv("timeUs", mk->t_us)
        .kvs("kind", kMarkerKinds[mk->kind])
        .kvs("label", m.strings[mk->label]);
    if (!mk->detail_json.empty()) j.key("detail").raw(mk->detail_json);
    j.close('}');
  }
  return j.close(']').s;
}

std::string ooms_json(const Model& m) {
  json::Writer j;
  j.open('[');
  for (const auto& [idx, d] : m.devices) {
    for (const auto& o : d.ooms) {
      uint64_t reserved = o.reserved, allocated = o.allocated, largest = o.largest_free;
      if (!o.have_figures) {
        size_t n = std::min<size_t>(o.event_index, d.count());
        reserved = (uint64_t)std::max<int64_t>(0, reserved_before(d, n));
        allocated = (uint64_t)std::max<int64_t>(0, allocated_before(d, n));
        largest = fragmentation(state_after(d, n)).largest_free;
      }
      // The allocator's own free memory would fit the request, but not in one piece.
      bool frag = reserved >= allocated && reserved - allocated >= o.requested;
      j.open('{')
          .kv("device", idx)
          .kv("timeUs", o.t_us)
          .kvu("requestedBytes", o.requested)
          .kvu("deviceFreeBytes", o.device_free);
      j.kvu("deviceTotalBytes", o.device_total).kvu("reservedBytes", reserved).kvu("allocatedBytes", allocated);
      j.kvu("largestFreeBlockBytes", largest)
          .kvs("verdict", frag ? "fragmentation" : "shortage")
          .kv("stackId", o.stack);
      // The line that asked: the innermost user frame, by the same rule as line attribution.
      LineKey at = o.stack < m.stacks.size() ? self_line(m, o.stack) : kNoUserLine;
      j.kvs("file", line_file(m, at)).kv("line", at.second).close('}');
    }
  }
  return j.close(']').s;
}

std::string spans_json(const Model& m, int index, double t0, double t1, size_t max_count, int owner) {
  const DeviceData* d = dev(m, index);
  json::Writer j;
  j.open('[');
  if (!d || max_count == 0) return j.close(']').s;
  struct Span {
    uint32_t i;
    uint64_t size;
  };
  // The max_count largest spans, kept in a heap whose top is the smallest kept (a 10 M-event trace has
  // ~5 M spans in its full range; collecting them all and partially sorting took 100 ms per query).
  // Order: bigger first, then earlier event — a strict total order, so the result is unique.
  auto better = [](const Span& a, const Span& b) { return a.size != b.size ? a.size > b.size : a.i < b.i; };
  std::vector<Span> spans;
  spans.reserve(std::min<size_t>(max_count, d->count()) + 1);
  auto offer = [&](Span s) {
    if (spans.size() < max_count) {
      spans.push_back(s);
      std::push_heap(spans.begin(), spans.end(), better);
    } else if (better(s, spans.front())) {
      std::pop_heap(spans.begin(), spans.end(), better);
      spans.back() = s;
      std::push_heap(spans.begin(), spans.end(), better);
    }
  };
  int64_t first = d->count() ? d->t[0] : 0;
  const OwnerCache& owner_groups = owners_of(m, *d);
  const OwnerCache* owners = owner >= 0 ? &owner_groups : nullptr;
  for (size_t i = 0; i < d->count(); i++) {
    uint8_t a = d->action[i];
    double start, end;
    if (a == ACT_ALLOC) {
      start = (double)d->t[i];
      end = d->link[i] == kNoLink ? INFINITY : (double)d->t[d->link[i]];
    } else if (a == ACT_FREE_REQUESTED && d->link[i] == kNoLink) {
      start = (double)first;  // allocated before the trace began
      end = (double)d->t[i];
    } else {
      continue;
    }
    if (start <= t1 && end >= t0 && (!owners || (int)owners->group_of_event(*d, i) == owner))
      offer(Span{(uint32_t)i, d->size[i]});
  }
  std::sort_heap(spans.begin(), spans.end(), better);
  size_t keep = spans.size();
  for (size_t k = 0; k < keep; k++) {
    size_t i = spans[k].i;
    bool is_alloc = d->action[i] == ACT_ALLOC;
    j.open('{').kvu("address", d->addr[i]).kvu("size", d->size[i]);
    j.kv("startUs", is_alloc ? d->t[i] : first);
    j.key("endUs");
    if (is_alloc && d->link[i] == kNoLink)
      j.raw("null");
    else
      j.num(is_alloc ? d->t[d->link[i]] : d->t[i]);
    j.kv("stackId", d->stack[i]).kvu("stream", d->stream[i]);
    j.kv("owner", (int)owner_groups.group_of_event(*d, i));
    // Note [Snapshot extras]: the allocation's user_metadata and compile context, where the snapshot has them.
    auto extra = d->context_and_metadata.find((uint32_t)(is_alloc ? i : (d->link[i] == kNoLink ? i : d->link[i])));
    if (extra != d->context_and_metadata.end()) {
      const auto [cc, um] = extra->second;
      if (um) j.kvs("userMetadata", m.strings[um]);
      if (cc && m.strings[cc] != "N/A") j.kvs("compileContext", m.strings[cc]);
    }
    j.close('}');
  }
  return j.close(']').s;
}

namespace {

std::map<std::pair<std::string, uint32_t>, uint64_t> live_by_line(const Model& m, int index, double t_us) {
  std::map<std::pair<std::string, uint32_t>, uint64_t> out;
  const DeviceData* d = dev(m, index);
  if (!d) return out;
  size_t n = events_up_to(*d, t_us);
  for (size_t i = 0; i < n; i++) {
    if (d->action[i] != ACT_ALLOC) continue;
    if (d->link[i] != kNoLink && d->link[i] < n) continue;
    LineKey k = self_line(m, d->stack[i]);
    out[{std::string(line_file(m, k)), k.second}] += d->size[i];
  }
  if (!d->window_start_allocs.empty()) {
    // A window (Note [Range-first open]): allocations before it, live at its start, until their free (a free
    // with no alloc in the window, as Model::derive pairs).
    std::vector<uint64_t> freed;
    for (size_t i = 0; i < n; i++)
      if (d->action[i] == ACT_FREE_REQUESTED && d->link[i] == kNoLink) freed.push_back(d->addr[i]);
    std::sort(freed.begin(), freed.end());
    for (const auto& s : d->window_start_allocs) {
      if (std::binary_search(freed.begin(), freed.end(), s.addr)) continue;
      LineKey k = self_line(m, s.stack);
      out[{std::string(line_file(m, k)), k.second}] += s.size;
    }
  }
  return out;
}

}  // namespace

std::string diff_json(const Model& a, int index, double a_us, const Model& b, double b_us) {
  auto before = live_by_line(a, index, a_us), after = live_by_line(b, index, b_us);
  std::map<std::pair<std::string, uint32_t>, std::pair<uint64_t, uint64_t>> rows;
  for (const auto& [k, v] : before) rows[k].first = v;
  for (const auto& [k, v] : after) rows[k].second = v;
  std::vector<std::pair<std::pair<std::string, uint32_t>, std::pair<uint64_t, uint64_t>>> sorted(rows.begin(),
                                                                                                 rows.end());
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& x, const auto& y) {
    auto dist = [](uint64_t a, uint64_t b) { return a > b ? a - b : b - a; };
    return dist(x.second.second, x.second.first) > dist(y.second.second, y.second.first);
  });
  json::Writer j;
  j.open('[');
  for (const auto& [k, v] : sorted) {
    j.open('{').kvs("file", k.first).kv("line", k.second).kvu("beforeBytes", v.first).kvu("afterBytes", v.second);
    j.kv("deltaBytes", wrap_diff(v.second, v.first)).close('}');
  }
  return j.close(']').s;
}

// Where a run of samples starts (Note [Figures after the events]): the value before its first sample (known: false,
// nothing is known: 0 until a bucket's own sample replaces it) and the peaks then, from which the first sample's peak
// rise is measured (INT64_MAX: none is).
struct FiguresCarried {
  bool known = false;
  int64_t allocated = 0, reserved = 0;
  int64_t peak_allocated = std::numeric_limits<int64_t>::max(), peak_reserved = std::numeric_limits<int64_t>::max();
};

// Note [Figures from stats]: a device with no events, bucketed from its samples of PyTorch's figures. A bucket holds
// the value carried in from the sample before it and every sample inside it; where the peak rose since the sample
// before, allocated (reserved) reached that peak between the two, and the bucket of the later sample shows it.
// Note [Figures after the events]: the samples f[first, …), all at or after `from` (µs), from the value `carried`;
// buckets wholly before `from` keep the events' figures, and the bucket `from` falls in spans both (sample times are
// whole µs, so a bucket [ta, tb) holds samples at or after `from` when tb > from, events up to it when ta <= from).
static void figures_timeline(const std::vector<FigureSample>& f, size_t first, double from, FiguresCarried carried,
                             double t0, double t1, int buckets, std::vector<int64_t>& amin, std::vector<int64_t>& amax,
                             std::vector<int64_t>& rmin, std::vector<int64_t>& rmax) {
  const double w = (t1 - t0) / buckets;
  size_t i = first;
  while (i < f.size() && (double)f[i].t_us < t0) i++;
  int64_t a = carried.allocated, r = carried.reserved;
  bool known = carried.known;
  if (i > first) a = f[i - 1].allocated, r = f[i - 1].reserved, known = true;
  for (int k = 0; k < buckets; k++) {
    const bool last = k == buckets - 1;
    const double ta = t0 + k * w, tb = last ? t1 : t0 + (k + 1) * w;
    if (last ? t1 < from : tb <= from) continue;  // before the samples: the events'
    int64_t alo = a, ahi = a, rlo = r, rhi = r;
    if (ta <= from) {  // the events' part of the bucket, up to `from`
      alo = std::min(alo, amin[k]), ahi = std::max(ahi, amax[k]);
      rlo = std::min(rlo, rmin[k]), rhi = std::max(rhi, rmax[k]);
    }
    for (; i < f.size() && ((double)f[i].t_us < tb || (last && (double)f[i].t_us <= tb)); i++) {
      a = f[i].allocated, r = f[i].reserved;
      if (!known) alo = ahi = a, rlo = rhi = r, known = true;
      alo = std::min(alo, a), ahi = std::max(ahi, a), rlo = std::min(rlo, r), rhi = std::max(rhi, r);
      const int64_t pa = i > first ? f[i - 1].peak_allocated : carried.peak_allocated;
      const int64_t pr = i > first ? f[i - 1].peak_reserved : carried.peak_reserved;
      if (f[i].peak_allocated > pa) ahi = std::max(ahi, f[i].peak_allocated);
      if (f[i].peak_reserved > pr) rhi = std::max(rhi, f[i].peak_reserved);
    }
    amin[k] = alo, amax[k] = ahi, rmin[k] = rlo, rmax[k] = rhi;
  }
}

std::string timeline_json(Model& m, int index, double t0, double t1, int buckets, bool with_owners) {
  buckets = std::max(1, std::min(buckets, 1 << 16));
  if (!(t1 > t0)) t1 = t0 + 1;
  json::Writer j;
  auto it = m.devices.find(index);
  std::vector<int64_t> amin(buckets), amax(buckets), rmin(buckets), rmax(buckets);
  std::vector<double> used(buckets, NAN);
  const OwnerCache* owners = nullptr;
  std::vector<int64_t> owner_bytes, owner_count;  // buckets × groups
  if (it != m.devices.end()) {
    DeviceData& d = it->second;
    // Owner groups at each bucket's centre (Note [Owner bands]).
    if (with_owners) {
      owners = &owners_of(m, d);
      const size_t G = owners->groups;
      owner_bytes.resize((size_t)buckets * G), owner_count.resize((size_t)buckets * G);
      std::vector<int64_t> b, c;
      double w = (t1 - t0) / buckets;
      size_t at = events_up_to(d, t0 + 0.5 * w);
      owners_at(*owners, d, at, b, c);
      for (int k = 0; k < buckets; k++) {
        size_t n = events_up_to(d, t0 + (k + 0.5) * w);
        if (n > at) owners_advance(*owners, d, at, n, b, c), at = n;
        std::copy(b.begin(), b.end(), owner_bytes.begin() + (ptrdiff_t)(k * G));
        std::copy(c.begin(), c.end(), owner_count.begin() + (ptrdiff_t)(k * G));
      }
    }
    build_pyramid(d.allocated, d.alloc_pyr);
    build_pyramid(d.reserved, d.res_pyr);
    // Note [Figures after the events]: the events count up to the time they stopped (n_off), the samples after it.
    const size_t after = figures_after_events(m, d);
    const size_t n_off = after < d.figures.size() ? events_up_to(d, (double)m.events_off_us) : d.count();
    double w = (t1 - t0) / buckets;
    for (int k = 0; k < buckets; k++) {
      double ta = t0 + k * w, tb = k == buckets - 1 ? t1 : t0 + (k + 1) * w;
      // Events in [ta, tb) (the last bucket includes t1); the value carried in from before counts too.
      size_t i0 = std::lower_bound(d.t.begin(), d.t.end(), clamp_to_i64(std::ceil(ta))) - d.t.begin();
      size_t i1 = k == buckets - 1
                      ? events_up_to(d, tb)
                      : (size_t)(std::lower_bound(d.t.begin(), d.t.end(), clamp_to_i64(std::ceil(tb))) - d.t.begin());
      i1 = std::max(i1, i0);
      i0 = std::min(i0, n_off), i1 = std::min(i1, n_off);
      int64_t a = allocated_before(d, i0), r = reserved_before(d, i0);
      int64_t alo = a, ahi = a, rlo = r, rhi = r;
      range_min_max(d.allocated, d.alloc_pyr, i0, i1, alo, ahi);
      range_min_max(d.reserved, d.res_pyr, i0, i1, rlo, rhi);
      amin[k] = alo, amax[k] = ahi, rmin[k] = rlo, rmax[k] = rhi;
    }
    // Budgeted captures (FORMAT.md §5): between restated moments a compacted range has only its buckets' min/max;
    // a display bucket overlapping one spans its values (the resolution degrades with the range's age).
    for (const auto& cb : d.compacted_timeline) {
      if ((double)cb.t_end_us <= t0 || (double)cb.t_us > t1) continue;
      int k0 = std::max(0, (int)std::min(1e9, ((double)cb.t_us - t0) / w));
      int k1 = std::min(buckets - 1, (int)std::min(1e9, std::max(0.0, ((double)cb.t_end_us - 1 - t0) / w)));
      for (int k = std::min(k0, buckets - 1); k <= k1; k++) {
        amin[k] = std::min(amin[k], cb.allocated_min), amax[k] = std::max(amax[k], cb.allocated_max);
        rmin[k] = std::min(rmin[k], cb.reserved_min), rmax[k] = std::max(rmax[k], cb.reserved_max);
      }
    }
    if (d.figures_only()) {
      figures_timeline(d.figures, 0, -INFINITY, FiguresCarried{}, t0, t1, buckets, amin, amax, rmin, rmax);
    } else if (after < d.figures.size()) {
      // Note [Figures after the events]: carried in, the events' figures when they stopped; the first sample's peak
      // rise counts from the events' peak up to then (or the sample before it, if that said more).
      FiguresCarried c{true, allocated_before(d, n_off), reserved_before(d, n_off), d.start_allocated,
                       d.start_reserved};
      int64_t lo = c.peak_allocated;
      range_min_max(d.allocated, d.alloc_pyr, 0, n_off, lo, c.peak_allocated);
      lo = c.peak_reserved;
      range_min_max(d.reserved, d.res_pyr, 0, n_off, lo, c.peak_reserved);
      if (after > 0) {
        c.peak_allocated = std::max(c.peak_allocated, d.figures[after - 1].peak_allocated);
        c.peak_reserved = std::max(c.peak_reserved, d.figures[after - 1].peak_reserved);
      }
      figures_timeline(d.figures, after, (double)m.events_off_us, c, t0, t1, buckets, amin, amax, rmin, rmax);
    }
    if (!d.samples.empty()) {
      for (const auto& s : d.samples) {
        if (s.t_us < t0 || s.t_us > t1) continue;
        int k = std::min(buckets - 1, std::max(0, (int)std::min(1e9, ((double)s.t_us - t0) / w)));
        if (std::isnan(used[k]) || (double)s.used > used[k]) used[k] = (double)s.used;
      }
      // Device used is never below reserved: a bucket's highest device use is at least its highest reserved (the
      // device held those bytes then), whether or not a sample caught that moment; NVML's reading of another
      // instant in the bucket can be lower (Note [Device samples of a moment] in samples.cpp).
      for (int k = 0; k < buckets; k++)
        if (!std::isnan(used[k])) used[k] = std::max(used[k], (double)rmax[k]);
    }
  }
  auto arr = [&](const char* name, const std::vector<int64_t>& v) {
    j.key(name).open('[');
    for (int64_t x : v) j.item().num(x);
    j.close(']');
  };
  j.open('{').kv("device", index).kvd("t0Us", t0).kvd("t1Us", t1).kv("buckets", buckets);
  arr("allocatedMin", amin);
  arr("allocatedMax", amax);
  arr("reservedMin", rmin);
  arr("reservedMax", rmax);
  if (owners) {
    j.key("owners").open('{').key("lines").open('[');
    for (const LineKey& k : owners->top) j.open('{').kvs("file", line_file(m, k)).kv("line", k.second).close('}');
    j.close(']').kv("groups", owners->groups);
    arr("bytes", owner_bytes);
    arr("counts", owner_count);
    j.close('}');
  }
  if (it != m.devices.end() && !it->second.samples.empty()) {
    j.key("deviceUsedMax").open('[');
    for (double x : used) j.item().dbl(x);
    j.close(']');
  }
  return j.close('}').s;
}

}  // namespace gpumem

namespace gpumem {

// Note [Step table]: one pass over the device's events answers every per-step question the steps view and the
// leak finder ask (src/core/analyses/steps): the peak of allocated inside each step, allocated and reserved at its end,
// and the bytes each line (innermost user frame) holds live at each step end. diff_json per pair of step ends
// would rescan the trace once per step (O(steps × events)); this is O(events + steps × live lines).
// Blocks allocated before the trace began (a free with no alloc) are not attributed, as in diff_json.
// Each line has two series: its blocks' bytes (what allocated_bytes count) and the bytes its live tensors asked for.
// The leak rule reads the second (Note [Leak rule] in src/core/analyses/steps/leaks.ts): a block can be bigger than
// its request by which cached block met it, so a line's blocks can grow with nothing more kept.
std::string step_table_json(const Model& m, int index, const std::vector<double>& ends_us) {
  json::Writer j;
  j.open('{');
  const DeviceData* d = dev(m, index);
  j.key("steps").open('[');
  struct Held {
    uint64_t bytes = 0, requested = 0;
  };
  struct Series {
    std::vector<uint64_t> bytes, requested;
  };
  std::map<LineKey, Held> live;
  std::map<LineKey, Series> series;
  size_t i = 0;
  // Note [Figures at step ends]: a step that ends where PyTorch's figures are read (figures only, after the events)
  // shows what they say: allocated and reserved of the last sample read inside the step (after the step before it
  // ended, at or before its own end: a sample of an earlier step says nothing of this one), and as its peak PyTorch's
  // peak counter at that sample ("peakIsCounter": the highest since the process start or the workload's last
  // reset_peak_memory_stats(), which the capture does not see, not the step's own peak). With no such sample the
  // row's figures are null, never zeros. Lines are followed over the steps that end while the events are recorded
  // (their series are that long): the leak rule reads nothing where nothing was recorded.
  const int64_t figures_from = d ? figures_from_us(m, *d) : std::numeric_limits<int64_t>::max();
  size_t k = 0;
  while (d && k < ends_us.size() && ends_us[k] < (double)figures_from) k++;
  for (size_t s = 0; d && s < k; s++) {
    size_t n = std::max(i, events_up_to(*d, ends_us[s]));
    int64_t peak = allocated_before(*d, i);
    int64_t peak_t = i ? d->t[i - 1] : (d->count() ? d->t[0] : 0);
    for (; i < n; i++) {
      if (d->action[i] == ACT_ALLOC) {
        Held& h = live[self_line(m, d->stack[i])];
        h.bytes += d->size[i];
        h.requested += d->size[i] - d->waste[i];
      } else if (d->action[i] == ACT_FREE_REQUESTED && d->link[i] != kNoLink) {
        size_t a = d->link[i];
        auto it = live.find(self_line(m, d->stack[a]));
        if (it != live.end()) {
          it->second.bytes -= std::min(it->second.bytes, d->size[a]);
          it->second.requested -= std::min(it->second.requested, d->size[a] - d->waste[a]);
          if (it->second.bytes == 0) live.erase(it);
        }
      }
      if (d->allocated[i] > peak) {
        peak = d->allocated[i];
        peak_t = d->t[i];
      }
    }
    for (const auto& [key, held] : live) {
      Series& v = series[key];
      if (v.bytes.empty()) v.bytes.assign(k, 0), v.requested.assign(k, 0);
      v.bytes[s] = held.bytes;
      v.requested[s] = held.requested;
    }
    j.open('{').kvd("endUs", ends_us[s]).kv("peakAllocatedBytes", peak).kv("peakAtUs", peak_t);
    j.kv("allocatedAtEndBytes", allocated_before(*d, n)).kv("reservedAtEndBytes", reserved_before(*d, n)).close('}');
  }
  for (size_t s = k; d && s < ends_us.size(); s++) {
    const FigureSample* f = figure_at(m, *d, ends_us[s], s ? ends_us[s - 1] : -INFINITY);
    j.open('{').kvd("endUs", ends_us[s]).kvs("source", "stats");
    if (f) {
      j.kv("sampleUs", f->t_us).kv("peakAllocatedBytes", f->peak_allocated).kvb("peakIsCounter", true);
      j.kv("allocatedAtEndBytes", f->allocated).kv("reservedAtEndBytes", f->reserved);
    } else {
      j.key("sampleUs").raw("null").key("peakAllocatedBytes").raw("null").key("allocatedAtEndBytes").raw("null");
      j.key("reservedAtEndBytes").raw("null");
    }
    j.key("peakAtUs").raw("null").close('}');
  }
  j.close(']');
  j.key("lines").open('[');
  for (const auto& [key, v] : series) {
    j.open('{').kvs("file", line_file(m, key)).kv("line", key.second).key("bytesAtEnds").open('[');
    for (uint64_t b : v.bytes) j.item().unum(b);
    j.close(']').key("requestedAtEnds").open('[');
    for (uint64_t b : v.requested) j.item().unum(b);
    j.close(']').close('}');
  }
  j.close(']');
  return j.close('}').s;
}

}  // namespace gpumem
