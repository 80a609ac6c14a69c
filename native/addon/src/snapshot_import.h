// Reads a PyTorch memory snapshot pickle into a Model (see snapshot_import.cpp).
#pragma once
#include <cstddef>
#include <cstdint>

#include "model.h"
#include "range_open.h"

namespace gpumem {

// Throws PickleError (with a byte offset) for bad pickles and std::runtime_error for pickles that are
// plain data but not a snapshot. `data` may be released after the call. file_mapped: `data` is a read-only
// private mapping of a file, whose pages the reader may drop once parsed (Note [Input window]).
// window: only the trace entries in that time window become rows, the model starting from the allocator state at
// its start (Note [Range-first open] in range_open.cpp); the whole trace by default.
void import_snapshot(Model& m, const uint8_t* data, size_t size, bool file_mapped = false, TimeWindow window = {});

}  // namespace gpumem
