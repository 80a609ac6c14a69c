// What every allocated byte is (Note [Categories] in categories.cpp). JSON shape: CategoryReport in
// src/core/base/model/types.ts.
#pragma once
#include <string>
#include <vector>

#include "model.h"

namespace gpumem {

// Bytes per category at the device's peak (exactly after the event that reached it) and at each of `times_us`
// (events with t ≤ time), activations by module at each, and, when `with_lines`, bytes per line (innermost user
// frame) and category at the peak and at the last time.
std::string categories_json(const Model& m, int dev, const std::vector<double>& times_us, bool with_lines);

}  // namespace gpumem
