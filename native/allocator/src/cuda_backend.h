// cuda_backend.h — device memory from the real driver (libcuda.so.1, opened at run time).
#pragma once
#include <memory>

#include "backend.h"

namespace gpumem::core {

// Loads libcuda.so.1 and resolves every symbol up front; throws BackendError with an actionable
// message when the driver or a symbol is missing.
std::unique_ptr<Backend> make_cuda_backend();

}  // namespace gpumem::core
