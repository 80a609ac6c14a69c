// frame_walker.h — reads the calling thread's own Python frames without taking the GIL.
//
// Note [GIL-free walk]: a capture used to take the GIL and walk frames through the public API
// (PyThreadState_GetFrame / PyFrame_GetBack / PyFrame_GetCode / PyFrame_GetLasti). That costs a GIL
// round trip, several calls and refcount pairs per frame, and it materialises a PyFrameObject for
// every frame on the stack (which CPython must later copy the frame's locals into when the function
// returns). On a CPU-bound training step that was a few percent of step time.
//
// A thread's own frame chain only changes while that thread runs Python code, and a thread inside an
// allocation is in C code (PyTorch releases the GIL around ops). So the chain can be read, without the GIL
// and without writing anything, from CPython's `_PyInterpreterFrame` structs: code object pointer,
// `previous` link, instruction pointer, owner. Their layout is fixed per minor version; the table in
// frame_walker.cc covers 3.11, 3.12 and 3.13 (standard builds; free-threaded and trace-refs builds are
// detected and left to the public API).
//
// Nothing is trusted blindly:
//  - calibrate() runs once, under the GIL, on a real stack: it checks the object header, finds the
//    thread state's frame pointer field by value, derives the code-to-instruction offset, and
//    requires the GIL-free walk to reproduce the public API's walk frame for frame;
//  - the caller (stack_capture.cc) only ever answers from a cache of key sequences that were each
//    compared against the public API once (under the GIL, when first seen); a sequence that does not
//    match is never cached, so a layout surprise costs speed, not correctness.
// The result is the same (code object, instruction offset) keys the public walk produces.
#pragma once
#include <cstdint>

namespace gpumem::rec::stacks::fast {

struct PublicFrames {
  const void* const* codes;  // innermost first
  const int* keys;           // PyFrame_GetLasti per frame
  int n;
};

// Calibrates from the calling thread, which holds the GIL. `tstate`: its PyThreadState; `frame`: its
// innermost complete PyFrameObject (borrowed); `frame_type`: &PyFrame_Type; `version`: Py_Version.
// Returns true once the walker is verified; `why` receives the reason when it is not.
bool calibrate(void* tstate, void* frame, const void* frame_type, unsigned long version, const PublicFrames& pub,
               const char** why);
bool ready();

// The calling thread's frames, innermost first, as (code object, PyFrame_GetLasti-equivalent key),
// without the GIL. Returns the number of frames (0: no frames), or -1 if this thread's state cannot be
// read safely right now (use the public API). `frames` (optional) receives each interpreter frame.
int walk(void* tstate, const void** codes, int* keys, int max, const void** frames = nullptr);

// Note [First local]: a frame's first local variable (`self` in a method: the module whose forward runs, for
// module paths, Note [Module paths from frames] in module_marks.h) is localsplus[0] of its interpreter
// frame, at the same offset in 3.11–3.13. Verified once, like the walk: calibrate_first_local runs on a
// thread holding the GIL whose innermost frame's first argument is `expected`.
bool calibrate_first_local(void* tstate, const void* expected, const char** why);
bool first_local_ready();
// The first local of an interpreter frame that walk() returned (borrowed; alive while the frame runs).
const void* first_local(const void* frame);

}  // namespace gpumem::rec::stacks::fast
