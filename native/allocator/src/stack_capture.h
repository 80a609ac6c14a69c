// stack_capture.h — Python stacks at allocation time, and the interned string/frame/stack tables the
// capture refers to by id.
//
// Note [Finding CPython]: the .so never links libpython. Every CPython function is looked up at run time
// with dlsym(RTLD_DEFAULT, ...): in a `python` process they are exported by the interpreter binary or by
// a libpython loaded RTLD_GLOBAL. Missing symbols (embedded interpreters loaded RTLD_LOCAL, non-Python
// hosts) simply turn capture off. Works with CPython 3.10–3.13 (PyFrame_GetLasti from 3.11; on 3.10 the
// line number is the cache key instead of the instruction offset).
//
// Note [Stack cost]: a capture reads the thread's frames without the GIL (Note [GIL-free walk] in
// frame_walker.h) and answers from a per-thread cache of verified key sequences; only a new sequence
// takes the GIL, walks with the public API and looks each (code object, instruction offset) pair up in
// the shared tables; only a new pair computes a line number and names. Cached code objects keep a
// reference so their addresses are never reused for other code. Stacks are interned by their frame-id
// sequence, so the hot path emits nothing but the event's stack id.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace gpumem::rec::stacks {

// Resolves the CPython symbols once; false (capture off) if they are not all there.
bool available();
void set_enabled(bool on);
bool enabled();

// The `self` of every module forward running on the calling thread, outermost first (Note [Module paths
// from frames] in module_marks.h): the first local of each frame whose code is a method named forward.
struct ModuleChain {
  static constexpr int kMax = 32;
  const void* selves[kMax];
  const void* codes[kMax];  // the forward's code object, for not_a_module_forward
  int n = 0;
  bool read = false;  // false: the frames could not be read GIL-free this time (no chain to compare)
};

// The calling thread's Python stack as an interned stack id (0 = no frames / capture off). Takes the
// GIL: never call it while holding an allocator lock. Threads without Python frames get the stack of
// the thread in backward() (flagged kStackBackward) while a backward bracket is open. With `modules`,
// also the module forwards running, where the first local can be read (fast::first_local_ready()).
uint32_t capture(ModuleChain* modules = nullptr);

// A code object whose `self` turned out not to be a module: its frames are no longer read for modules.
void not_a_module_forward(const void* code);
// Verifies the first-local layout on the calling thread (which holds the GIL; its innermost Python
// frame's first argument is `expected`). Note [First local] in frame_walker.h.
bool calibrate_first_local(const void* expected, std::string* why);

// The same, for callers that may hold a foreign lock another thread could hold while waiting for the
// GIL (PyTorch's allocator lock, in a trace tracker): never takes the GIL. A thread that does not hold
// it gets the GIL-free cache's answer, or else the open backward() stack (or 0).
uint32_t capture_if_gil_held();

// On the thread calling backward(): captures its stack (when `capture`; else brackets with no stack,
// so that begin/end always pair up).
void backward_begin(bool capture);
void backward_end();

// Note [Backward on the forward line] (backward_links.h): the node the calling thread evaluates now (its forward
// op's stack, forward module path and name, as ids; 0 = unknown), or false. While one runs, capture() answers with
// the linked stack: the thread's own Python frames (if any), the forward op's frames, <module> and <backward>
// pseudo-frames, then the open backward() bracket's frames (flags kStackBackward | kStackLinked, and
// kStackRecomputed when the own frames are torch.utils.checkpoint's recomputation). Called with no lock held.
using CurrentNodeFn = bool (*)(uint32_t* forward_stack, uint32_t* module_path, uint32_t* node_name);
void set_current_node(CurrentNodeFn fn);

// Interning (thread-safe). New entries are appended to the capture before the id is returned.
constexpr size_t kMaxStringBytes = 4096;
uint32_t intern_string(const std::string& s);  // cut at kMaxStringBytes
// Note [Long notices]: a notice's text may carry data for the reader (the leak keeper's held storages, one address
// each, Note [Leak keeper search] in native/python/gpumem/_keeper.py), so it is cut at 1 MiB instead.
constexpr size_t kMaxLongStringBytes = 1u << 20;
uint32_t intern_long_string(const std::string& s);

struct FrameInfo {
  std::string file, function;
  uint32_t line;
};
// Frames of a stack, innermost first, for snapshot pickles. Empty for 0 or unknown ids.
std::vector<FrameInfo> frames_of(uint32_t stack);
// Interns a stack given by its frames (innermost first), e.g. from a PyTorch snapshot's trace entry.
uint32_t intern_frames(const std::vector<FrameInfo>& frames, uint32_t flags);
uint32_t stack_flags(uint32_t stack);

// How captures are being answered, as JSON: whether the GIL-free walk is on (and if not, why), and
// counts of GIL-free answers, GIL walks and fast/public mismatches. For benchmarks and diagnostics.
std::string info_json();

// Re-emits every interned record into a capture that was opened after some were interned.
void emit_all_interned();

}  // namespace gpumem::rec::stacks
