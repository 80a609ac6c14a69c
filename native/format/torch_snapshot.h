// torch_snapshot.h — PyTorch's memory-snapshot schema, the one place native code spells it: what
// torch.cuda.memory._snapshot() returns (PyTorch 2.11, torch/csrc/cuda/Module.cpp, THCPModule_memorySnapshot),
// checked against real 2.11 pickles (/work/shared/fixtures/pytorch-snapshots in the project's fixtures).
//
// Note [One snapshot schema]: two writers produce this dict — the allocator's live snapshot
// (native/allocator/src/snapshot_pickle.cc) and the reader's export of a capture or imported pickle
// (native/addon/src/export_pickle.cpp) — and the reader parses it (native/addon/src/snapshot_import.cpp).
// Key names, their order, the trace action names, block states, segment types and the default
// allocator_settings live here, as emit_* helpers over PickleEmitter. The writers decide only the values
// (which figures, which frames, memoised or not); the dict's shape cannot drift between them.
//
// Shape (keys in PyTorch's order):
//   {segments: [{device, address, total_size, allocated_size, active_size, requested_size, stream,
//                segment_type, segment_pool_id, is_expandable, frames, blocks: [{address, size,
//                requested_size, state, frames}]}],
//    device_traces: [[{action, addr | device_free, size, stream, time_us, compile_context, user_metadata,
//                      frames (not on 'snapshot')}]],   one list per device
//    allocator_settings: {...},
//    external_annotations: [{stage, name, device, time_us}]}
//   frames: [{name, filename, line}], innermost first.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "gpumem_format.h"
#include "pickle_emit.h"

