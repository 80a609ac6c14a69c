// The native model: one per opened file (capture or PyTorch snapshot pickle), one event stream per
// device. Columns are stored struct-of-arrays so 10 M events stay compact and scans stay cache-friendly.
#pragma once
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "flat_map.h"

namespace gpumem {

enum Action : uint8_t {
  ACT_ALLOC = 0,
  ACT_FREE_REQUESTED,
  ACT_FREE_COMPLETED,
  ACT_SEGMENT_ALLOC,
  ACT_SEGMENT_FREE,
  ACT_SEGMENT_MAP,
  ACT_SEGMENT_UNMAP,
  ACT_SNAPSHOT,
  ACT_OOM,
  ACT_EMPTY_CACHE,
  ACT_COUNT
};
extern const char* const kActionNames[ACT_COUNT];

enum Pool : uint8_t { POOL_LARGE = 0, POOL_SMALL = 1, POOL_PRIVATE = 2 };
enum BlockSt : uint8_t { ST_INACTIVE = 0, ST_ALLOCATED = 1, ST_PENDING_FREE = 2 };
extern const char* const kBlockStateNames[3];

constexpr uint32_t kNoLink = UINT32_MAX;
struct ReplayCache;  // replay.h
struct OwnerCache;   // aggregate.cpp

// Note [Wrapping sums]: byte counts from files are untrusted; sums wrap (two's complement) instead of
// overflowing a signed integer, which would be undefined behaviour. Real figures never get near 2^63.
inline int64_t wrap_add(int64_t a, uint64_t b) { return (int64_t)((uint64_t)a + b); }
inline int64_t wrap_sub(int64_t a, uint64_t b) { return (int64_t)((uint64_t)a - b); }
inline int64_t wrap_diff(uint64_t a, uint64_t b) { return (int64_t)(a - b); }

struct FrameData {
  uint32_t file;  // string id
  uint32_t name;  // string id
  uint32_t line;
};

struct StackData {
  uint32_t first;  // index into Model::stack_frames
  uint32_t count;
  bool backward;
  // Derived once at interning: the innermost user frame (UINT32_MAX: none).
  uint32_t user_frame;
  // Note [Backward on the forward line] (native/allocator/src/backward_links.h; FORMAT.md's kStackLinked): a stack
  // made while an autograd node ran. `linked`: its frames up to the <backward> pseudo-frame are the forward op's (so
  // user_frame is the forward line); `node`/`module`: the node's name and the forward module's path (string ids, 0:
  // none); `separator`: the <backward> frame's index in the stack (UINT32_MAX: none); `caller_frame`: the innermost
  // user frame after it (the backward() line).
  bool linked = false, recomputed = false;
  uint32_t node = 0, module = 0;
  uint32_t separator = UINT32_MAX, caller_frame = UINT32_MAX;
};

struct BlockData {
  uint64_t addr, size, requested;
  uint32_t stack;
  uint8_t state;
  // Note [Untraced blocks]: allocated in a pickle's segments, but no allocation in its trace is live at the end (it
  // was made before _record_memory_history began, or its alloc fell out of the trace's ring buffer): who made it and
  // when is unknown. memory_viz calls these "ghost blocks".
  bool untraced = false;
};

struct SegmentData {
  uint64_t addr, size, stream;
  uint64_t pool_id0 = 0, pool_id1 = 0;
  uint32_t stack = 0;
  uint8_t pool = POOL_LARGE;
  bool expandable = false;
  // Figures a pickle carries per segment (kept for exact export); recomputed from blocks otherwise.
  std::vector<BlockData> blocks;
};

struct MarkerData {
  int64_t t_us;
  uint8_t kind;             // index into kMarkerKinds (model.cpp)
  uint32_t label;           // string id
  std::string detail_json;  // "" or a JSON object
};

struct OomData {
  int64_t t_us;
  uint64_t requested, device_free, device_total, reserved, allocated, largest_free;
  uint32_t stack;
  bool have_figures;  // capture OOM records carry reserved/allocated/largest; pickles do not
  uint32_t event_index;
};

// A REC_TAG (Note [Tags]): resolved against the allocations live after events [0, event_index).
struct TagData {
  uint32_t event_index;
  uint64_t addr, size;
  uint8_t category;  // fmt::TagCategory
};

// A phase boundary (Note [Categories] in categories.cpp): after events [0, event_index), the workload is in
// `phase` until the next boundary.
enum Phase : uint8_t { PHASE_OTHER = 0, PHASE_BACKWARD = 1, PHASE_OPTIMIZER = 2 };
struct PhaseMark {
  uint32_t event_index;
  uint8_t phase;
};
// A module forward begins (begin) or ends after events [0, event_index) (MARK_MODULE_*, Note [Module paths]).
struct ModuleMark {
  uint32_t event_index;
  uint32_t path;  // string id
  bool begin;
};

struct SampleData {
  int64_t t_us;
  uint64_t used, total;
};

// Note [Figures from stats]: REC_STATS holds the recorder's running figures at each sample. Every figure this reader
// shows is recomputed from the events, so where a device has events these are not read, until its events stop (Note
// [Figures after the events]). A device with none at all, an out-of-memory error aside (figures only: GPUMEM_EVENTS=0,
// or PyTorch's cudaMallocAsync backend, Note [Figures only] in native/python/gpumem/_observe.py) has nothing else:
// there current(), timeline() and the summary's peak come from these, as PyTorch's stats gave them, at the sampling
// rate.
struct FigureSample {
  int64_t t_us;
  int64_t allocated, reserved, peak_allocated, peak_reserved;
};

// Note [Figures after the events]: a capture may stop recording events part way (MARK_EVENTS_OFF, Note [Recorded
// steps] in native/python/gpumem/_recorded_steps.py: recordSteps N keeps the first N steps one by one). From the
// marker's time T_off on, the process records no allocation, free or segment event on any device, so a device that
// has events reads the REC_STATS samples at or after T_off (Note [Figures from stats]) for the figures the events no
// longer give:
//  - the marker is a process-wide fact (written once, device 0) held by the model (Model::events_off_us, the first
//    marker wins), so a device announced after it knows it too; each device applies it only where it has events and
//    samples at or after T_off (a live capture whose next sample has not come reads as before);
//  - timeline: buckets wholly before T_off are the events' as before; a bucket at or after it is bucketed from the
//    samples by Note [Figures from stats]'s rules (the value carried in, the bucket's own samples, the peak rise),
//    the value carried into the first being the events' allocated/reserved at T_off, and the peak rise of the first
//    sample measured from the events' peak up to T_off; the bucket T_off falls in spans both (min/max of the events
//    up to T_off and the samples from it);
//  - current: allocated/reserved as the last sample gave them, at its time; peaks the higher of the events' and the
//    samples' after T_off;
//  - summary: the peak is the higher of the events' peak and the samples' peaks after T_off, at the time of the
//    sample that first said so. PyTorch's peak counts from the process start, so a sample usually repeats the events'
//    peak: on a tie the events' peak (and its exact time) is kept;
//  - the time range extends to the last sample after T_off.
// What the events alone can tell stays on them: the lines at the peak, categories up to T_off (null after it),
// leaks over the steps that end before it, segments and the allocator state. The summary's end (reserved, allocated)
// and the rows of steps that end after T_off are PyTorch's figures at a sample, with the allocator's segments and
// blocks then null (Notes [Figures at the end] and [Figures at step ends] in aggregate.cpp).
// The user sees the moment as a notice on device 0 (process-wide, like every notice): "allocations no longer
// recorded one by one (recordSteps 5): from here on, PyTorch's figures at each sample".

// Min/max pyramid over a step series (value after each event): level k holds min/max of 8^k events.
struct Pyramid {
  std::vector<std::vector<int64_t>> mins, maxs;
  size_t built_for = 0;
};

// Note [Bulk prefault]: on the development VM a page fault costs ~2 µs, so filling 400 MB of fresh
// columns one fault per 4 KiB page took longer than the work itself. After reserving a big column,
// one madvise(MADV_POPULATE_WRITE) maps its pages in bulk (contents untouched; a no-op before Linux 5.14).
// Done inline it cost about what the faults it saved did; done by a helper thread while the pickle
// import runs (snapshot_import.cpp), it took derive() from 115–640 ms to 40 ms on a 10 M-event pickle.
void prefault_spare(void* begin, size_t bytes);

// The loop of both readers' prefault helper threads (snapshot_import.cpp, Note [Prefault helper] in
// capture_decoder.cpp): until `running` turns false, maps each column's pages up to `ahead` rows past the rows
// decoded so far (`progress`), a column's bytes per row being its reservation over `capacity` rows.
void prefault_columns_ahead(const std::vector<std::pair<void*, size_t>>& cols, size_t capacity,
                            const std::atomic<size_t>& progress, const std::atomic<bool>& running,
                            size_t ahead = size_t(1) << 18);

// Note [Huge columns]: a capture's columns are reserved once from its size (CaptureDecoder::size_hint), and
// filling 290 MB of them (a 256 MiB budgeted capture, 4.6 M events) took ~70 k page faults of 4 KiB, a third of
// the open's CPU on the development VM. madvise(MADV_HUGEPAGE) on a big reservation lets the kernel back it with
// 2 MiB pages where transparent huge pages are enabled in 'madvise' mode (the usual default): one fault per
// 2 MiB. Only ranges ≥ 4 MiB are advised, so at most one huge page per column is filled beyond what is written;
// where THP is off or unsupported it is a no-op.
void advise_huge(void* begin, size_t bytes);

struct DeviceData {
  int index = 0;
  // Event columns (same length).
  std::vector<int64_t> t;
  std::vector<uint64_t> addr, size;
  std::vector<uint32_t> waste;  // size − requested (0 when unknown)
  std::vector<uint64_t> stream;
  std::vector<uint32_t> stack;
  std::vector<uint8_t> action;
  std::vector<uint8_t> pool;
  // Derived columns, extended as events arrive.
  std::vector<uint32_t> link;                // alloc → its free_requested; free_requested → its alloc
  std::vector<int64_t> allocated, reserved;  // after each event
  AddrIndexMap live_by_addr;                 // addr → alloc index, for pairing
  int64_t start_allocated = 0, start_reserved = 0;
  int64_t peak_allocated = 0;
  int64_t peak_index = -1;  // -1: the start value is the peak
  int64_t peak_reserved = 0;
  size_t derived_up_to = 0;
  Pyramid alloc_pyr, res_pyr;

