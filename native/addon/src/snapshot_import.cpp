// PyTorch snapshot pickle (torch.cuda.memory._dump_snapshot) → Model.
//
// Every key is optional (PyTorch 2.1–2.11 differ: no requested_size, no frames on blocks, no time_us,
// no is_expandable…); missing figures fall back to what can be derived. Frame lists and frame dicts are
// memoised by pickle.dump, so the tree shares them: interning caches key on tree nodes, which makes a
// 1 M-event trace cost one hash lookup per event instead of one per frame.
#include "snapshot_import.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <new>
#include <system_error>
#include <thread>
#include <unordered_map>

#include "json.h"
#include "pickle_emit.h"
#include "pickle_reader.h"

namespace gpumem {

namespace {

struct Importer final : EntryDecoder {
  Model& m;
  // Note [Node caches]: what a tree node became (string id, frame id, stack id, or key kind), indexed by
  // node: a node is one string, one frame dict or one frame list, so one table serves all three. A
  // 10 M-event trace asks ~12 times per entry; a flat table answers without hashing. Zeroed pages
  // from calloc cost nothing until touched, and memoised nodes (the ones asked again) are few.
  struct NodeTable {
    std::vector<uint32_t> v;
    // 0 = not cached yet; otherwise value + 1.
    uint32_t get(uint32_t node) const { return node < v.size() ? v[node] : 0; }
    void set(uint32_t node, uint32_t x) {
      if (node >= (1u << 30)) return;  // tagged refs are never cached
      if (node >= v.size()) v.resize(std::max<size_t>(node + 1, v.size() * 2), 0);
      v[node] = x + 1;
    }
  };
  NodeTable cache;      // str/frame/stack ids
  NodeTable key_kinds;  // TraceKey + 2 (1 = not a trace key)

  std::vector<std::thread> helpers;
  void join_helpers() {
    parsing.store(false);
    for (auto& th : helpers)
      if (th.joinable()) th.join();
    helpers.clear();
  }
  ~Importer() { join_helpers(); }

  // The tree is filled while rows are decoded (Note [Trace entries as rows]); `t` is only read through.
  explicit Importer(Model& model) : m(model) {}
  // Note [Range-first open]: set when only a time window is opened; entries outside it are never rows.
  std::unique_ptr<RangeFilter> range;
  static constexpr uint32_t kDroppedRow = 0x1FFFFFFFu;  // a row number no row has: trace() skips it
  const PickleTree* tp = nullptr;
  // Nodes ≥ floor are forgotten after the row being decoded: never cached. After the parse: no floor.
  uint32_t floor = UINT32_MAX;
  bool cacheable(uint32_t node) const { return node < floor; }
  uint32_t str(uint32_t node) {
    if (node == PickleTree::kNone || !tp->is_str(node)) return 0;
    if (uint32_t c = cache.get(node)) return c - 1;
    uint32_t id = m.intern(tp->str(node));
    if (cacheable(node)) cache.set(node, id);
    return id;
  }

  uint32_t frame(uint32_t node) {
    if (uint32_t c = cache.get(node)) return c - 1;
    uint32_t id = m.intern_frame(str(tp->get(node, "filename")), str(tp->get(node, "name")),
                                 (uint32_t)tp->as_int(tp->get(node, "line"), 0));
    const ItemSpan kv = tp->items(node);
    uint32_t fx[4] = {0, 0, 0, 0};
    for (size_t k = 0; k + 1 < kv.size(); k += 2) {
      int kind = frame_key(kv[k]);
      if (kind >= FK_FX_OP && kind <= FK_FX_TRACE)
        fx[kind - FK_FX_OP] = str(kv[k + 1]);
      else if (kind == FK_OTHER)
        unknown("frame", kv[k], [&] { return render(kv[k + 1]); });
    }
    note_fx(id, fx);
    if (cacheable(node)) cache.set(node, id);
    return id;
  }

  // Note [FX frames]: a frame of torch.compile's generated code, augmented by `_snapshot(augment_with_fx_traces=True)`
  // (PyTorch 2.10+, torch/cuda/memory.py _augment_frames): fx_node_op, fx_node_name, fx_node_target and
  // fx_original_trace, the user's source lines the node was traced from, as Python prints a traceback
  // ('File "model.py", line 12, in forward' then the code). The last such line is the user's line: it becomes a
  // frame of its own (FxFrame::origin), which the stack's user frame prefers (Model::intern_stack), so the bytes are
  // attributed to the model's line, not to the generated file's.
  void note_fx(uint32_t frame_id, const uint32_t fx[4]) {
    if (!(fx[0] | fx[1] | fx[2] | fx[3]) || m.fx_frames.count(frame_id)) return;
    FxFrame f{fx[0], fx[1], fx[2], fx[3], UINT32_MAX};
    std::string_view trace = m.strings[fx[3]];
    size_t at = trace.rfind("File \"");
    if (at != std::string_view::npos) {
      size_t q = trace.find('"', at + 6);
      size_t ln = q == std::string_view::npos ? q : trace.find(", line ", q);
      if (ln != std::string_view::npos) {
        std::string_view file = trace.substr(at + 6, q - at - 6);
        uint32_t line = (uint32_t)strtoul(std::string(trace.substr(ln + 7, 12)).c_str(), nullptr, 10);
        size_t in = trace.find(", in ", ln);
        size_t eol = trace.find('\n', ln);
        std::string_view name;
        if (in != std::string_view::npos && in < eol)
          name = trace.substr(in + 5, eol == std::string_view::npos ? eol : eol - in - 5);
        if (line > 0) f.origin = m.intern_frame(m.intern(file), m.intern(name), line);
      }
    }
    m.fx_frames.emplace(frame_id, f);
  }

