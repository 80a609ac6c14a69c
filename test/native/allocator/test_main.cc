// test_main.cc — runs every registered case (or those whose name contains argv[1]); the last line is
// "N passed, N failed" and the exit status is non-zero on any failure.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>

#include "check.h"

int main(int argc, char** argv) {
  int passed = 0, failed = 0;
  for (const t::Case& c : t::cases()) {
    if (argc > 1 && !std::strstr(c.name, argv[1])) continue;
    auto t0 = std::chrono::steady_clock::now();
    try {
      c.fn();
      passed++;
      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      std::printf("ok   %s (%.0f ms)\n", c.name, ms);
    } catch (const std::exception& e) {
      failed++;
      std::printf("FAIL %s\n    %s\n", c.name, e.what());
    }
    std::fflush(stdout);
  }
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
