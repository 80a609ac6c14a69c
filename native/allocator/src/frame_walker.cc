// frame_walker.cc — see frame_walker.h (Note [GIL-free walk]).
#include "frame_walker.h"

#include <pthread.h>

#include <atomic>
#include <cstddef>
#include <cstring>

namespace gpumem::rec::stacks::fast {
namespace {

// `_PyInterpreterFrame` field offsets (Include/internal/pycore_frame.h of each version, 64-bit).
struct Layout {
  unsigned minor;
  int code;       // f_code (3.11, 3.12) / f_executable (3.13)
  int frame_obj;  // frame_obj: checked against the PyFrameObject at calibration
  int previous;
  int instr;  // prev_instr (3.11, 3.12) / instr_ptr (3.13)
  int owner;
  int cstack_owner;    // FRAME_OWNED_BY_CSTACK (entry shims, skipped like PyFrame_GetBack does); -1: none
  int cframe_current;  // offset of current_frame in _PyCFrame; -1: PyThreadState holds current_frame itself
};
constexpr Layout kLayouts[] = {
    {11, 32, 40, 48, 56, 69, -1, 8},
    {12, 0, 48, 8, 56, 70, 3, 0},
    {13, 0, 48, 8, 56, 70, 3, -1},
};
// _PyInterpreterFrame.localsplus: after owner, pointer-aligned — 72 in 3.11, 3.12 and 3.13 (Note [First local]).
constexpr int kLocalsplus = 72;
std::atomic<bool> g_first_local_ready{false};
// PyFrameObject: PyObject_HEAD (refcount, type) then f_back, then f_frame — the same in 3.11–3.13.
constexpr int kFrameObjType = 8, kFrameObjIFrame = 24;
// PyThreadState words scanned for the frame pointer field (offset 56 in 3.11 and 3.12, a little further
// in 3.13); 256 bytes stay inside the struct, which is 360 bytes in 3.11 and larger later.
constexpr int kStateWords = 32;
// The thread state, plus its embedded root _PyCFrame, lies within this many bytes of its start.
constexpr uintptr_t kStateSpan = 1024;

const Layout* g_layout = nullptr;
int g_state_field = -1;          // byte offset in PyThreadState of cframe (3.11, 3.12) / current_frame (3.13)
std::ptrdiff_t g_code_base = 0;  // instruction pointer − code object address − offset in bytes
std::atomic<bool> g_ready{false};

template <typename T>
T at(const void* base, int offset) {
  T v;
  std::memcpy(&v, static_cast<const char*>(base) + offset, sizeof v);
  return v;
}

// [low, high) of the calling thread's stack that is certainly mapped: from here to its top.
struct StackRange {
  uintptr_t low = 0, high = 0;
};
StackRange this_stack() {
  thread_local uintptr_t top = [] {
    pthread_attr_t a;
    uintptr_t t = 0;
    if (pthread_getattr_np(pthread_self(), &a) == 0) {
      void* addr = nullptr;
      size_t size = 0;
      if (pthread_attr_getstack(&a, &addr, &size) == 0) t = reinterpret_cast<uintptr_t>(addr) + size;
      pthread_attr_destroy(&a);
    }
    return t;
  }();
  return StackRange{reinterpret_cast<uintptr_t>(__builtin_frame_address(0)), top};
}

// A _PyCFrame lives on the C stack of a running _PyEval_EvalFrameDefault or inside the thread state
// (root_cframe); anything else is not one, and is never dereferenced.
bool plausible_cframe(const void* tstate, uintptr_t p) {
  const uintptr_t ts = reinterpret_cast<uintptr_t>(tstate);
  if (p >= ts && p < ts + kStateSpan) return true;
  StackRange s = this_stack();
  return s.high && p >= s.low && p + 16 <= s.high;
}

// The innermost _PyInterpreterFrame of `tstate`, or nullptr; `ok` false when it cannot be read safely.
const void* current_frame(const void* tstate, bool* ok) {
  *ok = true;
  const uintptr_t v = at<uintptr_t>(tstate, g_state_field);
  if (g_layout->cframe_current < 0) return reinterpret_cast<const void*>(v);
  if (!v) return nullptr;
  if (!plausible_cframe(tstate, v)) {
    *ok = false;
    return nullptr;
  }
  return at<const void*>(reinterpret_cast<const void*>(v), g_layout->cframe_current);
}

int key_of(const void* code, const void* instr) {
  std::ptrdiff_t bytes = static_cast<const char*>(instr) - static_cast<const char*>(code) - g_code_base;
  return bytes < 0 ? -1 : int(bytes);
}

// Walks from interpreter frame `f` with the current layout (which must be set).
int walk_from(const void* f, const void** codes, int* keys, int max, bool keys_valid, const void** frames = nullptr) {
  const Layout& L = *g_layout;
  int n = 0, steps = 0;
  // `steps` bounds the loop even through skipped frames (a chain is never cyclic, but this code must
  // not hang a workload if one ever were).
  for (; f && n < max && steps < 4 * max; f = at<const void*>(f, L.previous), steps++) {
    if (L.cstack_owner >= 0 && at<char>(f, L.owner) == char(L.cstack_owner)) continue;
    codes[n] = at<const void*>(f, L.code);
    keys[n] = keys_valid ? key_of(codes[n], at<const void*>(f, L.instr)) : 0;
    if (frames) frames[n] = f;
    n++;
  }
  return n;
}

bool same(const PublicFrames& pub, const void* const* codes, const int* keys, int n) {
  if (n != pub.n) return false;
  for (int i = 0; i < n; i++)
    if (codes[i] != pub.codes[i] || keys[i] != pub.keys[i]) return false;
  return true;
}

}  // namespace

bool ready() { return g_ready.load(std::memory_order_acquire); }

bool calibrate(void* tstate, void* frame, const void* frame_type, unsigned long version, const PublicFrames& pub,
               const char** why) {
  if (ready()) return true;
  *why = nullptr;
  const unsigned major = unsigned(version >> 24), minor = unsigned((version >> 16) & 0xff);
  const Layout* layout = nullptr;
  for (const Layout& l : kLayouts)
    if (major == 3 && l.minor == minor) layout = &l;
  if (!layout) return *why = "no frame layout for this Python version", false;
  if (!tstate || !frame || !frame_type || pub.n <= 0) return *why = "no Python frame to calibrate on", false;
  // A standard object header (refcount, then type): free-threaded and trace-refs builds differ.
  if (at<const void*>(frame, kFrameObjType) != frame_type) return *why = "non-standard object header", false;
  const void* iframe = at<const void*>(frame, kFrameObjIFrame);
  if (!iframe || at<const void*>(iframe, layout->code) != pub.codes[0] ||
      at<const void*>(iframe, layout->frame_obj) != frame)
    return *why = "interpreter frame layout differs", false;
  g_layout = layout;
  // The code-to-instruction offset, from the innermost frame with a valid offset.
  bool based = false;
  int j = 0;
  for (const void* f = iframe; f && j < pub.n && !based; f = at<const void*>(f, layout->previous)) {
    if (layout->cstack_owner >= 0 && at<char>(f, layout->owner) == char(layout->cstack_owner)) continue;
    if (pub.keys[j] >= 0) {
      g_code_base = static_cast<const char*>(at<const void*>(f, layout->instr)) -
                    static_cast<const char*>(pub.codes[j]) - pub.keys[j];
      based = true;
    }
    j++;
  }
  if (!based) return g_layout = nullptr, *why = "no frame with an instruction offset", false;
  {
    const void* codes[256];
    int keys[256];
    int n = walk_from(iframe, codes, keys, 256, true);
    if (!same(pub, codes, keys, n)) return g_layout = nullptr, *why = "frame chain differs from the public API", false;
  }
  // The thread state field that leads to the innermost frame.
  for (int w = 0; w < kStateWords && g_state_field < 0; w++) {
    const uintptr_t v = at<uintptr_t>(tstate, w * 8);
    if (layout->cframe_current < 0) {
      if (v == reinterpret_cast<uintptr_t>(iframe)) g_state_field = w * 8;
    } else if (v && plausible_cframe(tstate, v) &&
               at<const void*>(reinterpret_cast<const void*>(v), layout->cframe_current) == iframe) {
      g_state_field = w * 8;
    }
  }
  if (g_state_field < 0) return g_layout = nullptr, *why = "thread state frame pointer not found", false;
  const void* codes[256];
  int keys[256];
  bool ok = false;
  const void* top = current_frame(tstate, &ok);
  int n = ok ? walk_from(top, codes, keys, 256, true) : -1;
  if (!same(pub, codes, keys, n)) {
    g_layout = nullptr;
    g_state_field = -1;
    return *why = "walk from the thread state differs from the public API", false;
  }
  g_ready.store(true, std::memory_order_release);
  return true;
}

int walk(void* tstate, const void** codes, int* keys, int max, const void** frames) {
  if (!ready() || !tstate) return -1;
  bool ok = false;
  const void* top = current_frame(tstate, &ok);
  if (!ok) return -1;
  return walk_from(top, codes, keys, max, true, frames);
}

bool calibrate_first_local(void* tstate, const void* expected, const char** why) {
  if (g_first_local_ready.load(std::memory_order_acquire)) return true;
  if (!ready()) return *why = "the GIL-free walk is not calibrated", false;
  if (!tstate || !expected) return *why = "no thread state or object", false;
  bool ok = false;
  const void* top = current_frame(tstate, &ok);
  if (!ok || !top) return *why = "no Python frame to calibrate on", false;
  if (at<const void*>(top, kLocalsplus) != expected)
    return *why = "the first local is not where it was expected", false;
  g_first_local_ready.store(true, std::memory_order_release);
  return true;
}

bool first_local_ready() { return g_first_local_ready.load(std::memory_order_acquire); }

const void* first_local(const void* frame) { return at<const void*>(frame, kLocalsplus); }

}  // namespace gpumem::rec::stacks::fast