  // ---- Note [Snapshot extras]: values as JSON, unknown keys ----
  // A value of the tree as JSON (dict keys as strings, bytes as hex), at most `budget` bytes (then "…").
  std::string render(uint32_t node, size_t budget = kRawValueBytes) {
    std::string out;
    render_to(out, node, budget, 0);
    if (out.size() > budget) out.resize(budget), out += "…";
    return out;
  }
  void render_to(std::string& out, uint32_t n, size_t budget, int depth) {
    if (out.size() > budget) return;
    if (PickleTree::is_entry_ref(n) || PickleTree::is_stack_ref(n) || PickleTree::is_frame_ref(n)) {
      out += "\"(a trace entry or frames)\"";
      return;
    }
    const PValue& v = tp->at(n);
    switch (v.type) {
      case PType::None: out += "null"; return;
      case PType::Bool: out += v.flag ? "true" : "false"; return;
      case PType::Int: json::write_int(out, (int64_t)v.raw); return;
      case PType::UInt: out += std::to_string(v.raw); return;
      case PType::Float: {
        double d;
        memcpy(&d, &v.raw, 8);
        if (std::isfinite(d)) {
          char buf[32];
          snprintf(buf, sizeof buf, "%.17g", d);
          out += buf;
        } else {
          out += "null";
        }
        return;
      }
      case PType::Str: json::write_string(out, tp->str(n)); return;
      case PType::Bytes: {
        std::string_view b = tp->str(n);
        std::string hex = "bytes(" + std::to_string(b.size()) + "): ";
        static const char* digits = "0123456789abcdef";
        for (size_t k = 0; k < b.size() && k < 64; k++)
          hex += digits[(uint8_t)b[k] >> 4], hex += digits[(uint8_t)b[k] & 15];
        if (b.size() > 64) hex += "…";
        json::write_string(out, hex);
        return;
      }
      case PType::List:
      case PType::Tuple:
      case PType::Dict: {
        if (depth > 16) {
          out += "\"…\"";
          return;
        }
        bool dict = v.type == PType::Dict;
        out += dict ? '{' : '[';
        const ItemSpan items = tp->items(n);
        for (size_t k = 0; k < items.size() && out.size() <= budget; k += dict ? 2 : 1) {
          if (k) out += ',';
          if (dict) {
            if (tp->is_str(items[k])) {
              json::write_string(out, tp->str(items[k]));
            } else {
              std::string key;
              render_to(key, items[k], budget, depth + 1);
              json::write_string(out, key);
            }
            out += ':';
            if (k + 1 < items.size()) render_to(out, items[k + 1], budget, depth + 1);
          } else {
            render_to(out, items[k], budget, depth + 1);
          }
        }
        out += dict ? '}' : ']';
        return;
      }
      default: out += "null"; return;
    }
  }
  std::string render(const FastValue& v) {
    switch (v.kind) {
      case FastValue::Ref: return render(v.ref);
      case FastValue::Int: return std::to_string((int64_t)v.raw);
      case FastValue::UInt: return std::to_string(v.raw);
      case FastValue::Bool: return v.raw ? "true" : "false";
      case FastValue::Stack: return "\"(frames)\"";
      default: return "null";
    }
  }
  // An unknown key: counted, and its value rendered the first time only.
  template <class Raw>
  void unknown(std::string_view where, uint32_t key_node, Raw&& raw) {
    std::string key = tp->is_str(key_node) ? std::string(tp->str(key_node)) : render(key_node, 200);
    m.note_unknown_key(where, key, m.knows_unknown_key(where, key) ? std::string() : raw());
  }
  // The keys of a dict that are not in `known` (a null-terminated list).
  void unknown_keys_of(std::string_view where, uint32_t dict, const char* const* known) {
    const ItemSpan kv = tp->items(dict);
    for (size_t k = 0; k + 1 < kv.size(); k += 2) {
      bool is_known = false;
      if (tp->is_str(kv[k]))
        for (const char* const* name = known; *name && !is_known; name++) is_known = tp->str(kv[k]) == *name;
      if (!is_known) unknown(where, kv[k], [&] { return render(kv[k + 1]); });
    }
  }

  std::vector<uint32_t> frame_ids;
  // What each item of the last list stack() read became (UINT32_MAX: no frame); see fresh_frames().
  std::vector<uint32_t> last_frames;
  const std::vector<uint32_t>& fresh_frames() const override { return last_frames; }
  uint32_t stack(uint32_t frames_node) {
    last_frames.clear();
    if (frames_node == PickleTree::kNone) return 0;
    if (PickleTree::is_stack_ref(frames_node))
      return PickleTree::tag_value(frames_node) < m.stacks.size() ? PickleTree::tag_value(frames_node) : 0;
    PType ty = tp->at(frames_node).type;
    if (ty != PType::List && ty != PType::Tuple) return 0;
    if (uint32_t c = cache.get(frames_node)) return c - 1;
    frame_ids.clear();
    for (uint32_t f : tp->items(frames_node)) {
      uint32_t id = UINT32_MAX;
      if (PickleTree::is_frame_ref(f)) {
        // A frame dict an earlier row consumed (Note [Trace entries as rows]).
        if (PickleTree::tag_value(f) < m.frames.size()) frame_ids.push_back(PickleTree::tag_value(f));
      } else if (tp->at(f).type == PType::Dict) {
        frame_ids.push_back(id = frame(f));
      }
      last_frames.push_back(id);
    }
    uint32_t id = m.intern_stack(frame_ids, false);
    if (cacheable(frames_node)) cache.set(frames_node, id);
    return id;
  }

  // user_metadata: a string as it is; any other value (a dict, from memory_viz's formatUserMetadata's reading) as
  // JSON, interned. Compile context likewise. 0: none ("" is PyTorch's "no metadata").
  uint32_t meta_id(uint32_t node) {
    if (node == PickleTree::kNone) return 0;
    if (tp->is_str(node)) return str(node);
    if (tp->at(node).type == PType::None) return 0;
    return m.intern(render(node));
  }
  uint32_t meta_id(const FastValue& v) {
    if (v.kind == FastValue::Ref) return meta_id(v.ref);
    if (v.kind == FastValue::None) return 0;
    return m.intern(render(v));
  }

  bool is_list(uint32_t n) const {
    return n != PickleTree::kNone && (tp->at(n).type == PType::List || tp->at(n).type == PType::Tuple);
  }

