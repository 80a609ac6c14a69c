// backward_links.h — backward's allocations put on the forward line that made their autograd node.
//
// Note [Backward on the forward line]: allocations on autograd's threads have no Python frames; they used to get
// the stack of the thread waiting in backward(), so a step's whole backward sat on its `loss.backward()` line.
// PyTorch numbers each autograd node it makes (a per-thread sequence number, Node::sequence_nr(), with the making
// thread's id, Node::thread_id()); the profiler pairs forward ops with their backward this way. The observer
// extension, built against the user's torch in both modes (native/python/gpumem/_observer_ext.cpp), gives us the
// calling thread's next sequence number and id, the node the calling thread is evaluating now
// (torch::autograd::get_current_node(): the engine sets it around a node's whole evaluation, apply(), then
// validate_outputs' casts and sum_to, then the sums into the next nodes' input buffers), and one RecordFunction
// callback at each op's end, with its switch:
// - forward: the nodes a thread made since it last filed ([watermark, next)) are filed under the Python stack that
//   made them, at the first of: an allocation (on_stack(): its stack is captured anyway, and an op allocates after
//   making its node, so the unfiled nodes are that op's), or the end of an op that made nodes and allocated nothing
//   after (op_end(): a view, an in-place op; one stack capture, the cached GIL-free walk). With the innermost module
//   forward running;
// - backward: each allocation asks which node its thread is evaluating (current()), and looks that node's forward up.
// While a node runs, stacks::capture() answers with the linked stack (stack_capture.h, FORMAT.md's kStackLinked):
// the forward op's frames, a <module> and a <backward> pseudo-frame, then the backward() caller's frames, so the
// allocation's line is the forward op's and `loss.backward()` stays its outer frame.
//
// Note [Learned steps]: the op callback costs PyTorch a RecordFunction for every op once any callback wants its scope
// (a ResNet-50 step runs 3,200 ops: with a no-op callback its host time was ×1.10 on an H200), while a step's nodes are
// the same from step to step. So the thread that calls backward() (the forward thread, "main") learns a step with the
// callback on: for each of its nodes, by its offset from the step's first sequence number, the stack and module it
// was filed under, and those of the first allocation after it was made (before the next node: the op's own output,
// or the next op's after a view). At the next backward() the step is known and the callback stays off: each
// allocation first checks that it is the one learned after the last node made, then files the nodes it finds
// unfiled from the known step, views and in-place ops on their own lines. A check that fails (another path through
// the model, another length of loop) files that allocation's nodes under its stack, as an allocation does without
// the callback, turns the callback on for the rest of the step, and the next step is learned; so is the step after
// one whose node count differs from the known one's. After misses in kGiveUp steps with no step replayed whole
// between them, the callback stays on. Nodes made on other threads, and in a backward (a reentrant checkpoint's
// recomputation), are filed by their allocations alone (the callback is off there).
// Note [Forward callback off in backward]: the callback is off while a backward() bracket is open (the backward's
// own ops, most of a step's, make no node to file).
//
// Links are kept per forward thread in a ring of kRing sequence numbers: a graph of more nodes than that between
// forward and backward loses the oldest links (those allocations get the backward() stack, as before), never memory.
// Lock order (Note [Lock hierarchy] in README.md): op_end() captures the stack (GIL) with no lock held; current() is
// called from a stack capture, before any allocator lock; the rings' registry lock is taken alone, only to add a
// forward thread; the known step is the main thread's alone.
#pragma once
#include <cstdint>
#include <string>

namespace gpumem::rec::links {

constexpr uint64_t kRing = 1u << 18;  // sequence numbers kept per forward thread (4 MiB)
constexpr int kGiveUp = 4;            // steps with a miss, none whole between, before the op callback stays on

// PyTorch's side, from the observer extension: the calling thread's next autograd sequence number
// (at::sequence_number::peek) and its RecordFunction thread id; the op callback's switch (0 off, 1 on); the node the
// calling thread evaluates now (its sequence number, UINT64_MAX for none as AccumulateGrad's; the thread that made
// it; its name, a string that outlives the process's nodes), 0 when none.
using CountFn = uint64_t (*)();
using SwitchFn = void (*)(int);
using CurrentFn = int (*)(uint64_t* seq, uint64_t* thread, const char** name);
void connect(CountFn next_sequence, CountFn thread_id, SwitchFn op_callback, CurrentFn current_node);

// After a stack capture for an allocation on any thread: files the nodes the calling thread made since its last
// filing under `stack` and `module` (a path's string id, 0: none).
void on_stack(uint32_t stack, uint32_t module);
// At the end of an op (the op callback): files what the op made without allocating after.
void op_end();
// The node the calling thread evaluates now: its forward op's stack and module path, and its name (string ids; 0
// unknown). False when none runs.
bool current(uint32_t* forward_stack, uint32_t* module_path, uint32_t* name);
// A backward() bracket opens or closes (Note [Learned steps], Note [Forward callback off in backward]).
void backward_begins();
void backward_ends();

// Diagnostics (the stack info JSON): nodes met in backward, and of them linked to their forward op; steps learned,
// replayed with the callback off, and missed (Note [Learned steps]).
std::string json();

}  // namespace gpumem::rec::links
