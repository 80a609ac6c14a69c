// observer.cc — PyTorch's trace entries to capture records (observer.h, Note [Observer]).
#include "observer.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "../../format/gpumem_format.h"
#include "../../format/json.h"
#include "address_map.h"
#include "pytorch_settings.h"
#include "recorder.h"
#include "self_time.h"
#include "sequencer.h"
#include "stack_capture.h"
#include "writer.h"

namespace gpumem::rec::observer {
namespace {

constexpr uint64_t kSmallSize = 1ull << 20;  // PyTorch's small pool: requests ≤ 1 MiB

struct Live {
  uint64_t size;       // the block (Note [Observed block sizes])
  uint64_t requested;  // what the trace entry asked for
  uint32_t stack;
  bool pending;  // free_requested seen, free_completed not yet
};

// One per device. PyTorch calls trackers under that device's allocator lock, so the mutex is
// uncontended in practice; it is here for the CPU tests and for hosts that call from several threads.
struct Dev {
  std::mutex mu;
  AddressMap<Live> live;  // Note [Flat address map]
  // Note [Observed block sizes]: PyTorch's trace gives an alloc's requested size (orig_size), but its
  // allocated_bytes count the block: the request rounded to 512 B, or the whole free block it came from when
  // the remainder would be 1 MiB or less (a large-pool block is split only above that). The ResNet-50 fixture
  // has 5 such blocks of 645 (8,585,216 B for 8,192,000 asked); a 2-minute fast-step run's peak was 508 B short
  // of torch.cuda.max_memory_allocated(). So the observer keeps PyTorch's layout: the fixed segments
  // (segment_alloc/free, and those a state names) and the blocks in them, live or pending, by address; an
  // alloc's block runs from its address to the next block or the segment's end when that leaves ≤ 1 MiB, else
  // it is the rounded request. Expandable segments, and segments made before the observer saw them, fall
  // back to the rounded request. The rounding and the splitting follow the user's roundup_power2_divisions and
  // max_split_size_mb (Note [PyTorch's block sizes]).
  std::map<uint64_t, uint64_t> segments;  // fixed segments: address → size
  // Large-pool blocks in use (allocated or pending free): address → size. Only a large request's size reads
  // them, and large-pool segments hold large blocks only (a small pool's are ≤ 1 MiB, in 2 MiB segments of
  // their own), so small blocks are not kept: most events then touch no tree (Note [Self time]).
  std::map<uint64_t, uint64_t> blocks;
  uint64_t allocated = 0, requested = 0, reserved = 0, active = 0, peak_allocated = 0, peak_reserved = 0, num_ooms = 0;
  uint64_t next_pool0 = 0, next_pool1 = 0;  // SEGMENT_POOL: the next segment entry's private pool
};

constexpr int kMaxDevices = 256;  // RecordHeader.device is one byte
std::array<Dev, kMaxDevices>& devs() {
  static auto* d = new std::array<Dev, kMaxDevices>;  // never destroyed: events may come from atexit
  return *d;
}
std::atomic<bool> g_active{false};
std::atomic<uint64_t> g_dropped{0};
std::atomic<int> g_ndev{0};
Host g_host;

uint16_t pool_flags(uint64_t size) { return size <= kSmallSize ? fmt::kPoolSmall : fmt::kPoolLarge; }

// Note [PyTorch's block sizes]: PyTorch's allocated_bytes count blocks, not requests. A request is rounded (round_size:
// to 512 B, or, for a size interval with N > 1 roundup_power2_divisions, up to the next of N equal divisions of its
// power-of-two interval), and a cached block is split only when the remainder is worth keeping (should_split: small
// pool ≥ 512 B; large pool > 1 MiB, and only for requests below max_split_size, so a request at or above it takes the
// whole free block). The observer sizes each block it records this way, under the user's settings as PyTorch parsed
// them (pytorch_settings_from_json, set once by the bootstrap; the defaults before that), so that a capture's
// allocated is memory_allocated() under those settings too: on an H200, T5 under max_split_size_mb:64 and
// roundup_power2_divisions:4 was 5.6 % short at its step ends with 512 B rounding alone.
std::atomic<const core::PytorchSettings*> g_settings{nullptr};
const core::PytorchSettings& settings() {
  static const core::PytorchSettings kDefault;
  const core::PytorchSettings* s = g_settings.load(std::memory_order_acquire);
  return s ? *s : kDefault;
}

// The block PyTorch hands out for a request of `requested` bytes at `addr` (Note [Observed block sizes]).
uint64_t block_size(const Dev& d, uint64_t addr, uint64_t requested) {
  const core::PytorchSettings& policy = settings();
  const uint64_t rounded = core::pytorch_round(requested, policy.roundup_power2_divisions);
  if (rounded <= kSmallSize) return rounded;  // small pool: split whenever ≥ 512 B remain, so always exact
  auto seg = d.segments.upper_bound(addr);
  if (seg == d.segments.begin()) return rounded;
  --seg;
  const uint64_t seg_end = seg->first + seg->second;
  if (addr >= seg_end) return rounded;
  uint64_t end = seg_end;
  auto next = d.blocks.upper_bound(addr);
  if (next != d.blocks.end() && next->first < end) end = next->first;
  const uint64_t free = end - addr;
  if (free < rounded) return rounded;  // our layout disagrees with PyTorch's: the request, never less
  const bool splits = rounded < policy.max_split_size && free - rounded > kSmallSize;
  return splits ? rounded : free;
}

uint8_t block_state(const std::string& s) {
  if (s == "active_allocated") return fmt::BLOCK_ACTIVE_ALLOCATED;
  if (s == "active_pending_free") return fmt::BLOCK_ACTIVE_PENDING_FREE;
  return fmt::BLOCK_INACTIVE;
}

uint64_t u64(const json::Value& o, const char* key) {
  const json::Value* v = o.find(key);
  return v && v->is_number() && v->as_int() > 0 ? uint64_t(v->as_int()) : 0;
}

}  // namespace

void start(const Host& host) {
  g_host = host;
  g_active.store(true);
  // Note [Deferred observation] (sequencer.h). GPUMEM_OBSERVE_INLINE=1 applies each entry where it comes, as
  // before: a probe's switch, to measure what the queue saves (test/gpu/bench_allocator.py), not a setting.
  const char* inline_env = std::getenv("GPUMEM_OBSERVE_INLINE");
  if (!(inline_env && std::strcmp(inline_env, "1") == 0)) sequencer::start(&apply);
  Sources src;
  src.figures = &figures;
  src.refresh = &refresh_figures;
  src.state = host.state;
  set_sources(src);
}
bool active() { return g_active.load(std::memory_order_relaxed); }
const Host& host() { return g_host; }
uint64_t dropped_frees() { return g_dropped.load(); }
int device_count() { return g_ndev.load(); }
void note_device(int device) {
  int n = g_ndev.load();
  while (device + 1 > n && !g_ndev.compare_exchange_weak(n, device + 1)) {}
}

namespace {
bool apply_event(int device, int action, uint64_t addr, uint64_t size, uint64_t stream, uint32_t stack, uint64_t t_ns,
                 uint32_t thread) {
  if (device >= g_ndev.load(std::memory_order_relaxed)) note_device(device);
  Dev& d = devs()[size_t(device)];
  std::lock_guard<std::mutex> lk(d.mu);
  const uint8_t dev = uint8_t(device);
  switch (action) {
    case ALLOC: {
      if (const Live* old = d.live.find(addr)) {
        // The address was handed out again without the free reaching us (CUDA-graph trees restore a
        // pool's checkpointed state without trace entries): close the old block first, so the figures
        // and the reader's replay never count one address twice.
        fmt::BlockEvent f{t_ns, addr, old->size, old->size, stream, 0, thread};
        if (!old->pending) {
          d.allocated -= old->size;
          d.requested -= old->requested;
          emit(fmt::REC_FREE_REQUESTED, dev, pool_flags(old->size), &f, sizeof f);
        }
        d.active -= old->size;
        emit(fmt::REC_FREE_COMPLETED, dev, pool_flags(old->size), &f, sizeof f);
        d.live.erase(addr);
      }
      const uint64_t requested = size;
      const bool large = requested > kSmallSize;
      if (large) d.blocks.erase(addr);
      size = block_size(d, addr, requested);
      d.live.put(addr, Live{size, requested, stack, false});
      if (large) d.blocks[addr] = size;
      d.allocated += size;
      d.requested += requested;
      d.active += size;
      d.peak_allocated = std::max(d.peak_allocated, d.allocated);
      fmt::BlockEvent e{t_ns, addr, size, requested, stream, stack, thread};
      emit(fmt::REC_ALLOC, dev, pool_flags(size), &e, sizeof e);
      return true;
    }
    case FREE_REQUESTED: {
      Live* it = d.live.find(addr);
      if (!it || it->pending) {
        g_dropped.fetch_add(1);
        return false;
      }
      it->pending = true;
      d.allocated -= it->size;
      d.requested -= it->requested;
      fmt::BlockEvent e{t_ns, addr, it->size, it->requested, stream, stack, thread};
      emit(fmt::REC_FREE_REQUESTED, dev, pool_flags(it->size), &e, sizeof e);
      return true;
    }
    case FREE_COMPLETED: {
      Live* it = d.live.find(addr);
      // A block made before the observer saw it (seeded from a state, no live entry) is gone from the layout too.
      if (!it || it->size > kSmallSize) d.blocks.erase(addr);
      if (!it || !it->pending) {
        g_dropped.fetch_add(1);
        return false;
      }
      const uint64_t sz = it->size;
      d.live.erase(addr);
      d.active -= sz;
      fmt::BlockEvent e{t_ns, addr, sz, sz, stream, stack, thread};
      emit(fmt::REC_FREE_COMPLETED, dev, pool_flags(sz), &e, sizeof e);
      return true;
    }
    case SEGMENT_ALLOC:
    case SEGMENT_FREE:
    case SEGMENT_MAP:
    case SEGMENT_UNMAP: {
      const bool grow = action == SEGMENT_ALLOC || action == SEGMENT_MAP;
      if (action == SEGMENT_ALLOC) d.segments[addr] = size;
      if (action == SEGMENT_FREE) d.segments.erase(addr);
      if (grow) {
        d.reserved += size;
        d.peak_reserved = std::max(d.peak_reserved, d.reserved);
      } else {
        d.reserved -= std::min(d.reserved, size);
      }
      const uint8_t type = action == SEGMENT_ALLOC  ? fmt::REC_SEGMENT_ALLOC
                           : action == SEGMENT_FREE ? fmt::REC_SEGMENT_FREE
                           : action == SEGMENT_MAP  ? fmt::REC_SEGMENT_MAP
                                                    : fmt::REC_SEGMENT_UNMAP;
      uint16_t flags = action == SEGMENT_MAP || action == SEGMENT_UNMAP ? fmt::kSegExpandable : 0;
      if (d.next_pool0 || d.next_pool1) flags |= fmt::kPoolPrivate;
      fmt::SegmentEvent e{t_ns, addr, size, stream, d.next_pool0, d.next_pool1, stack, 0};
      d.next_pool0 = d.next_pool1 = 0;
      emit(type, dev, flags, &e, sizeof e);
      return true;
    }
    case SEGMENT_POOL: d.next_pool0 = addr, d.next_pool1 = size; return true;
    case OOM: {
      d.num_ooms++;
      // TraceEntry for an OOM: addr_ = the driver's free bytes, size_ = the request.
      fmt::OomRec r{t_ns, size, addr, 0, d.reserved, d.allocated, 0, stream, 0, stack, 0};
      emit(fmt::REC_OOM, dev, 0, &r, sizeof r);
      return true;
    }
    default: return false;  // snapshot, user_defined: no record
  }
}
}  // namespace

void apply(const sequencer::Event& e) {
  self_time::Scope timed(self_time::kApply);
  apply_event(e.device, e.action, e.addr, e.size, e.stream, e.stack, e.t_ns, e.thread);
}

bool on_event(int device, int action, uint64_t addr, uint64_t size, uint64_t stream, uint32_t stack, uint64_t t_ns) {
  if (device < 0 || device >= kMaxDevices) return false;
  if (t_ns == 0) t_ns = now_ns();
  sequencer::drain();  // whatever the tracker queued comes first
  return apply_event(device, action, addr, size, stream, stack, t_ns, thread_number());
}

bool queue_event(int device, int action, uint64_t addr, uint64_t size, uint64_t stream, uint32_t stack, uint64_t t_ns) {
  if (device < 0 || device >= kMaxDevices || action < ALLOC || (action > OOM && action != SEGMENT_POOL)) return false;
  if (t_ns == 0) t_ns = now_ns();
  const uint32_t thread = thread_number();
  if (sequencer::push(sequencer::Event{t_ns, addr, size, stream, stack, thread, device, action})) return true;
  return apply_event(device, action, addr, size, stream, stack, t_ns, thread);
}

bool set_rounding(const std::string& settings_json) {
  json::Value v;
  if (!json::parse(settings_json, &v, nullptr) || !v.is_object()) return false;
  const core::PytorchSettings parsed = core::pytorch_settings_from_json(v);
  // Kept for the process's life: a trace entry being applied may still read the previous one.
  g_settings.store(parsed == core::PytorchSettings{} ? nullptr : new core::PytorchSettings(parsed),
                   std::memory_order_release);
  return true;
}

void set_figures(int device, uint64_t allocated, uint64_t reserved, uint64_t peak_allocated, uint64_t peak_reserved,
                 uint64_t num_ooms) {
  if (device < 0 || device >= kMaxDevices) return;
  note_device(device);
  sample_at_close();  // PyTorch's stats carry the figures: the capture ends with them (Note [Last figures])
  Dev& d = devs()[size_t(device)];
  std::lock_guard<std::mutex> lk(d.mu);
  d.allocated = d.active = d.requested = allocated;
  d.reserved = reserved;
  d.peak_allocated = peak_allocated;
  d.peak_reserved = peak_reserved;
  d.num_ooms = num_ooms;
}

namespace {
std::mutex g_reader_mu;  // Note [Figures on the sampler's thread]: taken before PyTorch's allocator lock, never after
FiguresReader g_reader = nullptr;
}  // namespace

namespace {
// One device's figures through the reader; g_reader_mu held.
void read_figures(int device) {
  int64_t v[6] = {0, 0, 0, 0, 0, 0};
  if (g_reader == nullptr || g_reader(device, v) != 0) return;  // a device it cannot read keeps its last figures
  for (int64_t x : v)
    if (x < 0) return;
  set_figures(device, uint64_t(v[0]), uint64_t(v[1]), uint64_t(v[2]), uint64_t(v[3]), uint64_t(v[4]));
}
}  // namespace

void set_figures_reader(FiguresReader read) {
  std::lock_guard<std::mutex> lk(g_reader_mu);  // a read in progress ends first
  // Note [Last figures] (recorder.cc's shutdown): the host clears the reader as its interpreter ends; every device's
  // figures are read once more first, for the capture's last pass.
  if (read == nullptr)
    for (int d = 0; d < device_count(); d++) read_figures(d);
  g_reader = read;
}

void refresh_figures(int device) {
  std::lock_guard<std::mutex> lk(g_reader_mu);
  read_figures(device);
}

core::Figures figures(int device) {
  sequencer::drain();  // the figures as of now, queued entries included
  core::Figures f{};
  for (int i = (device < 0 ? 0 : device); i < (device < 0 ? kMaxDevices : std::min(device + 1, kMaxDevices)); i++) {
    Dev& d = devs()[size_t(i)];
    std::lock_guard<std::mutex> lk(d.mu);
    f.allocated += d.allocated;
    f.reserved += d.reserved;
    f.active += d.active;
    f.requested += d.requested;
    f.peak_allocated += d.peak_allocated;
    f.peak_reserved += d.peak_reserved;
    f.num_ooms += d.num_ooms;
  }
  return f;
}

namespace {
// The stack gathered for this thread's malloc in progress (Note [Observer stacks]).
thread_local uint32_t t_gathered = 0;
thread_local bool t_have_gathered = false;
}  // namespace

uint32_t gather() {
  t_gathered = capture_stack();  // with the module marks of the module thread (module_marks.h)
  t_have_gathered = true;
  return t_gathered;
}

uint32_t take_stack(int action) {
  if (t_have_gathered) {
    const uint32_t id = t_gathered;
    if (action == ALLOC || action == OOM) t_have_gathered = false;  // the malloc it was gathered for ends here
    return id;
  }
  return stacks::capture_if_gil_held();
}

uint32_t stack_of(int device, uint64_t addr, uint64_t size) {
  if (device < 0 || device >= kMaxDevices) return 0;
  Dev& d = devs()[size_t(device)];
  std::lock_guard<std::mutex> lk(d.mu);
  const Live* it = d.live.find(addr);
  if (it && size && it->size != size && events_are_off()) return 0;  // Note [Recorded steps]: another block now
  return it ? it->stack : 0;
}

namespace {
std::atomic<bool> g_events_off{false};
std::atomic<bool> g_unqueued{false};  // unqueued(): the stats source, no event will ever come
}  // namespace

bool events_are_off() { return g_events_off.load(std::memory_order_relaxed); }

void events_off(const std::string& why) {
  if (g_events_off.exchange(true)) return;  // once: the first marker says from when
  // An entry a thread was pushing as the flag turned lands behind what drain() takes now and before the marker, and
  // is applied with it by stop(): at most one per allocating thread, from before this moment.
  sequencer::drain();
  mark(why, fmt::MARK_EVENTS_OFF);
  // Nothing is queued from now on but the records of markers, tags and notices, which then go to the writer at once
  // (sequencer::record): the thread would only wake 200 times a second for nothing.
  unqueued();
}

void unqueued() {
  g_unqueued.store(true, std::memory_order_relaxed);
  sequencer::stop();
}

bool entries_expected() {
  return !g_events_off.load(std::memory_order_relaxed) && !g_unqueued.load(std::memory_order_relaxed);
}

namespace {
// A state names segments and blocks the observer may not have seen made (those from before it started): they
// join the layout that block sizes are read from (Note [Observed block sizes]).
void seed_layout(int device, const json::Value& seg, const json::Value* blocks, size_t nb) {
  if (device < 0 || device >= kMaxDevices) return;
  Dev& d = devs()[size_t(device)];
  std::lock_guard<std::mutex> lk(d.mu);
  const uint64_t addr = u64(seg, "address"), size = u64(seg, "total_size");
  if (addr && size) d.segments.emplace(addr, size);
  for (size_t i = 0; i < nb; i++) {
    const json::Value& b = blocks->items()[i];
    const json::Value* st = b.find("state");
    if (st && st->is_string() && block_state(st->as_string()) != fmt::BLOCK_INACTIVE && u64(b, "size") > kSmallSize)
      d.blocks.emplace(u64(b, "address"), u64(b, "size"));
  }
}
}  // namespace

int64_t write_state_json(int device, uint32_t reason, const std::string& segments_json, std::string* err) {
  static std::atomic<uint32_t> snapshot_id{1u << 31};  // apart from the recorder's own ids
  sequencer::drain();  // the state follows every event before it; its blocks' stacks are read from them
  json::Value segs;
  if (!json::parse(segments_json, &segs, err)) return -1;
  if (!segs.is_array()) {
    *err = "segments must be a JSON array (torch.cuda.memory._snapshot()['segments'])";
    return -1;
  }
  if (!writer::is_open()) {
    *err = "no capture is open";
    return -1;
  }
  std::string body;
  uint32_t nseg = 0;
  for (const json::Value& s : segs.items()) {
    if (!s.is_object()) continue;
    const json::Value* sd = s.find("device");
    if (sd && sd->is_int() && sd->as_int() != device) continue;
    const json::Value* blocks = s.find("blocks");
    const json::Value* pool = s.find("segment_pool_id");
    uint64_t p0 = 0, p1 = 0;
    if (pool && pool->is_array() && pool->items().size() == 2) {
      p0 = uint64_t(pool->items()[0].as_int());
      p1 = uint64_t(pool->items()[1].as_int());
    }
    const json::Value* type = s.find("segment_type");
    const json::Value* exp = s.find("is_expandable");
    uint16_t flags = type && type->is_string() && type->as_string() == "small" ? fmt::kPoolSmall : fmt::kPoolLarge;
    if (p0 || p1) flags |= fmt::kPoolPrivate;
    if (exp && exp->is_bool() && exp->as_bool()) flags |= fmt::kSegExpandable;
    const size_t nb = blocks && blocks->is_array() ? blocks->items().size() : 0;
    if (!(flags & fmt::kSegExpandable)) seed_layout(device, s, blocks, nb);
    fmt::StateSegment ss{
        u64(s, "address"), u64(s, "total_size"), u64(s, "stream"), p0, p1, 0, flags, 0, uint32_t(nb), 0};
    body.append(reinterpret_cast<const char*>(&ss), sizeof ss);
    for (size_t i = 0; i < nb; i++) {
      const json::Value& b = blocks->items()[i];
      const json::Value* st = b.find("state");
      uint8_t state = st && st->is_string() ? block_state(st->as_string()) : uint8_t(fmt::BLOCK_INACTIVE);
      uint64_t addr = u64(b, "address");
      uint64_t requested = b.find("requested_size") ? u64(b, "requested_size") : u64(b, "size");
      fmt::StateBlock sb{addr,      u64(b, "size"),
                         requested, state == fmt::BLOCK_INACTIVE ? 0u : stack_of(device, addr, u64(b, "size")),
                         state,     {0, 0, 0}};
      body.append(reinterpret_cast<const char*>(&sb), sizeof sb);
    }
    nseg++;
  }
  fmt::StateRec sr{now_ns(), snapshot_id.fetch_add(1), reason, nseg, 0};
  int64_t off =
      writer::append(fmt::REC_STATE, uint8_t(device), 0, &sr, sizeof sr, body.data(), uint32_t(body.size()), true);
  if (off < 0) *err = "the state record was not written";
  return off;
}

}  // namespace gpumem::rec::observer
