// backward_links.h — backward's allocations put on the forward line that made their autograd node.
//
// Note [Backward on the forward line]: allocations on autograd's threads have no Python frames; they used to get
// the stack of the thread waiting in backward(), so a step's whole backward sat on its `loss.backward()` line.
// PyTorch numbers each autograd node it makes (a per-thread sequence number, Node::sequence_nr) and reports that
// number, and the forward thread's id, when the node runs (RecordFunction's BACKWARD_FUNCTION scope: seqNr(),
// forwardThreadId()); the profiler pairs forward ops with their backward this way. The observer extension, built
// against the user's torch in both modes (native/python/gpumem/_observer_ext.cpp), gives us PyTorch's thread's next
// sequence number and thread id, and two RecordFunction callbacks:
// - forward: the nodes a thread made since it last filed ([watermark, next)) are filed under the Python stack that
//   made them, at the first of: an allocation (on_stack(): its stack is captured anyway, and an op allocates after
//   making its node, so the unfiled nodes are that op's), or the end of an op that made nodes and allocated nothing
//   after (op_end(): a view, an in-place op; one stack capture, the cached GIL-free walk). With the innermost module
//   forward running. An op that makes no node costs a sequence-number read;
// - backward: node_begin()/node_end() around each node's apply() on the autograd thread, which looks its forward up.
// While a node runs, stacks::capture() answers with the linked stack (stack_capture.h, FORMAT.md's kStackLinked):
// the forward op's frames, a <module> and a <backward> pseudo-frame, then the backward() caller's frames, so the
// allocation's line is the forward op's and `loss.backward()` stays its outer frame.
// Note [Forward callback off in backward]: an op's RecordFunction costs PyTorch a few hundred ns once any callback
// wants its scope, so the op callback is switched off while a backward() bracket is open (backward_begins(): the
// backward's own ops, most of a step's, make no node to file); the node callback stays on. Nodes a backward makes
// (a reentrant checkpoint's recomputation) are still filed by their allocations.
// Links are kept per forward thread in a ring of kRing sequence numbers: a graph of more nodes than that between
// forward and backward loses the oldest links (those allocations get the backward() stack, as before), never memory.
// Lock order (Note [Lock hierarchy] in README.md): op_end() captures the stack (GIL) with no lock held; the rings'
// registry lock is taken alone, only to add a forward thread.
#pragma once
#include <cstdint>

namespace gpumem::rec::links {

constexpr uint64_t kRing = 1u << 18;  // sequence numbers kept per forward thread (4 MiB)

// PyTorch's side, from the observer extension: the calling thread's next autograd sequence number
// (at::sequence_number::peek) and its RecordFunction thread id; the op callback's switch (0 off, 1 on).
using CountFn = uint64_t (*)();
using SwitchFn = void (*)(int);
void connect(CountFn next_sequence, CountFn thread_id, SwitchFn op_callback);

// After a stack capture for an allocation on any thread: files the nodes the calling thread made since its last
// filing under `stack` and `module` (a path's string id, 0: none).
void on_stack(uint32_t stack, uint32_t module);
// At the end of an op (the op callback): files what the op made without allocating after.
void op_end();
// On an autograd thread, around a node's apply(): the node's forward thread and sequence number (< 0: none, as
// AccumulateGrad's), and its name.
void node_begin(uint64_t forward_thread, int64_t seq, const char* name);
void node_end();
// A backward() bracket opens or closes (Note [Forward callback off in backward]).
void backward_begins();
void backward_ends();

// How many nodes ran, and how many of them found their forward op (diagnostics: the stack info JSON).
uint64_t nodes_run();
uint64_t nodes_linked();

}  // namespace gpumem::rec::links