  // Sparse extras for exact pickle round trips (event index → string ids).
  std::unordered_map<uint32_t, std::pair<uint32_t, uint32_t>> context_and_metadata;
  // The private pool (MempoolId_t) of segment events in one: a CUDA graph's or a torch.cuda.MemPool's (event index →
  // pool id; the default pools' events are not listed). The policy replay keeps each pool's allocations in it.
  std::unordered_map<uint32_t, std::pair<uint64_t, uint64_t>> segment_pools;

  // Final allocator state as the file states it (pickle segments / a capture's last REC_STATE); its
  // position in the event stream: the state holds after events [0, final_after).
  // Captures start with an empty allocator; a pickle's start is only known by undoing its trace.
  bool start_empty = false;
  bool have_final = false;
  size_t final_after = 0;
  std::vector<SegmentData> final_segments;
  // A window of a pickle (Note [Range-first open] in range_open.cpp): moments are replayed forward from the
  // window's start state (checkpoints[0]), never undone from the final state (links to allocs before the
  // window are not held).
  bool forward_only = false;
  // Allocations of the trace before the window that are live at its start (address, size, stack): the bytes per
  // line of a moment count them as the full open does (it holds their alloc events).
  struct StartAlloc {
    uint64_t addr, size;
    uint32_t stack;
  };
  std::vector<StartAlloc> window_start_allocs;
  // Capture REC_STATE records as checkpoints for forward replay.
  std::vector<std::pair<size_t, std::vector<SegmentData>>> checkpoints;

