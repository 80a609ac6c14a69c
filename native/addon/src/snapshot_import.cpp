// PyTorch snapshot pickle (torch.cuda.memory._dump_snapshot) → Model.
//
// Every key is optional (PyTorch 2.1–2.11 differ: no requested_size, no frames on blocks, no time_us,
// no is_expandable…); missing figures fall back to what can be derived. Frame lists and frame dicts are
// memoised by pickle.dump, so the tree shares them: interning caches key on tree nodes, which makes a
// 1 M-event trace cost one hash lookup per event instead of one per frame.
#include "snapshot_import.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <system_error>
#include <thread>
#include <unordered_map>

#include "pickle_emit.h"
#include "pickle_reader.h"

namespace gpumem {

namespace {

struct Importer {
  const PickleTree& t;
  Model& m;
  // Note [Node caches]: what a tree node became (string id, frame id, stack id, or key kind), indexed by
  // node: a node is one string, one frame dict or one frame list, so one table serves all three. A
  // 10 M-event trace asks ~12 times per entry; a flat table answers without hashing. Zeroed pages
  // from calloc cost nothing until touched, and memoised nodes (the ones asked again) are few.
  struct NodeTable {
    uint32_t* p = nullptr;
    size_t n = 0;
    explicit NodeTable(size_t count) : p(static_cast<uint32_t*>(calloc(count ? count : 1, sizeof(uint32_t)))), n(count) {
      if (!p) throw std::bad_alloc();
    }
    ~NodeTable() { free(p); }
    NodeTable(const NodeTable&) = delete;
    NodeTable& operator=(const NodeTable&) = delete;
    // 0 = not cached yet; otherwise value + 1.
    uint32_t get(uint32_t node) const { return node < n ? p[node] : 0; }
    void set(uint32_t node, uint32_t v) {
      if (node < n) p[node] = v + 1;
    }
  };
  NodeTable cache;  // str/frame/stack ids
  NodeTable keyKinds;  // TraceKey + 2 (1 = not a trace key)

  struct Prefault {
    std::vector<std::pair<void*, size_t>> ranges;
  };
  std::vector<std::thread> helpers;
  void joinHelpers() {
    for (auto& th : helpers)
      if (th.joinable()) th.join();
    helpers.clear();
  }
  ~Importer() { joinHelpers(); }

  Importer(const PickleTree& tree, Model& model) : t(tree), m(model), cache(tree.valueCount()), keyKinds(tree.valueCount()), actionKinds(tree.valueCount()) {}

  uint32_t str(uint32_t node) {
    if (node == PickleTree::kNone || !t.isStr(node)) return 0;
    if (uint32_t c = cache.get(node)) return c - 1;
    uint32_t id = m.intern(t.str(node));
    cache.set(node, id);
    return id;
  }

  uint32_t frame(uint32_t node) {
    if (uint32_t c = cache.get(node)) return c - 1;
    uint32_t id = m.internFrame(str(t.get(node, "filename")), str(t.get(node, "name")),
                                (uint32_t)t.asInt(t.get(node, "line"), 0));
    cache.set(node, id);
    return id;
  }

  std::vector<uint32_t> frameIds;
  uint32_t stack(uint32_t framesNode) {
    if (framesNode == PickleTree::kNone) return 0;
    PType ty = t.at(framesNode).type;
    if (ty != PType::List && ty != PType::Tuple) return 0;
    if (uint32_t c = cache.get(framesNode)) return c - 1;
    frameIds.clear();
    for (uint32_t f : t.items(framesNode))
      if (t.at(f).type == PType::Dict) frameIds.push_back(frame(f));
    uint32_t id = m.internStack(frameIds, false);
    cache.set(framesNode, id);
    return id;
  }

  bool isList(uint32_t n) const {
    return n != PickleTree::kNone && (t.at(n).type == PType::List || t.at(n).type == PType::Tuple);
  }