namespace gpumem::fmt::torch {

// Top-level keys.
inline constexpr const char* kSegments = "segments";
inline constexpr const char* kDeviceTraces = "device_traces";
inline constexpr const char* kAllocatorSettings = "allocator_settings";
inline constexpr const char* kExternalAnnotations = "external_annotations";
// Keys shared by several dicts.
inline constexpr const char* kFrames = "frames";
inline constexpr const char* kFrameName = "name";
inline constexpr const char* kFrameFile = "filename";
inline constexpr const char* kFrameLine = "line";
inline constexpr const char* kSegmentType = "segment_type";
inline constexpr const char* kState = "state";

// Trace actions, in the order of the allocator's and the reader's action enums' first seven entries
// (both are checked against these names by their users); 'oom' and 'snapshot' come after.
enum class Action : uint8_t {
  alloc,
  free_requested,
  free_completed,
  segment_alloc,
  segment_free,
  segment_map,
  segment_unmap,
  oom,
  snapshot,
};
inline constexpr int kActionCount = 9;
inline constexpr const char* kActionNames[kActionCount] = {
    "alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "segment_map", "segment_unmap",
    "oom",   "snapshot"};
inline constexpr const char* action_name(Action a) { return kActionNames[uint8_t(a)]; }

// Block states, indexed by the capture format's BlockState (gpumem_format.h): the same three words.
inline constexpr const char* kBlockStateNames[3] = {"inactive", "active_allocated", "active_pending_free"};
static_assert(BLOCK_INACTIVE == 0 && BLOCK_ACTIVE_ALLOCATED == 1 && BLOCK_ACTIVE_PENDING_FREE == 2,
              "kBlockStateNames is indexed by fmt::BlockState");
inline constexpr const char* block_state_name(uint8_t state) {
  return state < 3 ? kBlockStateNames[state] : kBlockStateNames[BLOCK_INACTIVE];
}
inline constexpr const char* segment_type(bool small_pool) { return small_pool ? "small" : "large"; }

// ---- frames ----------------------------------------------------------------------------------------
inline void emit_frame(PickleEmitter& p, std::string_view name, std::string_view file, int64_t line) {
  p.begin_dict();
  p.kv(kFrameName, name);
  p.kv(kFrameFile, file);
  p.kv_int(kFrameLine, line);
  p.end_dict();
}

// ---- segments --------------------------------------------------------------------------------------
struct SegmentFields {
  int device = 0;
  uint64_t address = 0, total_size = 0, allocated_size = 0, active_size = 0, requested_size = 0, stream = 0;
  bool small_pool = false;
  uint64_t pool_id0 = 0, pool_id1 = 0;
  bool expandable = false;
};
// Opens a segment dict and writes its fields up to the key "frames": the caller writes the frame list
// next, then begin_blocks, the blocks, and end_segment.
inline void begin_segment(PickleEmitter& p, const SegmentFields& s) {
  p.begin_dict();
  p.kv_int("device", s.device);
  p.kv_uint("address", s.address);
  p.kv_uint("total_size", s.total_size);
  p.kv_uint("allocated_size", s.allocated_size);
  p.kv_uint("active_size", s.active_size);
  p.kv_uint("requested_size", s.requested_size);
  p.kv_uint("stream", s.stream);
  p.kv(kSegmentType, segment_type(s.small_pool));
  p.key("segment_pool_id");
  p.begin_tuple();
  p.uinteger(s.pool_id0);
  p.uinteger(s.pool_id1);
  p.end_tuple();
  p.kv_bool("is_expandable", s.expandable);
  p.key(kFrames);
}
inline void begin_blocks(PickleEmitter& p) {
  p.key("blocks");
  p.begin_list();
}
// Opens a block dict and writes its fields up to the key "frames": the caller writes the frame list, then
// end_block.
inline void begin_block(PickleEmitter& p, uint64_t address, uint64_t size, uint64_t requested, uint8_t state) {
  p.begin_dict();
  p.kv_uint("address", address);
  p.kv_uint("size", size);
  p.kv_uint("requested_size", requested);
  p.kv(kState, block_state_name(state));
  p.key(kFrames);
}
inline void end_block(PickleEmitter& p) { p.end_dict(); }
inline void end_segment(PickleEmitter& p) {
  p.end_list();  // blocks
  p.end_dict();
}

// ---- device traces ---------------------------------------------------------------------------------
// PyTorch writes no frames on 'snapshot' entries.
inline constexpr bool trace_entry_has_frames(Action a) { return a != Action::snapshot; }
// Opens a trace entry and writes its fields; when trace_entry_has_frames(a) it ends with the key "frames"
// and the caller writes the frame list next. Then end_trace_entry.
// PyTorch names the address field of an 'oom' entry after what it holds: the device's free bytes.
inline void begin_trace_entry(PickleEmitter& p, Action a, uint64_t addr_or_device_free, uint64_t size, uint64_t stream,
                              int64_t time_us, std::string_view compile_context = "N/A",
                              std::string_view user_metadata = "") {
  p.begin_dict();
  p.kv("action", action_name(a));
  p.kv_uint(a == Action::oom ? "device_free" : "addr", addr_or_device_free);
  p.kv_uint("size", size);
  p.kv_uint("stream", stream);
  p.kv_int("time_us", time_us);
  p.kv("compile_context", compile_context);
  p.kv("user_metadata", user_metadata);
  if (trace_entry_has_frames(a)) p.key(kFrames);
}
inline void end_trace_entry(PickleEmitter& p) { p.end_dict(); }

// ---- allocator_settings ----------------------------------------------------------------------------
// What PyTorch 2.11 writes for the settings our allocator has (the rest at PyTorch's defaults).
inline void emit_allocator_settings(PickleEmitter& p, std::string_view alloc_conf, bool expandable_segments) {
  p.begin_dict();
  p.kv("PYTORCH_CUDA_ALLOC_CONF", alloc_conf);
  p.kv_int("max_split_size", -1);
  p.kv_float("garbage_collection_threshold", 0.0);
  p.kv_bool("expandable_segments", expandable_segments);
  p.kv_int("pinned_num_register_threads", 1);
  p.kv_bool("release_lock_on_cudamalloc", false);
  p.kv_bool("pinned_use_cuda_host_register", false);
  p.kv_bool("graph_capture_record_stream_reuse", false);
  p.key("roundup_power2_divisions");
  p.begin_dict();
  for (int k = 1; k <= 32768; k *= 2) p.kv_int(std::to_string(k), 0);
  p.end_dict();
  p.end_dict();
}

// ---- external_annotations --------------------------------------------------------------------------
inline void emit_annotation(PickleEmitter& p, bool begin, std::string_view name, int device, int64_t time_us) {
  p.begin_dict();
  p.kv("stage", begin ? "START" : "END");
  p.kv("name", name);
  p.kv_int("device", device);
  p.kv_int("time_us", time_us);
  p.end_dict();
}

}  // namespace gpumem::fmt::torch