  // Allocator states met while replaying (every 2^18 events), so the next query starts nearby;
  // events only ever get appended, so a cached state stays true.
  mutable std::shared_ptr<ReplayCache> replay_cache;
  // Owner groups of the timeline (Note [Owner bands] in aggregate.cpp), rebuilt when events arrive.
  mutable std::shared_ptr<OwnerCache> owner_cache;

  std::vector<MarkerData> markers;
  std::vector<OomData> ooms;
  std::vector<SampleData> samples;
  std::vector<FigureSample> figures;  // Note [Figures from stats]
  std::vector<TagData> tags;
  std::vector<PhaseMark> phases;
  std::vector<ModuleMark> module_marks;
  // Budgeted captures (FORMAT.md §5): indices of restated events (increasing; not hand-outs, skipped in counts and
  // totals), allocations per stack of compacted ranges (model stack id → count, bytes) and their timeline buckets.
  std::vector<uint32_t> restated;
  std::unordered_map<uint32_t, std::pair<uint64_t, uint64_t>> compacted_lines;
  struct Bucket {
    int64_t t_us, t_end_us, allocated_min, allocated_max, reserved_min, reserved_max;
  };
  std::vector<Bucket> compacted_timeline;

  size_t count() const { return t.size(); }
  // Note [Figures from stats]: no event at all, but the recorder's figures, and memory in them (a device the
  // process never used has samples of zeros: Note [Devices with no events] leaves it out).
  bool figures_only() const {
    // An out-of-memory error is an event row (ACT_OOM) but no allocation: figures only writes one from PyTorch's OOM
    // observer (Note [Figures only]), and with it counted every figure of the device read 0.
    for (uint8_t a : action)
      if (a != ACT_OOM) return false;
    for (const FigureSample& f : figures)
      if (f.reserved > 0 || f.peak_reserved > 0 || f.allocated > 0) return true;
    return false;
  }
  void reserve(size_t n) {
    t.reserve(n), addr.reserve(n), size.reserve(n), waste.reserve(n), stream.reserve(n), stack.reserve(n);
    action.reserve(n), pool.reserve(n);
  }
  // Advises the unused capacity of every column as huge pages (Note [Huge columns]).
  void advise_huge_columns() {
    for (auto& [p, bytes] : spare_columns()) advise_huge(p, bytes);
  }
  // The unused capacity of every event column (for a prefault helper, Note [Bulk prefault]).
  std::vector<std::pair<void*, size_t>> spare_columns() {
    std::vector<std::pair<void*, size_t>> out;
    auto add = [&](auto& v) { out.emplace_back(v.data() + v.size(), (v.capacity() - v.size()) * sizeof(v[0])); };
    // Interleaved the way the import fills them: the time and identity columns first.
    add(t), add(action), add(addr), add(size), add(waste), add(stream), add(stack), add(pool);
    add(link), add(allocated), add(reserved);
    return out;
  }
  void push_event(int64_t t_us, uint8_t act, uint64_t a, uint64_t sz, uint64_t requested, uint64_t strm, uint32_t stk,
                  uint8_t pl) {
    t.push_back(t_us);
    action.push_back(act);
    addr.push_back(a);
    size.push_back(sz);
    uint64_t w = requested && requested <= sz ? sz - requested : 0;
    waste.push_back(w > UINT32_MAX ? UINT32_MAX : (uint32_t)w);
    stream.push_back(strm);
    stack.push_back(stk);
    pool.push_back(pl);
  }
};

// Note [Snapshot extras]: what a PyTorch snapshot carries beyond the events and segments, read by
// snapshot_import.cpp and answered by extras_json (aggregate.cpp).
//  - A key this reader does not know (a later PyTorch's, a tool's) is never dropped in silence: where it was, its
//    name, how many dicts had it and the first value as JSON (UnknownKey). A top-level one keeps its whole value
//    (up to kRawTopLevelBytes), since it is one value, not one per entry.
//  - allocator_settings as JSON (every key, as the run had it), beside the raw pickle kept for export.
//  - Pinned host memory (PyTorch 2.14's host_segments and host_traces): its own segments and trace, never mixed
//    into a device's figures (Note [Host memory]).
struct UnknownKey {
  std::string where;  // "snapshot" (top level), "segment", "block", "trace entry", "frame", "annotation", …
  std::string key;
  uint64_t count = 0;
  std::string raw;  // JSON of the first value seen
};
inline constexpr size_t kRawValueBytes = 2000, kRawTopLevelBytes = 64 * 1024;

// An FX frame (torch.compile, `_snapshot(augment_with_fx_traces=True)`, PyTorch 2.10+): the compiled graph's node
// the generated code line belongs to and the user's source line it was traced from (Note [FX frames]).
struct FxFrame {
  uint32_t op = 0, name = 0, target = 0, trace = 0;  // string ids ("" absent)
  uint32_t origin = UINT32_MAX;                      // frame id of the user's line in `trace` (UINT32_MAX none)
};

struct Problem {
  uint64_t offset;
  std::string message;
  // "damage" (the file is unreadable from offset on), "lost" (REC_LOST: the recorder dropped events),
  // "incomplete" (a record cut off at the end), "header" (the header JSON lacks something), "skipped".
  const char* kind = "damage";
};

// A device as a capture's REC_DEVICE announced it (Note [Devices] in gpumem_format.h).
struct DeviceIdentity {
  std::string name;
  uint64_t total_bytes = 0;
  std::string pci_bus_id;  // "" unknown
};

// How a capture ended (REC_END, FORMAT minor 2) and what it lost on the way (REC_LOST).
struct CaptureEnd {
  bool seen = false;
  int64_t t_us = 0;
  int32_t exit_code = -1;
  uint32_t reason = 0;  // fmt::EndReason
  std::string message;
};

// A compacted range of a budgeted capture (REC_AGGREGATED, FORMAT.md §5).
struct AggregatedRange {
  int64_t from_us, to_us;
  uint64_t events, bytes, budget_bytes;
  uint32_t restated, peaks;
};

struct Model {
  std::vector<AggregatedRange> aggregated;
  std::string format;                     // "gpumem-capture" | "pytorch-pickle"
  std::string header_json = "{}";         // CaptureHeaderInfo as JSON
  std::string allocator_settings_pickle;  // raw pickle opcodes of allocator_settings (round trip), may be empty
  std::string allocator_settings_json;    // the same as JSON (Note [Snapshot extras]), empty when absent
  std::vector<UnknownKey> unknown_keys;
  // Note [Host memory]: pinned host memory of a 2.14 snapshot; its own segments (final_segments, have_final) and
  // trace (the event columns, derived like a device's). has_host: the snapshot has either key.
  bool has_host = false;
  DeviceData host;
  std::unordered_map<uint32_t, FxFrame> fx_frames;  // frame id → its FX facts (Note [FX frames])
  // Pickles: whether segments carry is_expandable (-1 no key, 0 all false, 1 some true) and
  // allocator_settings' expandable_segments (-1 absent); Note [Policy of the data] in policy_replay.cpp.
  int8_t pickle_segments_expandable = -1, pickle_settings_expandable = -1;
  std::vector<std::string> strings{""};  // id 0 = ""
  std::unordered_map<std::string, uint32_t> string_ids{{"", 0}};
  std::vector<FrameData> frames;
  // (file, name) string ids and line → frame id: a frame is its value (a 1 M-event pickle dumped by
  // PyTorch has a fresh dict for every frame of every entry; as values they are a few thousand).
  struct FrameKeyHash {
    size_t operator()(const std::pair<uint64_t, uint32_t>& k) const {
      return std::hash<uint64_t>()(k.first * 0x9E3779B97F4A7C15ull ^ k.second);
    }
  };
  std::unordered_map<std::pair<uint64_t, uint32_t>, uint32_t, FrameKeyHash> frame_ids;
  std::vector<uint32_t> stack_frames;
  std::vector<StackData> stacks{StackData{0, 0, false, UINT32_MAX}};  // id 0 = no frames
  std::map<std::vector<uint32_t>, uint32_t> stack_ids;
  std::map<int, DeviceData> devices;
  std::vector<Problem> problems;
  // Folders whose frames are never user code beyond the rule: the lens bootstrap that wraps
  // backward() (a capture header's "bootstrap_dir"), so attribution lands on the user's own line.
  std::vector<std::string> non_user_dirs;
  bool ended = false;
  CaptureEnd end;
  std::map<int, DeviceIdentity> device_ids;
  uint64_t lost_events = 0;
  int64_t first_lost_us = 0;  // the last record's time before the first REC_LOST (valid when lost_events > 0)
  // Latest time of any record read (events, samples, markers…): where a capture that ends early stops.
  bool have_last_us = false;
  int64_t last_us = 0;
  // Note [Figures after the events]: from this time on (MARK_EVENTS_OFF) no device records events one by one.
  bool events_off = false;
  int64_t events_off_us = 0;
  void saw_time(int64_t t_us) {
    if (!have_last_us || t_us > last_us) last_us = t_us;
    have_last_us = true;
  }

