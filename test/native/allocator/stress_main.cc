// stress_main.cc — the threaded stress alone, for the ThreadSanitizer build.
#include "../check.h"
#include "stress.h"

int main() {
  t::set_suite("allocator-tsan");
  for (bool expandable : {false, true}) {
    // 1 M operations in all: 600 k on fixed segments, 400 k on expandable ones.
    const char* name = expandable ? "tsan_threaded_stress_expandable_400k_ops" : "tsan_threaded_stress_fixed_600k_ops";
    t::run(name, [&] { t::run_threads(expandable, 4, expandable ? 100000 : 150000, /*trim_on_growth=*/expandable); });
  }
  return t::finish();
}
