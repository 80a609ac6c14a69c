// stack_capture.cc — see stack_capture.h (Note [Finding CPython], Note [Stack cost]).
#include "stack_capture.h"

#include <dlfcn.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <string_view>
#include <unordered_map>

#include "../../format/gpumem_format.h"
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
  std::mutex mu;  // lock order: GIL → mu → writer buffer lock
  std::unordered_map<std::string, uint32_t> string_ids;
  std::vector<const std::string*> strings{nullptr};  // index = id; points into string_ids' keys
  std::unordered_map<std::string, uint32_t> frame_ids;  // key: the three ids as bytes
  std::vector<Frame> frames{Frame{0, 0, 0}};
  std::unordered_multimap<uint64_t, uint32_t> stack_ids;  // hash of (flags, frame ids) → candidates
  std::vector<std::pair<uint32_t, std::vector<uint32_t>>> stacks{{0, {}}};  // (flags, frames)
  std::unordered_map<CodeKey, uint32_t, CodeKeyHash> code_frames;
};
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

// The caller holds T().mu.
uint32_t intern_string_locked(Tables& t, std::string_view s) {
  // Strings longer than this are cut: a record must stay far below kMaxPayload and file names are short.
  if (s.size() > 4096) s = s.substr(0, 4096);
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

// Walks the calling thread's frames and interns the stack. Caller holds the GIL. Returns false if the
// thread has no frames.
bool walk(uint32_t flags, uint32_t* stack_id) {
  const Py& p = py();
  PyObj* f = p.ThreadState_GetFrame(p.ThreadState_Get());
  if (!f) return false;
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
      Frame fr{intern_string_locked(t, code_attr(codes[i], "co_filename")),
               intern_string_locked(t, code_attr(codes[i], "co_name")), uint32_t(line < 0 ? 0 : line)};
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
  for (int i = 0; i < n; i++) p.DecRef(codes[i]);
  return true;
}

// Capture with flags; `frameless` receives whether the thread had no Python frames.
uint32_t capture_flags(uint32_t flags, bool* frameless) {
  *frameless = false;
  if (!g_enabled.load(std::memory_order_relaxed)) return 0;
  const Py& p = py();
  if (!p.ok) return 0;
  // A thread must not take the GIL before the interpreter exists or once it is finalizing (it would
  // hang or be terminated inside PyGILState_Ensure).
  if (!p.IsInitialized() || p.IsFinalizing()) return 0;
  int st = p.GILState_Ensure();
  uint32_t id = 0;
  bool have = walk(flags, &id);
  p.GILState_Release(st);
  *frameless = !have;
  return id;
}

}  // namespace

bool available() { return py().ok; }
void set_enabled(bool on) { g_enabled.store(on); }
bool enabled() { return g_enabled.load() && py().ok; }

uint32_t capture() {
  bool frameless = false;
  uint32_t id = capture_flags(0, &frameless);
  if (frameless) return g_bw_current.load(std::memory_order_relaxed);
  return id;
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

uint32_t intern_string(const std::string& s) {
  std::lock_guard<std::mutex> lk(T().mu);
  return intern_string_locked(T(), s);
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

void emit_all_interned() {
  Tables& t = T();
  std::lock_guard<std::mutex> lk(t.mu);
  g_epoch.fetch_add(1);
  for (size_t i = 1; i < t.strings.size(); i++) emit_string(uint32_t(i), *t.strings[i]);
  for (size_t i = 1; i < t.frames.size(); i++) emit_frame(uint32_t(i), t.frames[i]);
  for (size_t i = 1; i < t.stacks.size(); i++) emit_stack(uint32_t(i), t.stacks[i].first, t.stacks[i].second);
}

}  // namespace gpumem::rec::stacks