  uint32_t intern(std::string_view s);
  uint32_t intern_frame(uint32_t file, uint32_t name, uint32_t line);
  uint32_t intern_stack(const std::vector<uint32_t>& frame_ids, bool backward) {
    return intern_stack(frame_ids, backward ? 1u : 0u);
  }
  // `flags`: the capture's StackRec flags (kStackBackward, kStackLinked, kStackRecomputed).
  uint32_t intern_stack(const std::vector<uint32_t>& frame_ids, uint32_t flags);
  DeviceData& device(int index);
  // Pairs allocations with frees and extends the allocated/reserved series for events added since the
  // last call (both sources; the live tail calls it after every poll).
  void derive();
  bool is_user_file(uint32_t file_string_id) const;
  // Records an unknown key (Note [Snapshot extras]); raw: the value as JSON, rendered by the caller.
  void note_unknown_key(std::string_view where, std::string_view key, const std::string& raw);
  bool knows_unknown_key(std::string_view where, std::string_view key) const;
};

// Model::derive's work on one event stream (a device's, or the host's: Note [Host memory]).
void derive_events(DeviceData& d);

// The user-frame rule, Note [User frames] (native/format/README.md): user code unless the file name is
// empty or a pseudo-file ('<string>', '<frozen runpy>'), or the path has a site-packages or dist-packages
// directory, or a lib/pythonX[.Y][t] (or lib64/…) directory (the standard library), or lies in one of
// internal_dirs (the tool's own: a capture header's bootstrap_dir). '\\' counts as '/'. Its table of cases
// is native/format/user_frames_cases.json; TypeScript gets the answer per frame from stack_json's "user".
bool is_user_path(std::string_view path, const std::vector<std::string>& internal_dirs = {});

}  // namespace gpumem
