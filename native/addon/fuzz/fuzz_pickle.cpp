// libFuzzer target: the pickle reader and everything computed from the model it builds (summary, state
// replay at several moments, timeline, lines, spans, export). Any input must end in a model or a clean
// exception: no crash, no sanitizer report, no unbounded work.
#include <cmath>
#include <cstdint>
#include <exception>

#include "aggregate.h"
#include "exercise.h"
#include "export_pickle.h"
#include "snapshot_import.h"

using namespace gpumem;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Model m;
  try {
    import_snapshot(m, data, size);
  } catch (const std::exception&) {
    return 0;
  }
  exercise_model(m);
  return 0;
}
