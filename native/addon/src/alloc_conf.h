// PyTorch's allocator settings as the reader knows them: those a run's data records (a capture header's
// "pytorch_allocator_settings", a snapshot pickle's allocator_settings: what PyTorch reported for the run) and those
// a user asks a what-if about (`gpumem replay --alloc-conf`, the addon's replay()/whatIf() allocConf).
//
// Note [Settings of the data]: a setting either changes how PyTorch's allocator lays out device memory or does not.
//  - modelled by the pytorch policies (Note [PyTorch's settings] in native/allocator/src/device_allocator.h):
//    max_split_size_mb, max_non_split_rounding_mb, roundup_power2_divisions; expandable_segments picks the policy
//    (pytorch or pytorch-expandable);
//  - no effect on device memory: backend:native, release_lock_on_cudamalloc, the pinned_* settings (host memory),
//    graph_capture_record_stream_reuse:False;
//  - not modelled, each named in `not_modelled` (a replay of a pytorch policy then gives no figure):
//    garbage_collection_threshold above 0, backend:cudaMallocAsync (another allocator), per_process_memory_fraction
//    (a cap: --capacity sets one), graph_capture_record_stream_reuse:True, and any key PyTorch 2.11 does not know.
// A settings object is read by its typed fields where PyTorch gives them (max_split_size in bytes, -1 unset; the
// roundup dict by interval; garbage_collection_threshold; expandable_segments) and by its PYTORCH_CUDA_ALLOC_CONF text
// for the rest: the object lists PyTorch's defaults for keys nobody set, while the text holds what the user set.
#pragma once
#include <stdexcept>
#include <string>
#include <vector>

#include "json.h"
#include "what_if.h"

namespace gpumem {

struct AllocConf {
  core::PytorchSettings pytorch;
  int expandable = -1;                    // expandable_segments: -1 not said, else 0 or 1
  std::vector<std::string> not_modelled;  // "garbage_collection_threshold:0.6 (garbage collection)", …
  std::string backend;                    // "native", "cudaMallocAsync", or "" when not said
};

// PYTORCH_CUDA_ALLOC_CONF's grammar as PyTorch 2.11 parses it (keys and values separated by ':' and ',', brackets
// for roundup_power2_divisions' per-interval form). Throws std::invalid_argument, saying what is wrong, for text
// PyTorch would refuse.
AllocConf parse_alloc_conf(const std::string& text);
// PyTorch's allocator_settings object (torch.cuda.memory._snapshot()["allocator_settings"]). Never throws: a field of
// another type is read from the text instead.
AllocConf alloc_conf_from_settings(const json::Value& settings);
// The modelled settings as PYTORCH_CUDA_ALLOC_CONF text ("" for PyTorch's defaults), e.g.
// "max_split_size_mb:64,roundup_power2_divisions:4".
std::string conf_text(const core::PytorchSettings& s);

}  // namespace gpumem
