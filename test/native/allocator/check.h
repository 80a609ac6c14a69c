// check.h — a minimal test harness: TEST registers a case, CHECK/CHECK_EQ fail it with the values.
#pragma once
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

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

}  // namespace t

#define TEST(name)                                   \
  static void name();                                \
  static t::Register register_##name(#name, name); \
  static void name()
#define CHECK(cond)                                                                                  \
  do {                                                                                               \
    if (!(cond)) throw t::Failure(std::string(__FILE__) + ":" + std::to_string(__LINE__) + ": " #cond); \
  } while (0)
#define CHECK_EQ(a, b) t::check_eq((a), (b), #a, #b, __FILE__, __LINE__)