  enum TraceKey {
    K_ACTION,
    K_ADDR,
    K_SIZE,
    K_STREAM,
    K_TIME,
    K_FRAMES,
    K_COMPILE_CONTEXT,
    K_USER_METADATA,
    K_DEVICE_FREE,
    K_POOL_ID,  // 2.12+: the entry's pool, as segment_pool_id (read where it matters: Note [Snapshot extras])
    K_COUNT
  };
  int key_kind(uint32_t node) {
    if (uint32_t c = key_kinds.get(node)) return (int)c - 2;
    static const char* const names[K_COUNT] = {
        "action",          "addr",          "size",        "stream", "time_us", "frames",
        "compile_context", "user_metadata", "device_free", "pool_id"};
    int kind = -1;
    if (tp->is_str(node))
      for (int k = 0; k < K_COUNT; k++)
        if (tp->str(node) == names[k]) kind = k;
    if (cacheable(node)) key_kinds.set(node, (uint32_t)(kind + 1));
    return kind;
  }
  // Action of an action string node (memoised by pickle: one node per action name), cached the same way.
  NodeTable action_kinds;
  int action_node(uint32_t node) {
    if (uint32_t c = action_kinds.get(node)) return (int)c - 2;
    int act = tp->is_str(node) ? action_of(tp->str(node)) : -1;
    if (cacheable(node)) action_kinds.set(node, (uint32_t)(act + 1));
    return act;
  }

  static int action_of(std::string_view a) {
    for (int k = 0; k < ACT_COUNT; k++)
      if (a == kActionNames[k]) return k;
    return -1;
  }

  static constexpr const char* kSegmentKeys[] = {
      "device",       "address",         "total_size",    "allocated_size", "active_size", "requested_size", "stream",
      "segment_type", "segment_pool_id", "is_expandable", "frames",         "blocks",      nullptr};
  static constexpr const char* kBlockKeys[] = {"address", "size", "requested_size", "state", "frames", nullptr};
  static constexpr const char* kAnnotationKeys[] = {"stage", "name", "device", "time_us", nullptr};

  // host: PyTorch 2.14's host_segments (Note [Host memory]): into m.host, whatever their "device" says.
  void segments(uint32_t list, bool host = false) {
    if (!is_list(list)) return;
    for (uint32_t s : tp->items(list)) {
      if (tp->at(s).type != PType::Dict) continue;
      int dev = host ? 0 : device_index(tp->as_int(tp->get(s, "device"), 0));
      if (dev < 0) continue;
      unknown_keys_of(host ? "host segment" : "segment", s, kSegmentKeys);
      SegmentData g;
      g.addr = tp->as_u64(tp->get(s, "address"));
      g.size = tp->as_u64(tp->get(s, "total_size"));
      g.stream = tp->as_u64(tp->get(s, "stream"));
      std::string_view type = tp->is_str(tp->get(s, "segment_type")) ? tp->str(tp->get(s, "segment_type")) : "";
      g.pool = type == "small"   ? (uint8_t)POOL_SMALL
               : type == "large" ? (uint8_t)POOL_LARGE
                                 : pool_from_size_fallback(g.size);
      uint32_t pid = tp->get(s, "segment_pool_id");
      if (is_list(pid) && tp->items(pid).size() == 2) {
        g.pool_id0 = tp->as_u64(tp->items(pid)[0]);
        g.pool_id1 = tp->as_u64(tp->items(pid)[1]);
        if (g.pool_id0 || g.pool_id1) g.pool = POOL_PRIVATE;
      }
      uint32_t is_exp = tp->get(s, "is_expandable");
      g.expandable = tp->as_int(is_exp, 0) != 0;
      // The policy that made the data (policy_replay.cpp, Note [Policy of the data]).
      if (!host && is_exp != PickleTree::kNone)
        m.pickle_segments_expandable = std::max<int8_t>(m.pickle_segments_expandable, g.expandable ? 1 : 0);
      g.stack = stack(tp->get(s, "frames"));
      uint32_t blocks = tp->get(s, "blocks");
      uint64_t cursor = g.addr;  // old snapshots: blocks without addresses, in address order
      uint64_t block_sum = 0;
      if (is_list(blocks)) {
        for (uint32_t b : tp->items(blocks)) {
          if (tp->at(b).type != PType::Dict) continue;
          unknown_keys_of(host ? "host block" : "block", b, kBlockKeys);
          BlockData bd;
          bd.addr = tp->get(b, "address") != PickleTree::kNone ? tp->as_u64(tp->get(b, "address")) : cursor;
          bd.size = tp->as_u64(tp->get(b, "size"));
          bd.requested =
              tp->get(b, "requested_size") != PickleTree::kNone ? tp->as_u64(tp->get(b, "requested_size")) : bd.size;
          std::string_view st = tp->is_str(tp->get(b, "state")) ? tp->str(tp->get(b, "state")) : "";
          bd.state = st == "active_allocated"      ? ST_ALLOCATED
                     : st == "active_pending_free" ? ST_PENDING_FREE
                                                   : ST_INACTIVE;
          bd.stack = stack(tp->get(b, "frames"));
          cursor = bd.addr + bd.size;
          block_sum += bd.size;
          g.blocks.push_back(bd);
        }
      }
      if (g.size == 0) g.size = block_sum;  // very old snapshots may omit total_size
      DeviceData& d = host ? m.host : m.device(dev);
      d.final_segments.push_back(std::move(g));
    }
  }

  // Note [Device indexes]: CUDA device ordinals are small; an index outside [0, kMaxDevices) is damage,
  // reported once and skipped rather than allowed to size per-device tables.
  static constexpr int64_t kMaxDevices = 1024;
  bool bad_device_reported = false;
  int device_index(int64_t d) {
    if (d >= 0 && d < kMaxDevices) return (int)d;
    if (!bad_device_reported)
      m.problems.push_back(
          Problem{0, "entries with device index " + std::to_string(d) + " (not a CUDA device ordinal) were skipped"});
    bad_device_reported = true;
    return -1;
  }

