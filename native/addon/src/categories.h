// What every allocated byte is (Note [Categories] in categories.cpp). JSON shape: CategoryReport in
// src/core/model/types.ts.
#pragma once
#include <string>
#include <vector>

#include "model.h"

namespace gpumem {

// Bytes per category at the device's peak (exactly after the event that reached it) and at each of `timesUs`
// (events with t ≤ time), activations by module at each, and, when `withLines`, bytes per line (innermost user
// frame) and category at the peak and at the last time.
std::string categoriesJson(const Model& m, int dev, const std::vector<double>& timesUs, bool withLines);

}  // namespace gpumem
