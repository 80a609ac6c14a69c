// check.h — the one C++ test harness: the allocator's, the recorder's and the reader's tests
// (test/native/allocator, test/native/recorder, native/addon/tests) all use it. Header-only.
//
//   TEST(name) { CHECK(x); CHECK_EQ(a, b); }      registers a case; t::main("suite", argc, argv) runs them
//   t::run("a case", [&] { ... });                   runs one case now (tests that share state in order)
//   return t::finish();                              prints the closing line, returns the exit status
//
// Output, for people: "ok   NAME (N ms)" or "FAIL NAME" and the failure's message indented, then the
// closing line "N passed, N failed" that run_tests.sh and run-tests.mjs read (Note [Counting]).
// For machines: Note [Results format] (test/README.md) — when GPUMEM_RESULTS names a file, each case
// appends one JSON line {"layer","name","status","ms","message"} to it with a single O_APPEND write, so
// several test binaries of one layer can share the file. The layer is GPUMEM_RESULTS_LAYER (else
// "native"); the name is "<suite>/<case>".
#pragma once
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "../../native/format/json.h"

namespace t {

struct Case {
  const char* name;
  void (*fn)();
};
inline std::vector<Case>& cases() {
  static std::vector<Case> v;
  return v;
}
struct Register {
  Register(const char* n, void (*f)()) { cases().push_back({n, f}); }
};
struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};
template <typename A, typename B>
void check_eq(const A& a, const B& b, const char* ea, const char* eb, const char* file, int line) {
  if (a == b) return;
  std::ostringstream os;
  os << file << ":" << line << ": " << ea << " == " << eb << "\n    left:  " << a << "\n    right: " << b;
  throw Failure(os.str());
}

struct Tally {
  int passed = 0, failed = 0, skipped = 0;
  std::string suite = "native";
};
inline Tally& tally() {
  static Tally t;
  return t;
}
inline void set_suite(const std::string& suite) { tally().suite = suite; }

// Appends one results line (Note [Results format]); does nothing when GPUMEM_RESULTS is unset or empty.
inline void report(const std::string& name, const char* status, double ms, const std::string& message) {
  const char* path = std::getenv("GPUMEM_RESULTS");
  if (!path || !*path) return;
  const char* layer = std::getenv("GPUMEM_RESULTS_LAYER");
  const char* prefix = std::getenv("GPUMEM_RESULTS_PREFIX");  // "arm64/" under qemu (test/native/qemu_tests.sh)
  gpumem::json::Writer j;
  j.open('{').kvs("layer", layer && *layer ? layer : "native");
  j.kvs("name", std::string(prefix ? prefix : "") + tally().suite + "/" + name);
  j.kvs("status", status).kvd("ms", ms);
  if (!message.empty()) j.kvs("message", message);
  j.close('}').raw("\n");
  int fd = ::open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    std::fprintf(stderr, "check.h: cannot append to GPUMEM_RESULTS=%s: %s\n", path, std::strerror(errno));
    return;
  }
  ssize_t n = ::write(fd, j.s.data(), j.s.size());
  if (n != ssize_t(j.s.size())) std::fprintf(stderr, "check.h: short write to %s\n", path);
  ::close(fd);
}

// Runs one case now; a thrown exception (a failed CHECK or anything else) fails it with its message.
inline bool run(const std::string& name, const std::function<void()>& fn) {
  auto t0 = std::chrono::steady_clock::now();
  std::string message;
  bool ok = true;
  try {
    fn();
  } catch (const std::exception& e) {
    ok = false, message = e.what();
  } catch (...) {
    ok = false, message = "a non-standard exception";
  }
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (ok) {
    tally().passed++;
    std::printf("ok   %s (%.0f ms)\n", name.c_str(), ms);
  } else {
    tally().failed++;
    std::printf("FAIL %s\n    %s\n", name.c_str(), message.c_str());
  }
  std::fflush(stdout);
  report(name, ok ? "pass" : "fail", ms, message);
  return ok;
}

// A case that cannot run here, with the reason (counted as neither passed nor failed).
inline void skip(const std::string& name, const std::string& why) {
  tally().skipped++;
  std::printf("skip %s: %s\n", name.c_str(), why.c_str());
  std::fflush(stdout);
  report(name, "skip", 0, why);
}

// The closing line and the exit status.
inline int finish() {
  std::printf("%d passed, %d failed\n", tally().passed, tally().failed);
  std::fflush(stdout);
  return tally().failed ? 1 : 0;
}

// Runs every TEST case (or those whose name contains argv[1]; with argv[1] "-WORD", all but those whose name
// contains WORD, reported as skipped) under `suite`, then finish().
inline int main(const char* suite, int argc, char** argv) {
  set_suite(suite);
  const char* only = argc > 1 && argv[1][0] != '-' ? argv[1] : nullptr;
  const char* but = argc > 1 && argv[1][0] == '-' ? argv[1] + 1 : nullptr;
  for (const Case& c : cases()) {
    if (only && !std::strstr(c.name, only)) continue;
    if (but && std::strstr(c.name, but)) {
      skip(c.name, std::string("left out by the command line (-") + but + ")");
      continue;
    }
    run(c.name, c.fn);
  }
  return finish();
}

}  // namespace t

#define TEST(name)                                 \
  static void name();                              \
  static t::Register register_##name(#name, name); \
  static void name()
#define CHECK(cond)                                                                                     \
  do {                                                                                                  \
    if (!(cond)) throw t::Failure(std::string(__FILE__) + ":" + std::to_string(__LINE__) + ": " #cond); \
  } while (0)
#define CHECK_EQ(a, b) t::check_eq((a), (b), #a, #b, __FILE__, __LINE__)