  static uint8_t pool_from_size_fallback(uint64_t size) { return size <= (2u << 20) ? POOL_SMALL : POOL_LARGE; }

  // ---- Rows decoded during the parse (Note [Trace entries as rows] in pickle_reader.h). ----
  // Every trace entry's event fields, in pickle order; trace() moves them into the device that lists
  // them (all of them, without a copy, in the usual one-device case). Time is raw: kNoTime when the
  // entry has no usable time_us (resolved by trace(), which knows the whole list).
  static constexpr int64_t kNoTime = INT64_MIN;
  DeviceData rows;
  std::vector<uint8_t> row_has_time_key;
  std::vector<std::pair<uint32_t, std::pair<uint32_t, uint32_t>>> row_extras;  // row → (compile_context, user_metadata)
  uint32_t na_id = 0;
  std::atomic<size_t> rows_published{0};

  size_t row_count() const override { return rows.count(); }

  // The entry's fields by kind; false when a key repeats a kind (a Python dict keeps the last: rare
  // enough to leave to the generic path, which does).
  void fields(const uint32_t* kv, size_t n, uint32_t f[K_COUNT]) {
    for (int k = 0; k < K_COUNT; k++) f[k] = PickleTree::kNone;
    for (size_t k = 0; k + 1 < n; k += 2) {
      int kind = key_kind(kv[k]);
      if (kind >= 0) f[kind] = kv[k + 1];
    }
  }

  bool is_entry(const PickleTree& tree, const uint32_t* kv, size_t n, uint32_t floor_node,
                uint32_t& frames_ref) override {
    tp = &tree;
    if (n < 2 || n % 2) return false;
    floor = floor_node;
    fields(kv, n, offered);
    bool entry = offered[K_ACTION] != PickleTree::kNone && action_node(offered[K_ACTION]) >= 0;
    floor = UINT32_MAX;
    frames_ref = offered[K_FRAMES];
    return entry;
  }
  uint32_t offered[K_COUNT];  // the fields is_entry() found; decode() gets the same dict

  uint32_t decode(const PickleTree& tree, const uint32_t* kv, size_t n, uint32_t floor_node,
                  uint32_t& stack_out) override {
    tp = &tree;
    floor = floor_node;
    FastValue f[K_COUNT];
    for (int k = 0; k < K_COUNT; k++) f[k] = FastValue{FastValue::Ref, offered[k], 0};
    int act = action_node(offered[K_ACTION]);
    uint32_t row = add_row(act < 0 ? ACT_SNAPSHOT : act, f, stack_out);  // (is_entry checked the action)
    for (size_t k = 0; k + 1 < n; k += 2)
      if (key_kind(kv[k]) < 0) unknown("trace entry", kv[k], [&] { return render(kv[k + 1]); });
    floor = UINT32_MAX;
    return row;
  }

  bool decode_flat(const PickleTree& tree, const FastPair* kv, size_t n, uint32_t floor_node, uint32_t& row) override {
    tp = &tree;
    FastValue f[K_COUNT];
    for (auto& v : f) v = FastValue{FastValue::Ref, PickleTree::kNone, 0};
    floor = floor_node;  // until it is a row, its fresh strings may be forgotten
    int act = -1;
    bool keys_ok = true, any_unknown = false;
    for (size_t k = 0; k < n && keys_ok; k++) {
      // Keys are strings the tree keeps (memoised); anything else is left to the general path.
      keys_ok = tp->is_str(kv[k].key);
      int kind = keys_ok ? key_kind(kv[k].key) : -1;
      if (kind >= 0) f[kind] = kv[k].value;
      any_unknown |= kind < 0;
    }
    const FastValue& a = f[K_ACTION];
    if (keys_ok && a.kind == FastValue::Ref && a.ref != PickleTree::kNone) act = action_node(a.ref);
    if (act < 0) return floor = UINT32_MAX, false;
    uint32_t stack_id;
    row = add_row(act, f, stack_id);
    if (any_unknown)
      for (size_t k = 0; k < n; k++)
        if (key_kind(kv[k].key) < 0) unknown("trace entry", kv[k].key, [&] { return render(kv[k].value); });
    floor = UINT32_MAX;
    return true;
  }

  enum FrameKey { FK_FILE = 0, FK_NAME, FK_LINE, FK_FX_OP, FK_FX_NAME, FK_FX_TARGET, FK_FX_TRACE, FK_OTHER };
  NodeTable frame_key_kinds;  // FrameKey + 2
  int frame_key(uint32_t node) {
    if (uint32_t c = frame_key_kinds.get(node)) return (int)c - 2;
    std::string_view s = tp->is_str(node) ? tp->str(node) : std::string_view();
    int kind = s == "filename"            ? FK_FILE
               : s == "name"              ? FK_NAME
               : s == "line"              ? FK_LINE
               : s == "fx_node_op"        ? FK_FX_OP
               : s == "fx_node_name"      ? FK_FX_NAME
               : s == "fx_node_target"    ? FK_FX_TARGET
               : s == "fx_original_trace" ? FK_FX_TRACE
                                          : FK_OTHER;
    if (cacheable(node)) frame_key_kinds.set(node, (uint32_t)(kind + 1));
    return kind;
  }
  uint32_t flat_frame(const PickleTree& tree, const FastPair* kv, size_t n, uint32_t floor_node) override {
    tp = &tree;
    floor = floor_node;
    FastValue f[FK_OTHER];
    for (auto& v : f) v = FastValue{FastValue::None, 0, 0};
    for (size_t k = 0; k < n; k++) {
      int kind = tp->is_str(kv[k].key) ? frame_key(kv[k].key) : FK_OTHER;
      // A key no frame has: not a frame, or a later PyTorch's frame; the general path reads it (and keeps the key,
      // Note [Snapshot extras]). A flat read may still be rewound, so it records nothing of its own.
      if (kind == FK_OTHER) return floor = UINT32_MAX, UINT32_MAX;
      f[kind] = kv[k].value;  // later keys win, as in the general path's get()
    }
    // As frame() reads a frame dict: missing or non-string names are "", a non-integer line is 0.
    uint32_t id = m.intern_frame(str_of(f[FK_FILE]), str_of(f[FK_NAME]), (uint32_t)as_int(f[FK_LINE], 0));
    const uint32_t fx[4] = {str_of(f[FK_FX_OP]), str_of(f[FK_FX_NAME]), str_of(f[FK_FX_TARGET]),
                            str_of(f[FK_FX_TRACE])};
    note_fx(id, fx);
    floor = UINT32_MAX;
    return id;
  }
  uint32_t frame_of(const PickleTree& tree, uint32_t ref) override {
    tp = &tree;
    if (PickleTree::is_frame_ref(ref))
      return PickleTree::tag_value(ref) < m.frames.size() ? PickleTree::tag_value(ref) : UINT32_MAX;
    return tp->at(ref).type == PType::Dict ? frame(ref) : UINT32_MAX;
  }
  uint32_t flat_stack(const uint32_t* ids, size_t n) override {
    frame_ids.assign(ids, ids + n);
    return m.intern_stack(frame_ids, false);
  }