  enum TraceKey { K_ACTION, K_ADDR, K_SIZE, K_STREAM, K_TIME, K_FRAMES, K_COMPILE_CONTEXT, K_USER_METADATA, K_DEVICE_FREE, K_COUNT };
  int keyKind(uint32_t node) {
    if (uint32_t c = keyKinds.get(node)) return (int)c - 2;
    static const char* const names[K_COUNT] = {"action", "addr", "size", "stream", "time_us", "frames", "compile_context", "user_metadata", "device_free"};
    int kind = -1;
    if (t.isStr(node))
      for (int k = 0; k < K_COUNT; k++)
        if (t.str(node) == names[k]) kind = k;
    keyKinds.set(node, (uint32_t)(kind + 1));
    return kind;
  }
  // Action of an action string node (memoised by pickle: one node per action name), cached the same way.
  NodeTable actionKinds;
  int actionNode(uint32_t node) {
    if (uint32_t c = actionKinds.get(node)) return (int)c - 2;
    int act = t.isStr(node) ? actionOf(t.str(node)) : -1;
    actionKinds.set(node, (uint32_t)(act + 1));
    return act;
  }

  static int actionOf(std::string_view a) {
    for (int k = 0; k < ACT_COUNT; k++)
      if (a == kActionNames[k]) return k;
    return -1;
  }

  void segments(uint32_t list) {
    if (!isList(list)) return;
    for (uint32_t s : t.items(list)) {
      if (t.at(s).type != PType::Dict) continue;
      int dev = deviceIndex(t.asInt(t.get(s, "device"), 0));
      if (dev < 0) continue;
      SegmentData g;
      g.addr = t.asU64(t.get(s, "address"));
      g.size = t.asU64(t.get(s, "total_size"));
      g.stream = t.asU64(t.get(s, "stream"));
      std::string_view type = t.isStr(t.get(s, "segment_type")) ? t.str(t.get(s, "segment_type")) : "";
      g.pool = type == "small" ? (uint8_t)POOL_SMALL : type == "large" ? (uint8_t)POOL_LARGE : poolFromSizeFallback(g.size);
      uint32_t pid = t.get(s, "segment_pool_id");
      if (isList(pid) && t.items(pid).size() == 2) {
        g.poolId0 = t.asU64(t.items(pid)[0]);
        g.poolId1 = t.asU64(t.items(pid)[1]);
        if (g.poolId0 || g.poolId1) g.pool = POOL_PRIVATE;
      }
      uint32_t isExp = t.get(s, "is_expandable");
      g.expandable = t.asInt(isExp, 0) != 0;
      // The policy that made the data (policy_replay.cpp, Note [Policy of the data]).
      if (isExp != PickleTree::kNone) m.pickleSegmentsExpandable = std::max<int8_t>(m.pickleSegmentsExpandable, g.expandable ? 1 : 0);
      g.stack = stack(t.get(s, "frames"));
      uint32_t blocks = t.get(s, "blocks");
      uint64_t cursor = g.addr;  // old snapshots: blocks without addresses, in address order
      uint64_t blockSum = 0;
      if (isList(blocks)) {
        for (uint32_t b : t.items(blocks)) {
          if (t.at(b).type != PType::Dict) continue;
          BlockData bd;
          bd.addr = t.get(b, "address") != PickleTree::kNone ? t.asU64(t.get(b, "address")) : cursor;
          bd.size = t.asU64(t.get(b, "size"));
          bd.requested = t.get(b, "requested_size") != PickleTree::kNone ? t.asU64(t.get(b, "requested_size")) : bd.size;
          std::string_view st = t.isStr(t.get(b, "state")) ? t.str(t.get(b, "state")) : "";
          bd.state = st == "active_allocated" ? ST_ALLOCATED : st == "active_pending_free" ? ST_PENDING_FREE : ST_INACTIVE;
          bd.stack = stack(t.get(b, "frames"));
          cursor = bd.addr + bd.size;
          blockSum += bd.size;
          g.blocks.push_back(bd);
        }
      }
      if (g.size == 0) g.size = blockSum;  // very old snapshots may omit total_size
      DeviceData& d = m.device(dev);
      d.finalSegments.push_back(std::move(g));
    }
  }

