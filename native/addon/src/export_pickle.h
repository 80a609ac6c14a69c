// Exports a Model as a PyTorch 2.11 snapshot pickle (see export_pickle.cpp).
#pragma once
#include <string>

#include "model.h"

namespace gpumem {

// The pickle bytes of the state after every event with time ≤ at_us (Infinity: the end) and the trace up
// to that moment.
std::string export_pickle(const Model& m, double at_us);

}  // namespace gpumem
