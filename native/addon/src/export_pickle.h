// Exports a Model as a PyTorch 2.11 snapshot pickle (see export_pickle.cpp).
#pragma once
#include <string>

#include "model.h"

namespace gpumem {

// The pickle bytes of the state after every event with time ≤ atUs (Infinity: the end) and the trace up
// to that moment.
std::string exportPickle(const Model& m, double atUs);

}  // namespace gpumem
