// stress_main.cc — the threaded stress alone, for the ThreadSanitizer build.
#include <cstdio>

#include "stress.h"

int main() {
  int passed = 0, failed = 0;
  for (bool expandable : {false, true}) {
    // 1 M operations in all: 600 k on fixed segments, 400 k on expandable ones.
    const char* name = expandable ? "tsan_threaded_stress_expandable_400k_ops" : "tsan_threaded_stress_fixed_600k_ops";
    try {
      t::run_threads(expandable, 4, expandable ? 100000 : 150000, /*trim_on_growth=*/expandable);
      passed++;
      std::printf("ok   %s\n", name);
    } catch (const std::exception& e) {
      failed++;
      std::printf("FAIL %s\n    %s\n", name, e.what());
    }
  }
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