  // Note [Device indexes]: CUDA device ordinals are small; an index outside [0, kMaxDevices) is damage,
  // reported once and skipped rather than allowed to size per-device tables.
  static constexpr int64_t kMaxDevices = 1024;
  bool badDeviceReported = false;
  int deviceIndex(int64_t d) {
    if (d >= 0 && d < kMaxDevices) return (int)d;
    if (!badDeviceReported)
      m.problems.push_back(Problem{0, "entries with device index " + std::to_string(d) + " (not a CUDA device ordinal) were skipped"});
    badDeviceReported = true;
    return -1;
  }

  static uint8_t poolFromSizeFallback(uint64_t size) { return size <= (2u << 20) ? POOL_SMALL : POOL_LARGE; }

  void trace(int dev, uint32_t list) {
    DeviceData& d = m.device(dev);
    if (!isList(list)) return;
    const auto& items = t.items(list);
    bool anyTime = false;
    for (uint32_t e : items)
      if (t.at(e).type == PType::Dict && t.get(e, "time_us") != PickleTree::kNone) {
        anyTime = true;
        break;
      }
    if (!anyTime && !items.empty())
      m.problems.push_back(Problem{0, "this snapshot's trace has no time_us (PyTorch before 2.2?): event numbers are used as times"});
    d.reserve(d.count() + items.size());
    // A helper maps the pages of the event columns (and of the three derive() fills) while this thread
    // imports (Note [Bulk prefault] in model.h); populating never changes contents, so racing is harmless.
    size_t total = d.count() + items.size();
    if (items.size() >= (1u << 20)) {
      d.link.reserve(total), d.allocated.reserve(total), d.reserved.reserve(total);
      Prefault pf{d.spareColumns()};
      try {
        helpers.emplace_back([pf] {
          for (const auto& [p, n] : pf.ranges) prefaultSpare(p, n);
        });
      } catch (const std::system_error&) {
        // no thread: derive() faults the pages in itself
      }
    }
    uint32_t naId = m.intern("N/A");
    size_t skipped = 0;
    int64_t lastT = 0;
    for (uint32_t e : items) {
      if (t.at(e).type != PType::Dict) continue;
      // One pass over the entry's keys (memoised key strings are one node each, so kinds are cached
      // per node); later duplicates win, as in a Python dict.
      uint32_t f[K_COUNT];
      for (uint32_t& x : f) x = PickleTree::kNone;
      const auto& kv = t.items(e);
      for (size_t k = 0; k + 1 < kv.size(); k += 2) {
        int kind = keyKind(kv[k]);
        if (kind >= 0) f[kind] = kv[k + 1];
      }
      uint32_t an = f[K_ACTION];
      int act = actionNode(an);
      if (act < 0) {
        skipped++;
        continue;
      }
      int64_t tUs = anyTime ? t.asInt(f[K_TIME], lastT) : (int64_t)d.count();
      // Note [Monotonic time]: the ring buffer is in event order; a clock step backwards is clamped so
      // time-window queries stay binary-searchable.
      if (tUs < lastT) tUs = lastT;
      lastT = tUs;
      uint64_t size = t.asU64(f[K_SIZE]);
      uint64_t addr = act == ACT_OOM ? t.asU64(f[K_DEVICE_FREE]) : t.asU64(f[K_ADDR]);
      uint8_t pool = POOL_LARGE;
      if (act == ACT_SEGMENT_ALLOC || act == ACT_SEGMENT_FREE) pool = poolFromSizeFallback(size);
      // Expandable pages: small pool maps 2 MiB pages, large 20 MiB ones; unmaps cover whole page runs.
      if (act == ACT_SEGMENT_MAP || act == ACT_SEGMENT_UNMAP) pool = size % (20u << 20) == 0 ? POOL_LARGE : POOL_SMALL;
      uint32_t stk = stack(f[K_FRAMES]);
      uint32_t idx = (uint32_t)d.count();
      d.pushEvent(tUs, (uint8_t)act, addr, size, 0, t.asU64(f[K_STREAM]), stk, pool);
      uint32_t cc = f[K_COMPILE_CONTEXT], um = f[K_USER_METADATA];
      uint32_t ccId = cc == PickleTree::kNone ? naId : str(cc), umId = um == PickleTree::kNone ? 0 : str(um);
      if (ccId != naId || umId != 0) d.contextAndMetadata[idx] = {ccId, umId};
      if (act == ACT_SNAPSHOT) d.markers.push_back(MarkerData{tUs, 4, m.intern("snapshot"), ""});
      if (act == ACT_OOM) {
        OomData o{};
        o.tUs = tUs;
        o.requested = size;
        o.deviceFree = addr;
        o.stack = stk;
        o.eventIndex = idx;
        d.ooms.push_back(o);
        d.markers.push_back(MarkerData{tUs, 5, m.intern("out of memory"), ""});
      }
    }
    if (skipped)
      m.problems.push_back(Problem{0, std::to_string(skipped) + " trace entries of device " + std::to_string(dev) +
                                          " have actions this reader does not know; they were skipped"});
  }

