// libFuzzer target: the one JSON codec (native/format/json.h) on untrusted text — the capture header and
// the control socket's requests. Properties: no crash; a parse error names its byte offset; whatever
// parses writes back to text that parses again, and from the second round on dump is a fixed point (the
// first round may normalise: -0 → 0, 1e400 → null).
// The same bytes go through the user-frame rule (Note [User frames]) as a path.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "json.h"
#include "model.h"

using namespace gpumem;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  json::Value v;
  std::string err;
  if (!json::parse(text, &v, &err)) {
    if (err.find(" at byte ") == std::string::npos) std::abort();  // every error says where
  } else {
    json::Value again, third;
    if (!json::parse(v.dump(), &again, &err)) std::abort();  // the writer wrote what the parser refuses
    std::string twice = again.dump();
    if (!json::parse(twice, &third, &err) || third.dump() != twice) std::abort();  // not a fixed point
  }
  (void)is_user_path(text, {"/opt/gpumem"});
  return 0;
}
