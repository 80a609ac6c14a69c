// stack_capture.cc — see stack_capture.h (Note [Finding CPython], Note [Stack cost]).
#include "stack_capture.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string_view>
#include <unordered_map>

#include "../../format/gpumem_format.h"
#include "../../format/json.h"
#include "frame_walker.h"
#include "writer.h"

namespace gpumem::rec::stacks {
namespace {

// ---- CPython, by symbol ------------------------------------------------------------------------
struct PyObj;  // opaque: we never look inside CPython structs (their layout changes per version)
struct Py {
  int (*IsInitialized)();
  int (*IsFinalizing)();  // Py_IsFinalizing (3.13) or _Py_IsFinalizing (3.7–3.12)
  int (*GILState_Ensure)();
  void (*GILState_Release)(int);
  void* (*ThreadState_Get)();
  PyObj* (*ThreadState_GetFrame)(void*);  // new reference
  PyObj* (*Frame_GetBack)(PyObj*);        // new reference
  PyObj* (*Frame_GetCode)(PyObj*);        // new reference
  int (*Frame_GetLasti)(PyObj*);          // 3.11+; may be null
  int (*Frame_GetLineNumber)(PyObj*);
  int (*Code_Addr2Line)(PyObj*, int);
  PyObj* (*Object_GetAttrString)(PyObj*, const char*);
  const char* (*Unicode_AsUTF8)(PyObj*);
  void (*IncRef)(PyObj*);
  void (*DecRef)(PyObj*);
  void (*Err_Clear)();
  void* (*GILState_GetThisThreadState)();  // safe without the GIL; for the GIL-free walk only
  int (*GILState_Check)();                 // 3.4+; capture_if_gil_held() only
  const unsigned long* Version;            // Py_Version (3.11+)
  const void* FrameType;                   // &PyFrame_Type
  const void* CellType;                    // &PyCell_Type (a `self` captured by a closure lives in a cell)
  long (*Long_AsLong)(PyObj*);
  long (*Tuple_Size)(PyObj*);
  PyObj* (*Tuple_GetItem)(PyObj*, long);  // borrowed
  bool ok = false;
};

Py load_python() {
  Py p{};
  auto sym = [](const char* n) { return dlsym(RTLD_DEFAULT, n); };
#define GPUMEM_PY(field, name) p.field = reinterpret_cast<decltype(p.field)>(sym(name))
  GPUMEM_PY(IsInitialized, "Py_IsInitialized");
  GPUMEM_PY(IsFinalizing, "Py_IsFinalizing");
  if (!p.IsFinalizing) GPUMEM_PY(IsFinalizing, "_Py_IsFinalizing");
  GPUMEM_PY(GILState_Ensure, "PyGILState_Ensure");
  GPUMEM_PY(GILState_Release, "PyGILState_Release");
  GPUMEM_PY(ThreadState_Get, "PyThreadState_Get");
  GPUMEM_PY(ThreadState_GetFrame, "PyThreadState_GetFrame");
  GPUMEM_PY(Frame_GetBack, "PyFrame_GetBack");
  GPUMEM_PY(Frame_GetCode, "PyFrame_GetCode");
  GPUMEM_PY(Frame_GetLasti, "PyFrame_GetLasti");
  GPUMEM_PY(Frame_GetLineNumber, "PyFrame_GetLineNumber");
  GPUMEM_PY(Code_Addr2Line, "PyCode_Addr2Line");
  GPUMEM_PY(Object_GetAttrString, "PyObject_GetAttrString");
  GPUMEM_PY(Unicode_AsUTF8, "PyUnicode_AsUTF8");
  GPUMEM_PY(IncRef, "Py_IncRef");
  GPUMEM_PY(DecRef, "Py_DecRef");
  GPUMEM_PY(Err_Clear, "PyErr_Clear");
  GPUMEM_PY(GILState_GetThisThreadState, "PyGILState_GetThisThreadState");
  GPUMEM_PY(GILState_Check, "PyGILState_Check");
  GPUMEM_PY(Version, "Py_Version");
  GPUMEM_PY(FrameType, "PyFrame_Type");
  GPUMEM_PY(CellType, "PyCell_Type");
  GPUMEM_PY(Long_AsLong, "PyLong_AsLong");
  GPUMEM_PY(Tuple_Size, "PyTuple_Size");
  GPUMEM_PY(Tuple_GetItem, "PyTuple_GetItem");
#undef GPUMEM_PY
  p.ok = p.IsInitialized && p.IsFinalizing && p.GILState_Ensure && p.GILState_Release && p.ThreadState_Get &&
         p.ThreadState_GetFrame && p.Frame_GetBack && p.Frame_GetCode && p.Frame_GetLineNumber &&
         (!p.Frame_GetLasti || p.Code_Addr2Line) && p.Object_GetAttrString && p.Unicode_AsUTF8 && p.IncRef &&
         p.DecRef && p.Err_Clear;
  return p;
}

const Py& py() {
  static const Py p = load_python();
  return p;
}

std::atomic<bool> g_enabled{true};

// ---- Interned tables ---------------------------------------------------------------------------
struct CodeKey {
  const void* code;
  int lasti;  // instruction offset (3.11+) or line number (3.10)
  bool operator==(const CodeKey& o) const { return code == o.code && lasti == o.lasti; }
};
struct CodeKeyHash {
  size_t operator()(const CodeKey& k) const {
    return std::hash<const void*>()(k.code) * 31u + std::hash<int>()(k.lasti);
  }
};
struct Frame {
  uint32_t file, function, line;
};

struct Tables {
  std::mutex mu;  // Note [Lock hierarchy] (README.md): "stack tables"
  std::unordered_map<std::string, uint32_t> string_ids;
  std::vector<const std::string*> strings{nullptr};     // index = id; points into string_ids' keys
  std::unordered_map<std::string, uint32_t> frame_ids;  // key: the three ids as bytes
  std::vector<Frame> frames{Frame{0, 0, 0}};
  std::unordered_multimap<uint64_t, uint32_t> stack_ids;                    // hash of (flags, frame ids) → candidates
  std::vector<std::pair<uint32_t, std::vector<uint32_t>>> stacks{{0, {}}};  // (flags, frames)
  std::unordered_map<CodeKey, uint32_t, CodeKeyHash> code_frames;
  // Note [Module paths from frames]: per code object (pinned by code_frames), whether its frames are a
  // module forward's: kNoForward, kSelfLocal (`self` is localsplus[0]) or kSelfCell (a closure captured it).
  std::unordered_map<const void*, uint8_t> code_kinds;
};
constexpr uint8_t kNoForward = 0, kSelfLocal = 1, kSelfCell = 2;
Tables& T() {
  static Tables* t = new Tables();  // leaked: used from atexit and other threads until the end
  return *t;
}

void emit_string(uint32_t id, const std::string& s) {
  fmt::StringRec r{id, uint32_t(s.size())};
  writer::append(fmt::REC_STRING, 0, 0, &r, sizeof r, s.data(), uint32_t(s.size()), true);
}
void emit_frame(uint32_t id, const Frame& f) {
  fmt::FrameRec r{id, f.file, f.function, f.line};
  writer::append(fmt::REC_FRAME, 0, 0, &r, sizeof r, nullptr, 0, true);
}
void emit_stack(uint32_t id, uint32_t flags, const std::vector<uint32_t>& fr) {
  fmt::StackRec r{id, flags, uint32_t(fr.size())};
  writer::append(fmt::REC_STACK, 0, 0, &r, sizeof r, fr.data(), uint32_t(fr.size() * 4), true);
}

// The caller holds T().mu. Strings longer than max_bytes are cut: a record must stay far below kMaxPayload, and
// names (files, functions, markers) are short; a notice may be long (intern_long_string).
uint32_t intern_string_locked(Tables& t, std::string_view s, size_t max_bytes = kMaxStringBytes) {
  if (s.size() > max_bytes) s = s.substr(0, max_bytes);
  auto it = t.string_ids.find(std::string(s));
  if (it != t.string_ids.end()) return it->second;
  uint32_t id = uint32_t(t.strings.size());
  auto ins = t.string_ids.emplace(std::string(s), id).first;
  t.strings.push_back(&ins->first);
  emit_string(id, ins->first);
  return id;
}

uint32_t intern_frame_locked(Tables& t, const Frame& f) {
  std::string key(reinterpret_cast<const char*>(&f), sizeof f);
  auto it = t.frame_ids.find(key);
  if (it != t.frame_ids.end()) return it->second;
  uint32_t id = uint32_t(t.frames.size());
  t.frame_ids.emplace(std::move(key), id);
  t.frames.push_back(f);
  emit_frame(id, f);
  return id;
}

uint64_t stack_hash(uint32_t flags, const std::vector<uint32_t>& fr) {
  uint64_t h = 1469598103934665603ull ^ flags;  // FNV-1a over the ids
  for (uint32_t id : fr) h = (h ^ id) * 1099511628211ull;
  return h;
}

// Lookup allocates nothing on a hit (the common case: a site seen before).
uint32_t intern_stack_locked(Tables& t, uint32_t flags, const std::vector<uint32_t>& fr) {
  uint64_t h = stack_hash(flags, fr);
  auto range = t.stack_ids.equal_range(h);
  for (auto it = range.first; it != range.second; ++it) {
    const auto& st = t.stacks[it->second];
    if (st.first == flags && st.second == fr) return it->second;
  }
  uint32_t id = uint32_t(t.stacks.size());
  t.stack_ids.emplace(h, id);
  t.stacks.emplace_back(flags, fr);
  emit_stack(id, flags, fr);
  return id;
}

// Python string attribute of a code object as UTF-8 ("" if absent). Caller holds the GIL.
std::string code_attr(PyObj* code, const char* name) {
  const Py& p = py();
  PyObj* o = p.Object_GetAttrString(code, name);
  if (!o) {
    p.Err_Clear();
    return "";
  }
  const char* s = p.Unicode_AsUTF8(o);
  std::string out = s ? s : "";
  if (!s) p.Err_Clear();
  p.DecRef(o);
  return out;
}

// Whether a code object is a module forward (a method named `forward` whose first argument is `self`), and
// where its `self` lives. Caller holds the GIL; once per code object.
uint8_t code_kind(PyObj* code) {
  const Py& p = py();
  if (!p.CellType || !p.Long_AsLong || !p.Tuple_Size || !p.Tuple_GetItem) return kNoForward;
  if (code_attr(code, "co_name") != "forward") return kNoForward;
  PyObj* argc = p.Object_GetAttrString(code, "co_argcount");
  long n = argc ? p.Long_AsLong(argc) : 0;
  if (argc) p.DecRef(argc);
  p.Err_Clear();
  if (n < 1) return kNoForward;
  auto tuple_has_self = [&](const char* attr, bool first_only) {
    PyObj* t = p.Object_GetAttrString(code, attr);
    bool found = false;
    if (t) {
      long size = p.Tuple_Size(t);
      for (long i = 0; i < size && (!first_only || i < 1) && !found; i++) {
        const char* s = p.Unicode_AsUTF8(p.Tuple_GetItem(t, i));
        found = s && std::strcmp(s, "self") == 0;
      }
      p.DecRef(t);
    }
    p.Err_Clear();
    return found;
  };
  if (!tuple_has_self("co_varnames", true)) return kNoForward;
  return tuple_has_self("co_cellvars", false) ? kSelfCell : kSelfLocal;
}

// ---- Backward bracket ---------------------------------------------------------------------------
std::mutex g_bw_mu;
std::vector<uint32_t> g_bw_stacks;      // innermost bracket last
std::atomic<uint32_t> g_bw_current{0};  // read without the lock on every frameless capture

// Deep recursion: keep the innermost frames, where the allocation happened.
constexpr int kMaxFrames = 256;

// The previous capture of this thread, by raw (code object, offset) pairs: a loop allocating at the
// same site repeats it exactly, and then no table lookup or lock is needed. Safe because every code
// object seen is kept alive by the cache (its address cannot be reused).
struct LastCapture {
  const void* codes[kMaxFrames];
  int keys[kMaxFrames];
  int n = -1;
  uint32_t flags = 0, id = 0;
  uint64_t epoch = 0;
};
std::atomic<uint64_t> g_epoch{1};  // bumped by emit_all_interned(): ids must be re-announced

// ---- The GIL-free path (Note [GIL-free walk] in frame_walker.h) --------------------------------
// A thread's cache of raw key sequences (code objects and instruction offsets, innermost first) that
// were each checked against the public API once, mapped to their interned stack id. Code objects in it
// are kept alive by the global tables, so an address always means the same code.
struct SeqEntry {
  uint32_t id, flags;
  std::vector<const void*> codes;
  std::vector<int> keys;
  std::vector<uint32_t> forwards;  // module forward frames, innermost first: index << 2 | kind
};
struct SeqCache {
  std::unordered_map<uint64_t, SeqEntry> map;
  uint64_t epoch = 0;
};
constexpr size_t kMaxCachedStacks = 1 << 16;  // per thread; cleared when full (recursion, generated code)

std::atomic<uint64_t> g_fast_hits{0}, g_slow_walks{0}, g_mismatches{0};
// GPUMEM_GIL_FREE_WALK=0 keeps every capture on the public API (an escape hatch, and the tests'
// reference for what the GIL-free walk must reproduce).
const bool g_fast_allowed = [] {
  const char* e = std::getenv("GPUMEM_GIL_FREE_WALK");
  return !(e && std::strcmp(e, "0") == 0);
}();
std::atomic<bool> g_fast_off{false};  // too many mismatches: the public API only
std::atomic<int> g_calibrations{0};
constexpr int kMaxCalibrations = 8;
std::mutex g_why_mu;
std::string g_why = "not calibrated yet";

uint64_t seq_hash(uint32_t flags, const void* const* codes, const int* keys, int n) {
  uint64_t h = 1469598103934665603ull ^ flags;
  for (int i = 0; i < n; i++) {
    h = (h ^ reinterpret_cast<uintptr_t>(codes[i])) * 1099511628211ull;
    h = (h ^ uint32_t(keys[i])) * 1099511628211ull;
  }
  return h;
}

SeqCache& seq_cache() {
  thread_local SeqCache c;
  uint64_t e = g_epoch.load(std::memory_order_relaxed);
  if (c.epoch != e) {
    c.map.clear();
    c.epoch = e;
  }
  return c;
}

const SeqEntry* seq_lookup(uint32_t flags, const void* const* codes, const int* keys, int n) {
  SeqCache& c = seq_cache();
  auto it = c.map.find(seq_hash(flags, codes, keys, n));
  if (it == c.map.end()) return nullptr;
  const SeqEntry& e = it->second;
  if (e.flags != flags || int(e.codes.size()) != n ||
      std::memcmp(e.codes.data(), codes, sizeof(void*) * size_t(n)) != 0 ||
      std::memcmp(e.keys.data(), keys, sizeof(int) * size_t(n)) != 0)
    return nullptr;  // a hash collision: the slow path answers
  return &e;
}

const SeqEntry* seq_insert(uint32_t flags, const void* const* codes, const int* keys, int n, uint32_t id,
                           std::vector<uint32_t> forwards) {
  SeqCache& c = seq_cache();
  if (c.map.size() >= kMaxCachedStacks) c.map.clear();
  auto it = c.map.insert_or_assign(seq_hash(flags, codes, keys, n),
                                   SeqEntry{id, flags, std::vector<const void*>(codes, codes + n),
                                            std::vector<int>(keys, keys + n), std::move(forwards)});
  return &it.first->second;
}

// The module chain of a walked sequence: `frames` from the GIL-free walk that produced `e`'s keys.
void fill_chain(const SeqEntry& e, const void* const* frames, ModuleChain* out) {
  out->n = 0;
  out->read = true;
  const Py& p = py();
  for (size_t i = e.forwards.size(); i-- > 0 && out->n < ModuleChain::kMax;) {  // outermost first
    const uint32_t idx = e.forwards[i] >> 2, kind = e.forwards[i] & 3;
    const void* self = fast::first_local(frames[idx]);
    if (self && kind == kSelfCell) {  // PyCellObject: PyObject_HEAD (refcount, type), then ob_ref
      const void* type;
      std::memcpy(&type, static_cast<const char*>(self) + 8, sizeof type);
      if (type != p.CellType) continue;  // MAKE_CELL has not run yet: no module known here
      std::memcpy(&self, static_cast<const char*>(self) + 16, sizeof self);
    }
    if (!self) continue;
    out->selves[out->n] = self;
    out->codes[out->n] = e.codes[idx];
    out->n++;
  }
}

struct FastFrames {
  const void* const* codes;
  const int* keys;
  int n;
};

// Walks the calling thread's frames with the public API and interns the stack. Caller holds the GIL.
// Returns false if the thread has no frames. `fast` (optional): the GIL-free walk of the same moment;
// when it equals the public walk, its key sequence is cached for GIL-free answers from then on, and
// *cached receives that cache entry (its module forwards included).
bool walk(uint32_t flags, uint32_t* stack_id, const FastFrames* fast, const SeqEntry** cached = nullptr) {
  const Py& p = py();
  void* tstate = p.ThreadState_Get();
  PyObj* f = p.ThreadState_GetFrame(tstate);
  if (!f) return false;
  PyObj* innermost = f;
  p.IncRef(innermost);  // held for calibration below
  PyObj* codes[kMaxFrames];
  int keys[kMaxFrames];
  int n = 0;
  while (f && n < kMaxFrames) {
    PyObj* code = p.Frame_GetCode(f);
    keys[n] = p.Frame_GetLasti ? p.Frame_GetLasti(f) : p.Frame_GetLineNumber(f);
    codes[n++] = code;
    PyObj* back = p.Frame_GetBack(f);
    p.DecRef(f);
    f = back;
  }
  if (f) p.DecRef(f);
  const void* const* raw = reinterpret_cast<const void* const*>(codes);
  if (!g_fast_allowed) {
    std::lock_guard<std::mutex> lk(g_why_mu);
    g_why = "GPUMEM_GIL_FREE_WALK=0";
  } else if (!fast::ready() && !fast && p.Version && p.FrameType && p.GILState_GetThisThreadState &&
             g_calibrations.load(std::memory_order_relaxed) < kMaxCalibrations) {
    g_calibrations.fetch_add(1);
    const char* why = nullptr;
    bool ok = fast::calibrate(tstate, innermost, p.FrameType, *p.Version, fast::PublicFrames{raw, keys, n}, &why);
    std::lock_guard<std::mutex> lk(g_why_mu);
    g_why = ok ? "" : why ? why : "unknown";
  }
  p.DecRef(innermost);
  thread_local LastCapture last;
  bool same = last.n == n && last.flags == flags && last.epoch == g_epoch.load(std::memory_order_relaxed) &&
              std::memcmp(last.keys, keys, sizeof(int) * size_t(n)) == 0 &&
              std::memcmp(last.codes, codes, sizeof(void*) * size_t(n)) == 0;
  if (same) {
    *stack_id = last.id;
  } else {
    thread_local std::vector<uint32_t> ids;
    ids.clear();
    Tables& t = T();
    std::lock_guard<std::mutex> lk(t.mu);
    for (int i = 0; i < n; i++) {
      CodeKey k{codes[i], keys[i]};
      auto it = t.code_frames.find(k);
      if (it != t.code_frames.end()) {
        ids.push_back(it->second);
        continue;
      }
      int line = p.Frame_GetLasti ? p.Code_Addr2Line(codes[i], keys[i]) : keys[i];
      // Note [Forward frames]: a method named `forward` is recorded by its co_qualname (`GPT2MLP.forward`), so
      // the reader can name the module class an activation was made in (Note [Categories]); once per code
      // object, on the interning path only.
      std::string function = code_attr(codes[i], "co_name");
      if (function == "forward") {
        std::string qual = code_attr(codes[i], "co_qualname");
        if (!qual.empty()) function = qual;
      }
      Frame fr{intern_string_locked(t, code_attr(codes[i], "co_filename")), intern_string_locked(t, function),
               uint32_t(line < 0 ? 0 : line)};
      uint32_t id = intern_frame_locked(t, fr);
      p.IncRef(codes[i]);  // the cache entry's reference: the address stays this code object's
      t.code_frames.emplace(k, id);
      ids.push_back(id);
    }
    *stack_id = intern_stack_locked(t, flags, ids);
    last.n = n;
    last.flags = flags;
    last.id = *stack_id;
    last.epoch = g_epoch.load(std::memory_order_relaxed);
    std::memcpy(last.keys, keys, sizeof(int) * size_t(n));
    std::memcpy(last.codes, codes, sizeof(void*) * size_t(n));
  }
  if (fast) {
    // Cached only when equal: every code object in it is now pinned by the tables above.
    if (fast->n == n && std::memcmp(fast->codes, raw, sizeof(void*) * size_t(n)) == 0 &&
        std::memcmp(fast->keys, keys, sizeof(int) * size_t(n)) == 0) {
      std::vector<uint32_t> forwards;
      {
        Tables& t = T();
        std::lock_guard<std::mutex> lk(t.mu);
        for (int i = 0; i < n; i++) {
          auto k = t.code_kinds.find(codes[i]);
          uint8_t kind = k != t.code_kinds.end() ? k->second : (t.code_kinds[codes[i]] = code_kind(codes[i]));
          if (kind != kNoForward) forwards.push_back(uint32_t(i) << 2 | kind);
        }
      }
      const SeqEntry* e = seq_insert(flags, fast->codes, fast->keys, n, *stack_id, std::move(forwards));
      if (cached) *cached = e;
    } else if (g_mismatches.fetch_add(1) + 1 >= 1000)
      g_fast_off.store(true);  // a layout surprise: stop paying for two walks
  }
  for (int i = 0; i < n; i++) p.DecRef(codes[i]);
  return true;
}

// Capture with flags; `frameless` receives whether the thread had no Python frames. With
// `only_if_gil_held`, a thread that does not hold the GIL gets only what the GIL-free cache answers
// (Note [Observer stacks] in observer.h).
uint32_t capture_flags(uint32_t flags, bool* frameless, bool only_if_gil_held = false, ModuleChain* modules = nullptr) {
  *frameless = false;
  if (modules) modules->read = false;
  if (!g_enabled.load(std::memory_order_relaxed)) return 0;
  const Py& p = py();
  if (!p.ok) return 0;
  // A thread must not take the GIL before the interpreter exists or once it is finalizing (it would
  // hang or be terminated inside PyGILState_Ensure).
  if (!p.IsInitialized() || p.IsFinalizing()) return 0;
  const void* fcodes[kMaxFrames];
  const void* fframes[kMaxFrames];
  int fkeys[kMaxFrames];
  int fn = -1;
  const bool want_modules = modules && fast::first_local_ready();
  if (fast::ready() && !g_fast_off.load(std::memory_order_relaxed)) {
    void* ts = p.GILState_GetThisThreadState();
    if (!ts) {  // a thread Python never saw (a driver or library thread): no frames, no GIL needed
      *frameless = true;
      return 0;
    }
    fn = fast::walk(ts, fcodes, fkeys, kMaxFrames, want_modules ? fframes : nullptr);
    if (fn == 0) {  // autograd's engine threads: frameless, answered without the GIL
      *frameless = true;
      return 0;
    }
    if (fn > 0) {
      if (const SeqEntry* e = seq_lookup(flags, fcodes, fkeys, fn)) {
        g_fast_hits.fetch_add(1, std::memory_order_relaxed);
        if (want_modules) fill_chain(*e, fframes, modules);
        return e->id;
      }
    }
  }
  if (only_if_gil_held && !(p.GILState_Check && p.GILState_Check())) {
    *frameless = true;  // attributed like a frameless thread: the open backward() bracket, if any
    return 0;
  }
  g_slow_walks.fetch_add(1, std::memory_order_relaxed);
  FastFrames ff{fcodes, fkeys, fn};
  int st = p.GILState_Ensure();
  uint32_t id = 0;
  const SeqEntry* cached = nullptr;
  bool have = walk(flags, &id, fn > 0 ? &ff : nullptr, &cached);
  // The frames walked GIL-free above are still this thread's (it has run no Python code since).
  if (want_modules && cached) fill_chain(*cached, fframes, modules);
  p.GILState_Release(st);
  *frameless = !have;
  return id;
}

// ---- Linked stacks (Note [Backward on the forward line] in backward_links.h) ------------------------
struct NodeRun {
  uint32_t forward, module, name;
};
std::atomic<CurrentNodeFn> g_current_node{nullptr};

bool in_node(NodeRun* n) {
  CurrentNodeFn fn = g_current_node.load(std::memory_order_relaxed);
  return fn && fn(&n->forward, &n->module, &n->name);
}

// Linked stacks already interned by this thread, by their parts.
struct LinkKey {
  uint32_t inner, forward, module, name, outer;
  bool operator==(const LinkKey& o) const {
    return inner == o.inner && forward == o.forward && module == o.module && name == o.name && outer == o.outer;
  }
};
struct LinkKeyHash {
  size_t operator()(const LinkKey& k) const {
    uint64_t h = 1469598103934665603ull;
    for (uint32_t v : {k.inner, k.forward, k.module, k.name, k.outer}) h = (h ^ v) * 1099511628211ull;
    return size_t(h);
  }
};

bool ends_with(const std::string& s, const char* tail) {
  const size_t n = std::strlen(tail);
  return s.size() >= n && s.compare(s.size() - n, n, tail) == 0;
}

// The linked stack of an allocation on this thread while node `n` runs; `inner`: the thread's own Python
// stack (0: frameless, the usual autograd worker).
uint32_t linked(const NodeRun& n, uint32_t inner) {
  const uint32_t outer = g_bw_current.load(std::memory_order_relaxed);
  if (!n.forward && !inner) return outer;  // AccumulateGrad, or a node made before recording: the bracket's stack
  const LinkKey key{inner, n.forward, n.module, n.name, outer};
  thread_local std::unordered_map<LinkKey, uint32_t, LinkKeyHash> cache;
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  if (cache.size() >= kMaxCachedStacks) cache.clear();
  uint32_t id;
  {
    Tables& t = T();
    std::lock_guard<std::mutex> lk(t.mu);
    std::vector<uint32_t> fr;
    uint32_t flags = fmt::kStackBackward | (n.forward ? fmt::kStackLinked : 0);
    auto append = [&](uint32_t stack) {
      if (stack && stack < t.stacks.size())
        fr.insert(fr.end(), t.stacks[stack].second.begin(), t.stacks[stack].second.end());
    };
    append(inner);
    if (inner && inner < t.stacks.size())
      for (uint32_t fid : t.stacks[inner].second)
        if (ends_with(*t.strings[t.frames[fid].file], "torch/utils/checkpoint.py")) {
          flags |= fmt::kStackRecomputed;
          break;
        }
    // A forward op run inside a backward (a reentrant checkpoint's recomputation, create_graph): its stack is linked
    // itself; the part before its <backward> pseudo-frame is the forward, the rest is said once below.
    if (n.forward && n.forward < t.stacks.size() && (t.stacks[n.forward].first & fmt::kStackBackward)) {
      const uint32_t backward_file = intern_string_locked(t, "<backward>");
      for (uint32_t fid : t.stacks[n.forward].second) {
        if (t.frames[fid].file == backward_file) break;
        fr.push_back(fid);
      }
    } else {
      append(n.forward);
    }
    if (n.module) fr.push_back(intern_frame_locked(t, Frame{intern_string_locked(t, "<module>"), n.module, 0}));
    fr.push_back(intern_frame_locked(t, Frame{intern_string_locked(t, "<backward>"), n.name, 0}));
    append(outer);
    if (fr.size() > size_t(kMaxFrames)) fr.resize(kMaxFrames);  // the innermost ones, as for any stack
    id = intern_stack_locked(t, flags, fr);
  }
  cache.emplace(key, id);
  return id;
}

}  // namespace

bool available() { return py().ok; }
void set_enabled(bool on) { g_enabled.store(on); }
bool enabled() { return g_enabled.load() && py().ok; }

uint32_t capture(ModuleChain* modules) {
  bool frameless = false;
  uint32_t id = capture_flags(0, &frameless, false, modules);
  NodeRun n;
  if (in_node(&n)) return linked(n, frameless ? 0 : id);
  if (frameless) return g_bw_current.load(std::memory_order_relaxed);
  return id;
}

void not_a_module_forward(const void* code) {
  {
    Tables& t = T();
    std::lock_guard<std::mutex> lk(t.mu);
    t.code_kinds[code] = kNoForward;
  }
  g_epoch.fetch_add(1);  // every thread's cached sequences are rebuilt without it
}

bool calibrate_first_local(const void* expected, std::string* why) {
  const Py& p = py();
  if (!fast::ready()) capture();  // the first capture calibrates the GIL-free walk (on this very stack)
  const char* w = "Python's thread-state functions are missing";
  bool ok = p.ok && p.GILState_GetThisThreadState &&
            fast::calibrate_first_local(p.GILState_GetThisThreadState(), expected, &w);
  if (!ok && why) *why = w;
  return ok;
}

uint32_t capture_if_gil_held() {
  bool frameless = false;
  uint32_t id = capture_flags(0, &frameless, true);
  NodeRun n;
  if (in_node(&n)) return linked(n, frameless ? 0 : id);
  if (frameless) return g_bw_current.load(std::memory_order_relaxed);
  return id;
}

uint32_t intern_frames(const std::vector<FrameInfo>& frames, uint32_t flags) {
  if (frames.empty()) return 0;
  Tables& t = T();
  std::lock_guard<std::mutex> lk(t.mu);
  std::vector<uint32_t> ids;
  ids.reserve(frames.size());
  for (const FrameInfo& f : frames)
    ids.push_back(
        intern_frame_locked(t, Frame{intern_string_locked(t, f.file), intern_string_locked(t, f.function), f.line}));
  return intern_stack_locked(t, flags, ids);
}

void backward_begin(bool capture) {
  bool frameless = false;
  uint32_t id = capture ? capture_flags(fmt::kStackBackward, &frameless) : 0;
  std::lock_guard<std::mutex> lk(g_bw_mu);
  g_bw_stacks.push_back(id);
  g_bw_current.store(id);
}

void backward_end() {
  std::lock_guard<std::mutex> lk(g_bw_mu);
  if (!g_bw_stacks.empty()) g_bw_stacks.pop_back();  // an unmatched end is ignored, not fatal
  g_bw_current.store(g_bw_stacks.empty() ? 0 : g_bw_stacks.back());
}

void set_current_node(CurrentNodeFn fn) { g_current_node.store(fn); }

uint32_t intern_string(const std::string& s) {
  std::lock_guard<std::mutex> lk(T().mu);
  return intern_string_locked(T(), s);
}

uint32_t intern_long_string(const std::string& s) {
  std::lock_guard<std::mutex> lk(T().mu);
  return intern_string_locked(T(), s, kMaxLongStringBytes);
}

std::vector<FrameInfo> frames_of(uint32_t stack) {
  Tables& t = T();
  std::lock_guard<std::mutex> lk(t.mu);
  std::vector<FrameInfo> out;
  if (stack == 0 || stack >= t.stacks.size()) return out;
  for (uint32_t fid : t.stacks[stack].second) {
    const Frame& f = t.frames[fid];
    out.push_back(FrameInfo{*t.strings[f.file], *t.strings[f.function], f.line});
  }
  return out;
}

uint32_t stack_flags(uint32_t stack) {
  Tables& t = T();
  std::lock_guard<std::mutex> lk(t.mu);
  return stack < t.stacks.size() ? t.stacks[stack].first : 0;
}

std::string info_json() {
  std::string why;
  {
    std::lock_guard<std::mutex> lk(g_why_mu);
    why = g_why;
  }
  json::Writer j;
  j.open('{').kvb("python", py().ok).kvb("gil_free_walk", fast::ready() && !g_fast_off.load());
  j.kvs("not_gil_free_because", why).kvu("gil_free_answers", g_fast_hits.load());
  j.kvu("gil_walks", g_slow_walks.load()).kvu("mismatches", g_mismatches.load());
  return j.close('}').s;
}

void emit_all_interned() {
  Tables& t = T();
  std::lock_guard<std::mutex> lk(t.mu);
  g_epoch.fetch_add(1);
  for (size_t i = 1; i < t.strings.size(); i++) emit_string(uint32_t(i), *t.strings[i]);
  for (size_t i = 1; i < t.frames.size(); i++) emit_frame(uint32_t(i), t.frames[i]);
  for (size_t i = 1; i < t.stacks.size(); i++) emit_stack(uint32_t(i), t.stacks[i].first, t.stacks[i].second);
}

}  // namespace gpumem::rec::stacks
