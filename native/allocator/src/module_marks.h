// module_marks.h — module paths for activations, read from the frames already walked for each stack.
//
// Note [Module paths from frames]: the reader gives each activation the innermost module whose forward
// was running when it was allocated, from MARK_MODULE_BEGIN/END records named by the module's path
// (Note [Module paths] in native/python/gpumem/_modules.py). Those used to come from global module hooks:
// two Python calls per module call in the user's forward, a second firing of every hook under
// torch.compile (and its UserWarning on the user's stderr), +2–5 % step time. Now nothing runs per module
// call. At each allocation of the module thread (the thread that started tracking) the stack capture
// already walks the frames GIL-free; the frames whose code is a method named `forward` with first
// argument `self` give the modules running, outermost first (their first local, Note [First local] in
// frame_walker.h). on_allocation() maps each `self` to its path (an id → path table the workload fills
// once per module through the resolver, under the GIL, when an unknown module first allocates) and
// writes the BEGIN/END marks that turn the previous chain into this one, just before the allocation's
// own record. So the reader sees the same nesting for every allocation, with no reader change; module
// boundaries that no allocation falls between are simply not written. The chain is closed at backward()
// (the autograd threads' allocations are no forward's).
//
// Lock order (Note [Lock hierarchy] in README.md): the resolver is called with no lock of ours held (it
// takes the GIL); the table's lock is taken below it and only around map operations; marks go to the
// writer.
#pragma once
#include <cstdint>

#include "stack_capture.h"

namespace gpumem::rec::modules {

// The workload's resolver: called for a chain of module `self`s (outermost first) of which some are not
// in the table yet; it calls learn() for each (a path, or nullptr: not a module). Runs on the allocating
// thread; takes the GIL itself (a ctypes callback). Returns 0.
using Resolver = int (*)(const void* const* selves, int n);

// Module marks on, for the calling thread only (the bootstrap's thread, as the hooks were).
void enable(Resolver resolve);
bool wanted();  // enabled, and the calling thread is the module thread
void learn(const void* self, const char* path);
void forget(const void* self);

// Before the record of an allocation whose stack capture filled `chain` (on the module thread). Returns the
// innermost module's path (string id; 0: none), for backward_links.h.
uint32_t on_allocation(const stacks::ModuleChain& chain);
// The path (string id) of the innermost module in `chain`, without marks (Note [Backward on the forward line] in
// backward_links.h); 0: none known, or not the module thread.
uint32_t innermost_path(const stacks::ModuleChain& chain);
// Ends every open module (backward() begins; the process ends).
void close_all();

}  // namespace gpumem::rec::modules