  // A FastValue read as the tree's accessors read a node (Note [Absent is None]).
  int64_t as_int(const FastValue& v, int64_t fallback) const {
    switch (v.kind) {
      case FastValue::Ref: return tp->as_int(v.ref, fallback);
      case FastValue::Int:
      case FastValue::UInt:
      case FastValue::Bool: return (int64_t)v.raw;
      default: return fallback;
    }
  }
  static bool present(const FastValue& v) { return !(v.kind == FastValue::Ref && v.ref == PickleTree::kNone); }
  uint32_t str_of(const FastValue& v) { return v.kind == FastValue::Ref ? str(v.ref) : 0; }

  uint32_t add_row(int act, const FastValue* f, uint32_t& stack_out) {
    uint32_t row = (uint32_t)rows.count();
    bool has_time = present(f[K_TIME]);
    int64_t t_us = has_time ? as_int(f[K_TIME], kNoTime) : kNoTime;
    uint64_t size = (uint64_t)as_int(f[K_SIZE], 0);
    uint64_t addr = (uint64_t)as_int(act == ACT_OOM ? f[K_DEVICE_FREE] : f[K_ADDR], 0);
    uint32_t stk = f[K_FRAMES].kind == FastValue::Ref     ? stack(f[K_FRAMES].ref)
                   : f[K_FRAMES].kind == FastValue::Stack ? (uint32_t)f[K_FRAMES].raw
                                                          : 0;
    stack_out = stk;
    if (range) {
      uint64_t stream = (uint64_t)as_int(f[K_STREAM], 0);
      if (!range->on_entry(t_us, (uint8_t)act, addr, size, stream, stk, pool_of(act, size), t_us)) return kDroppedRow;
    }
    rows.push_event(t_us, (uint8_t)act, addr, size, 0, (uint64_t)as_int(f[K_STREAM], 0), stk, pool_of(act, size));
    row_has_time_key.push_back(has_time);
    const FastValue &cc = f[K_COMPILE_CONTEXT], &um = f[K_USER_METADATA];
    uint32_t cc_id = present(cc) ? meta_id(cc) : na_id, um_id = present(um) ? meta_id(um) : 0;
    if (cc_id != na_id || um_id != 0) row_extras.push_back({row, {cc_id, um_id}});
    if ((row & 0xFFFF) == 0) rows_published.store(row, std::memory_order_relaxed);
    return row;
  }

  static uint8_t pool_of(int act, uint64_t size) {
    if (act == ACT_SEGMENT_ALLOC || act == ACT_SEGMENT_FREE) return pool_from_size_fallback(size);
    // Expandable pages: small pool maps 2 MiB pages, large 20 MiB ones; unmaps cover whole page runs.
    if (act == ACT_SEGMENT_MAP || act == ACT_SEGMENT_UNMAP) return size % (20u << 20) == 0 ? POOL_LARGE : POOL_SMALL;
    return POOL_LARGE;
  }

  // Note [Row columns prefault]: the row columns are reserved for the most rows the input could hold
  // and filled as the parse goes; a helper maps their pages a little ahead of the fill (Note [Bulk
  // prefault] in model.h) and no further, so what is never filled never counts in the RSS.
  std::atomic<bool> parsing{false};
  void start_row_prefault(size_t input_bytes) {
    if (input_bytes < (32u << 20)) return;
    // A trace entry takes ≥ 40 bytes of pickle in practice (≈ 78 in the ×180 benchmark, ≈ 200 as PyTorch
    // dumps them, with frames); more rows just grow the vectors. Only what is filled becomes resident,
    // but the reservation is address space: where it cannot be had, the columns grow as they fill.
    const size_t most = input_bytes / 40;
    try {
      rows.reserve(most);
      rows.link.reserve(most), rows.allocated.reserve(most), rows.reserved.reserve(most);
      row_has_time_key.reserve(most);
    } catch (const std::bad_alloc&) {
      rows = DeviceData{};
      row_has_time_key = {};
      return;
    }
    parsing.store(true);
    try {
      // Taken before any row: the whole reservation of each column.
      helpers.emplace_back([this, cols = rows.spare_columns(), capacity = rows.t.capacity()] {
        prefault_columns_ahead(cols, capacity, rows_published, parsing);
      });
    } catch (const std::system_error&) {
      parsing.store(false);
    }
  }