  void annotations(uint32_t list) {
    if (!isList(list)) return;
    for (uint32_t a : t.items(list)) {
      if (t.at(a).type != PType::Dict) continue;
      int dev = deviceIndex(t.asInt(t.get(a, "device"), 0));
      if (dev < 0) continue;
      uint32_t st = t.get(a, "stage");
      std::string_view stage = st != PickleTree::kNone && t.isStr(st) ? t.str(st) : "";
      uint8_t kind = stage == "START" ? 1 : stage == "END" ? 2 : 0;
      m.device(dev).markers.push_back(MarkerData{t.asInt(t.get(a, "time_us"), 0), kind, str(t.get(a, "name")), ""});
    }
  }

  // Re-emits a subtree as pickle opcodes (allocator_settings is kept verbatim for export).
  // Note [Emit budget]: memo references make the tree a DAG, so a tiny pickle can describe an
  // exponentially large value; re-emitting it is bounded by a node budget (allocator_settings is ~30).
  size_t emitBudget = 100000;
  void emit(fmt::PickleEmitter& p, uint32_t n, int depth) {
    if (depth > 32 || emitBudget == 0) return p.none();
    emitBudget--;
    const PValue& v = t.at(n);
    switch (v.type) {
      case PType::None: return p.none();
      case PType::Bool: return p.boolean(v.flag);
      case PType::Int: return p.integer((int64_t)v.raw);
      case PType::UInt: return p.uinteger(v.raw);
      case PType::BigInt: return p.none();
      case PType::Float: {
        double d;
        memcpy(&d, &v.raw, 8);
        return p.float64(d);
      }
      case PType::Str: return p.str(t.str(n));
      case PType::Bytes: return p.bytes_value(t.str(n));
      case PType::List:
      case PType::Tuple:
        v.type == PType::List ? p.begin_list() : p.begin_tuple();
        for (uint32_t c : t.items(n)) emit(p, c, depth + 1);
        return v.type == PType::List ? p.end_list() : p.end_tuple();
      case PType::Dict: {
        p.begin_dict();
        const auto& kv = t.items(n);
        for (size_t k = 0; k + 1 < kv.size(); k += 2) emit(p, kv[k], depth + 1), emit(p, kv[k + 1], depth + 1);
        return p.end_dict();
      }
      default: return p.none();
    }
  }
};

const char* typeName(PType t) {
  switch (t) {
    case PType::List: return "a list";
    case PType::Tuple: return "a tuple";
    case PType::Str: return "a string";
    case PType::Int: return "an integer";
    case PType::None: return "None";
    default: return "a plain value";
  }
}

}  // namespace

namespace {
// GPUMEM_READER_TIMINGS=1: phase times of each import on stderr (profiling aid, off by default).
struct PhaseTimer {
  bool on = getenv("GPUMEM_READER_TIMINGS") != nullptr;
  std::chrono::steady_clock::time_point last = std::chrono::steady_clock::now();
  void lap(const char* what) {
    if (!on) return;
    auto now = std::chrono::steady_clock::now();
    fprintf(stderr, "gpumem reader: %-8s %8.1f ms\n", what, std::chrono::duration<double, std::milli>(now - last).count());
    last = now;
  }
};
}  // namespace

void importSnapshot(Model& m, const uint8_t* data, size_t size) {
  PhaseTimer timer;
  auto treePtr = std::make_unique<PickleTree>(data, size);
  PickleTree& tree = *treePtr;
  timer.lap("parse");
  auto imPtr = std::make_unique<Importer>(tree, m);
  Importer& im = *imPtr;
  uint32_t root = tree.root();
  m.format = "pytorch-pickle";
  if (tree.at(root).type == PType::List) {
    // torch.cuda.memory_snapshot() (and PyTorch ≤ 2.0 dumps): just the segment list.
    im.segments(root);
  } else if (tree.at(root).type == PType::Dict &&
             (tree.get(root, "segments") != PickleTree::kNone || tree.get(root, "device_traces") != PickleTree::kNone)) {
    im.segments(tree.get(root, "segments"));
    uint32_t traces = tree.get(root, "device_traces");
    if (im.isList(traces)) {
      const auto& per = tree.items(traces);
      for (size_t dev = 0; dev < per.size() && dev < (size_t)Importer::kMaxDevices; dev++)
        if (im.isList(per[dev]) && !tree.items(per[dev]).empty()) im.trace((int)dev, per[dev]);
    }
    im.annotations(tree.get(root, "external_annotations"));
    uint32_t settings = tree.get(root, "allocator_settings");
    if (settings != PickleTree::kNone) {
      if (tree.at(settings).type == PType::Dict) {
        uint32_t e = tree.get(settings, "expandable_segments");
        if (e != PickleTree::kNone) m.pickleSettingsExpandable = tree.asInt(e, 0) != 0 ? 1 : 0;
      }
      fmt::PickleEmitter p(1024);
      im.emit(p, settings, 0);
      if (im.emitBudget > 0)
        m.allocatorSettingsPickle = p.take();
      else
        m.problems.push_back(Problem{0, "allocator_settings is implausibly large (shared sub-objects); it is not kept for export"});
    }
  } else {
    throw std::runtime_error(std::string("this pickle holds ") +
                             (tree.at(root).type == PType::Dict ? "a dict without 'segments' or 'device_traces'"
                                                                : typeName(tree.at(root).type)) +
                             ", not a PyTorch memory snapshot; create one with "
                             "torch.cuda.memory._dump_snapshot(\"snapshot.pickle\") after "
                             "torch.cuda.memory._record_memory_history()");
  }
  for (auto& [idx, d] : m.devices) {
    d.haveFinal = true;
    d.finalAfter = d.count();
    // Issue #4: replay starts from allocated_bytes − Σ(alloc) + Σ(free_requested); reserved likewise.
    int64_t alloc = 0, res = 0;
    for (const auto& s : d.finalSegments) {
      res = wrapAdd(res, s.size);
      for (const auto& b : s.blocks)
        if (b.state == ST_ALLOCATED) alloc = wrapAdd(alloc, b.size);
    }
    for (size_t i = 0; i < d.count(); i++) {
      switch (d.action[i]) {
        case ACT_ALLOC: alloc = wrapSub(alloc, d.size[i]); break;
        case ACT_FREE_REQUESTED: alloc = wrapAdd(alloc, d.size[i]); break;
        case ACT_SEGMENT_ALLOC:
        case ACT_SEGMENT_MAP: res = wrapSub(res, d.size[i]); break;
        case ACT_SEGMENT_FREE:
        case ACT_SEGMENT_UNMAP: res = wrapAdd(res, d.size[i]); break;
        default: break;
      }
    }
    d.startAllocated = alloc;
    d.startReserved = res;
  }
  im.joinHelpers();
  timer.lap("import");
  m.derive();
  timer.lap("derive");
  // The tree of a big pickle is ~1.5 GB of pages; returning them to the kernel takes ~0.25 s, which the
  // open need not wait for: a detached thread frees it (its destructor reads neither the input bytes nor
  // the model; freeing it while derive() faults in its columns made both slower, hence after).
  if (tree.valueCount() > (1u << 22)) {
    try {
      std::thread([t = std::move(treePtr), i = std::move(imPtr)]() mutable {
        i.reset();
        // Not at once: the first queries and the panel's first paint follow the open, and on a 2-core
        // machine returning 1.5 GB of pages (~0.3 s of kernel time) competed with them.
        std::this_thread::sleep_for(std::chrono::milliseconds(1500));
        t->dropPages();
        t.reset();
      }).detach();
    } catch (const std::system_error&) {
      // no thread to be had: freed at the end of this function instead
    }
  }
}

}  // namespace gpumem