  int traced_devices = 0;
  // host: the list is PyTorch 2.14's host_traces (Note [Host memory]), read into m.host.
  void trace(int dev, uint32_t list, bool host = false) {
    if (!is_list(list)) return;
    if (range && host && !tp->items(list).empty())
      throw std::runtime_error(
          "a time window cannot be opened for a snapshot that also traces pinned host memory (host_traces); open the "
          "whole file");
    if (range && ++traced_devices > 1)
      throw std::runtime_error(
          "a time window can be opened for a one-device snapshot only; this one traces several devices");
    DeviceData& d = host ? m.host : m.device(dev);
    const ItemSpan items = tp->items(list);
    bool any_time = range && range->saw_time;
    for (uint32_t e : items) {
      if (range) break;  // the filter saw every entry, kept or not
      if (PickleTree::is_entry_ref(e)
              ? PickleTree::tag_value(e) < row_has_time_key.size() && row_has_time_key[PickleTree::tag_value(e)]
              : tp->at(e).type == PType::Dict && tp->get(e, "time_us") != PickleTree::kNone) {
        any_time = true;
        break;
      }
    }
    if (range && !any_time && !items.empty())
      throw std::runtime_error(
          "this snapshot's trace has no time_us, so a time window of it cannot be opened; open the whole file");
    if (!any_time && !items.empty())
      m.problems.push_back(
          Problem{0, "this snapshot's trace has no time_us (PyTorch before 2.2?): event numbers are used as times"});
    const size_t first = d.count();
    // The usual case: this list is every row, in order, and the device has nothing yet: move the columns.
    bool whole = first == 0 && items.size() == rows.count() && rows.count() > 0;
    for (size_t k = 0; whole && k < items.size(); k++) whole = items[k] == (PickleTree::kEntryTag | (uint32_t)k);
    size_t skipped = 0;
    if (whole) {
      d.t = std::move(rows.t), d.action = std::move(rows.action), d.addr = std::move(rows.addr);
      d.size = std::move(rows.size), d.waste = std::move(rows.waste), d.stream = std::move(rows.stream);
      d.stack = std::move(rows.stack), d.pool = std::move(rows.pool);
      // Reserved and populated with the rows, for derive() (Note [Row columns prefault]).
      d.link = std::move(rows.link), d.allocated = std::move(rows.allocated), d.reserved = std::move(rows.reserved);
      rows = DeviceData{};
      for (const auto& [row, ids] : row_extras) d.context_and_metadata[row] = ids;
      row_extras.clear();
    } else {
      d.reserve(first + std::min<size_t>(items.size(), rows.count()));
      size_t next_extra = 0;  // row_extras is in row order
      for (uint32_t e : items) {
        if (PickleTree::is_entry_ref(e)) {
          uint32_t r = PickleTree::tag_value(e);
          if (r >= rows.count()) continue;
          uint32_t idx = (uint32_t)d.count();
          d.t.push_back(rows.t[r]), d.action.push_back(rows.action[r]), d.addr.push_back(rows.addr[r]);
          d.size.push_back(rows.size[r]), d.waste.push_back(rows.waste[r]), d.stream.push_back(rows.stream[r]);
          d.stack.push_back(rows.stack[r]), d.pool.push_back(rows.pool[r]);
          // Extras of this row (a list may name rows in any order: search from the last hit, then all).
          auto match = [&](size_t j) { return j < row_extras.size() && row_extras[j].first == r; };
          if (!match(next_extra)) {
            auto it = std::lower_bound(row_extras.begin(), row_extras.end(), std::make_pair(r, std::make_pair(0u, 0u)));
            next_extra = (size_t)(it - row_extras.begin());
          }
          if (match(next_extra)) d.context_and_metadata[idx] = row_extras[next_extra++].second;
          continue;
        }
        if (tp->at(e).type != PType::Dict) continue;
        if (range)
          throw std::runtime_error(
              "this pickle's trace names some entries twice, so a time window of it cannot be opened alone; open the "
              "whole file");
        // A dict the parse kept (not a row): read as the rows were.
        uint32_t f[K_COUNT];
        const ItemSpan kv = tp->items(e);
        fields(kv.p, kv.n, f);
        int act = action_node(f[K_ACTION]);
        if (act < 0) {
          skipped++;
          continue;
        }
        int64_t t_us = tp->as_int(f[K_TIME], kNoTime);
        uint64_t size = tp->as_u64(f[K_SIZE]);
        uint64_t addr = act == ACT_OOM ? tp->as_u64(f[K_DEVICE_FREE]) : tp->as_u64(f[K_ADDR]);
        uint32_t idx = (uint32_t)d.count();
        d.push_event(t_us, (uint8_t)act, addr, size, 0, tp->as_u64(f[K_STREAM]), stack(f[K_FRAMES]),
                     pool_of(act, size));
        uint32_t cc = f[K_COMPILE_CONTEXT], um = f[K_USER_METADATA];
        uint32_t cc_id = cc == PickleTree::kNone ? na_id : meta_id(cc), um_id = meta_id(um);
        if (cc_id != na_id || um_id != 0) d.context_and_metadata[idx] = {cc_id, um_id};
        for (size_t k = 0; k + 1 < kv.size(); k += 2)
          if (key_kind(kv[k]) < 0) unknown("trace entry", kv[k], [&] { return render(kv[k + 1]); });
      }
    }
    // Times, markers and OOMs over the new events, in order.
    int64_t last_t = 0;
    for (size_t i = first; i < d.count(); i++) {
      int64_t t_us = any_time ? (d.t[i] == kNoTime ? last_t : d.t[i]) : (int64_t)i;
      // Note [Monotonic time]: the ring buffer is in event order; a clock step backwards is clamped so
      // time-window queries stay binary-searchable.
      if (t_us < last_t) t_us = last_t;
      last_t = t_us;
      d.t[i] = t_us;
      uint8_t act = d.action[i];
      if (act == ACT_SNAPSHOT) d.markers.push_back(MarkerData{t_us, 4, m.intern("snapshot"), ""});
      if (act == ACT_OOM) {
        OomData o{};
        o.t_us = t_us;
        o.requested = d.size[i];
        o.device_free = d.addr[i];
        o.stack = d.stack[i];
        o.event_index = (uint32_t)i;
        d.ooms.push_back(o);
        d.markers.push_back(MarkerData{t_us, 5, m.intern("out of memory"), ""});
      }
    }
    if (skipped)
      m.problems.push_back(Problem{0, std::to_string(skipped) + " trace entries of " +
                                          (host ? std::string("host_traces") : "device " + std::to_string(dev)) +
                                          " have actions this reader does not know; they were skipped"});
    metadata_markers(d, first);
  }

  // Note [Metadata on the timeline]: torch.cuda.memory._set_memory_metadata(m) tags every entry recorded after it
  // with m until it is set again, so a change of an entry's user_metadata is a moment of the run the user marked
  // (a phase, a step): a 'metadata' marker there, labelled with the new value ("" clears it). Entries of one value
  // make no marker at all, so a snapshot without metadata has none.
  void metadata_markers(DeviceData& d, size_t first) {
    if (d.context_and_metadata.empty()) return;
    uint32_t current = 0;
    for (size_t i = 0; i < first; i++) {
      auto it = d.context_and_metadata.find((uint32_t)i);
      current = it == d.context_and_metadata.end() ? 0 : it->second.second;
    }
    const uint32_t metadata_label = m.intern("user_metadata");
    for (size_t i = first; i < d.count(); i++) {
      auto it = d.context_and_metadata.find((uint32_t)i);
      uint32_t um = it == d.context_and_metadata.end() ? 0 : it->second.second;
      if (um == current) continue;
      current = um;
      std::string detail = "{\"userMetadata\":";
      json::write_string(detail, m.strings[um]);
      detail += '}';
      d.markers.push_back(MarkerData{d.t[i], kMetadataMarker, metadata_label, detail});
    }
  }
  static constexpr uint8_t kMetadataMarker = 8;  // kMarkerKinds[8] in aggregate.cpp

  void annotations(uint32_t list) {
    if (!is_list(list)) return;
    for (uint32_t a : tp->items(list)) {
      if (tp->at(a).type != PType::Dict) continue;
      int dev = device_index(tp->as_int(tp->get(a, "device"), 0));
      if (dev < 0) continue;
      int64_t t_us = tp->as_int(tp->get(a, "time_us"), 0);
      if (range && (t_us < range->window().from_us || t_us > range->window().to_us)) continue;
      uint32_t st = tp->get(a, "stage");
      std::string_view stage = st != PickleTree::kNone && tp->is_str(st) ? tp->str(st) : "";
      unknown_keys_of("annotation", a, kAnnotationKeys);
      uint8_t kind = stage == "START" ? 1 : stage == "END" ? 2 : 0;
      m.device(dev).markers.push_back(MarkerData{t_us, kind, str(tp->get(a, "name")), ""});
    }
  }

  // Re-emits a subtree as pickle opcodes (allocator_settings is kept verbatim for export).
  // Note [Emit budget]: memo references make the tree a DAG, so a tiny pickle can describe an
  // exponentially large value; re-emitting it is bounded by a node budget (allocator_settings is ~30).
  size_t emit_budget = 100000;
  void emit(fmt::PickleEmitter& p, uint32_t n, int depth) {
    if (depth > 32 || emit_budget == 0) return p.none();
    emit_budget--;
    const PValue& v = tp->at(n);
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
      case PType::Str: return p.str(tp->str(n));
      case PType::Bytes: return p.bytes_value(tp->str(n));
      case PType::List:
      case PType::Tuple:
        v.type == PType::List ? p.begin_list() : p.begin_tuple();
        for (uint32_t c : tp->items(n)) emit(p, c, depth + 1);
        return v.type == PType::List ? p.end_list() : p.end_tuple();
      case PType::Dict: {
        p.begin_dict();
        const auto& kv = tp->items(n);
        for (size_t k = 0; k + 1 < kv.size(); k += 2) emit(p, kv[k], depth + 1), emit(p, kv[k + 1], depth + 1);
        return p.end_dict();
      }
      default: return p.none();
    }
  }
};

const char* type_name(PType t) {
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
  double last_cpu = cpu_ms();
  static double cpu_ms() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
  }
  void lap(const char* what) {
    if (!on) return;
    auto now = std::chrono::steady_clock::now();
    double cpu = cpu_ms();
    // Wall time, and this thread's CPU time (steadier on a shared machine).
    fprintf(stderr, "gpumem reader: %-8s %8.1f ms (cpu %7.1f ms)\n", what,
            std::chrono::duration<double, std::milli>(now - last).count(), cpu - last_cpu);
    last = now, last_cpu = cpu;
  }
};
}  // namespace

void import_snapshot(Model& m, const uint8_t* data, size_t size, bool file_mapped, TimeWindow window) {
  PhaseTimer timer;
  auto im_ptr = std::make_unique<Importer>(m);
  Importer& im = *im_ptr;
  if (!window.whole()) {
    if (window.from_us > window.to_us) throw std::runtime_error("the time window ends before it starts");
    im.range = std::make_unique<RangeFilter>(window);
  }
  im.na_id = m.intern("N/A");
  im.start_row_prefault(size);
  auto tree_ptr = std::make_unique<PickleTree>(data, size, &im, file_mapped);
  PickleTree& tree = *tree_ptr;
  im.parsing.store(false);
  im.tp = &tree;
  if (timer.on)
    fprintf(stderr, "gpumem reader: rows %zu taken (%zu flat), %zu kept as dicts; tree %zu values\n", tree.rows_taken(),
            tree.rows_flat(), tree.rows_kept(), tree.value_count());
  timer.lap("parse");
  uint32_t root = tree.root();
  m.format = "pytorch-pickle";
  if (tree.at(root).type == PType::List) {
    // torch.cuda.memory_snapshot() (and PyTorch ≤ 2.0 dumps): just the segment list.
    im.segments(root);
  } else if (tree.at(root).type == PType::Dict && (tree.get(root, "segments") != PickleTree::kNone ||
                                                   tree.get(root, "device_traces") != PickleTree::kNone)) {
    im.segments(tree.get(root, "segments"));
    uint32_t traces = tree.get(root, "device_traces");
    if (im.is_list(traces)) {
      const auto& per = tree.items(traces);
      for (size_t dev = 0; dev < per.size() && dev < (size_t)Importer::kMaxDevices; dev++)
        if (im.is_list(per[dev]) && !tree.items(per[dev]).empty()) im.trace((int)dev, per[dev]);
    }
    timer.lap("traces");
    im.annotations(tree.get(root, "external_annotations"));
    // Note [Host memory]: PyTorch 2.14 (record_pinned_host_memory=True) adds the pinned host allocator's segments and
    // trace beside the devices'. Their shape is taken from pytorch/pytorch#182407 ("the same profiling infrastructure
    // as the CUDA DeviceCachingAllocator ... getSegments()/getTraces()"): segments and entries shaped as the device's,
    // read by the same code with every key optional, so a difference in detail reads as a missing figure and an
    // unknown key (listed, Note [Snapshot extras]), never a failure. One list of entries (a list of lists is read too,
    // in case a version splits it per device). Host bytes never enter a device's figures.
    uint32_t host_segments = tree.get(root, "host_segments"), host_traces = tree.get(root, "host_traces");
    if (host_segments != PickleTree::kNone || host_traces != PickleTree::kNone) {
      m.has_host = true;
      im.segments(host_segments, true);
      if (im.is_list(host_traces)) {
        const ItemSpan items = tree.items(host_traces);
        if (!items.empty() && im.is_list(items[0])) {
          for (uint32_t sub : items) im.trace(0, sub, true);
        } else {
          im.trace(0, host_traces, true);
        }
      }
    }
    static constexpr const char* kTopKeys[] = {
        "segments", "device_traces", "allocator_settings", "external_annotations", "host_segments", "host_traces"};
    const ItemSpan top = tree.items(root);
    for (size_t k = 0; k + 1 < top.size(); k += 2) {
      bool known = false;
      if (tree.is_str(top[k]))
        for (const char* name : kTopKeys) known |= tree.str(top[k]) == name;
      if (!known) im.unknown("snapshot", top[k], [&] { return im.render(top[k + 1], kRawTopLevelBytes); });
    }
    uint32_t settings = tree.get(root, "allocator_settings");
    if (settings != PickleTree::kNone) {
      m.allocator_settings_json = im.render(settings, kRawTopLevelBytes);
      if (tree.at(settings).type == PType::Dict) {
        uint32_t e = tree.get(settings, "expandable_segments");
        if (e != PickleTree::kNone) m.pickle_settings_expandable = tree.as_int(e, 0) != 0 ? 1 : 0;
      }
      fmt::PickleEmitter p(1024);
      im.emit(p, settings, 0);
      if (im.emit_budget > 0)
        m.allocator_settings_pickle = p.take();
      else
        m.problems.push_back(
            Problem{0, "allocator_settings is implausibly large (shared sub-objects); it is not kept for export"});
    }
  } else {
    throw std::runtime_error(std::string("this pickle holds ") +
                             (tree.at(root).type == PType::Dict ? "a dict without 'segments' or 'device_traces'"
                                                                : type_name(tree.at(root).type)) +
                             ", not a PyTorch memory snapshot; create one with "
                             "torch.cuda.memory._dump_snapshot(\"snapshot.pickle\") after "
                             "torch.cuda.memory._record_memory_history()");
  }
  if (im.range) {
    for (auto& [idx, d] : m.devices)
      if (d.count() || !d.final_segments.empty()) im.range->finish(d);
    if (timer.on)
      fprintf(stderr, "gpumem reader: window keeps %zu entries (%zu before, %zu after)\n", im.range->kept,
              im.range->before, im.range->after);
  }
  auto undo_start = [&](DeviceData& d) {
    d.have_final = true;
    d.final_after = d.count();
    // Replay starts from allocated_bytes − Σ(alloc) + Σ(free_requested); reserved likewise.
    int64_t alloc = 0, res = 0;
    for (const auto& s : d.final_segments) {
      res = wrap_add(res, s.size);
      for (const auto& b : s.blocks)
        if (b.state == ST_ALLOCATED) alloc = wrap_add(alloc, b.size);
    }
    for (size_t i = 0; i < d.count(); i++) {
      switch (d.action[i]) {
        case ACT_ALLOC: alloc = wrap_sub(alloc, d.size[i]); break;
        case ACT_FREE_REQUESTED: alloc = wrap_add(alloc, d.size[i]); break;
        case ACT_SEGMENT_ALLOC:
        case ACT_SEGMENT_MAP: res = wrap_sub(res, d.size[i]); break;
        case ACT_SEGMENT_FREE:
        case ACT_SEGMENT_UNMAP: res = wrap_add(res, d.size[i]); break;
        default: break;
      }
    }
    d.start_allocated = alloc;
    d.start_reserved = res;
  };
  if (!im.range) {
    for (auto& [idx, d] : m.devices) undo_start(d);
    if (m.has_host) undo_start(m.host);
  }
  timer.lap("start");
  im.join_helpers();
  timer.lap("import");
  m.derive();
  // Note [Untraced blocks]: after derive() the allocations of the trace still live at the end are known by address.
  auto mark_untraced = [](DeviceData& d) {
    for (auto& s : d.final_segments)
      for (auto& b : s.blocks)
        b.untraced = b.state == ST_ALLOCATED && d.live_by_addr.get(b.addr) == AddrIndexMap::kEmpty;
  };
  if (!im.range) {
    for (auto& [idx, d] : m.devices) mark_untraced(d);
    if (m.has_host) mark_untraced(m.host);
  }
  timer.lap("derive");
  // The tree of a big pickle is ~1.5 GB of pages; returning them to the kernel takes ~0.25 s, which the
  // open need not wait for: a detached thread frees it (its destructor reads neither the input bytes nor
  // the model; freeing it while derive() faults in its columns made both slower, hence after).
  if (tree.value_count() > (1u << 22)) {
    try {
      std::thread([t = std::move(tree_ptr), i = std::move(im_ptr)]() mutable {
        i.reset();
        // Not at once: the first queries and the panel's first paint follow the open, and on a 2-core
        // machine returning 1.5 GB of pages (~0.3 s of kernel time) competed with them.
        std::this_thread::sleep_for(std::chrono::milliseconds(1500));
        t->drop_pages();
        t.reset();
      }).detach();
    } catch (const std::system_error&) {
      // no thread to be had: freed at the end of this function instead
    }
  }
}

}  // namespace gpumem
