// libFuzzer target: the capture decoder, fed in two pieces (the split point comes from the input) so the
// live-tail path — a record cut at a poll boundary — is fuzzed too, then every query on the model.
#include <cstdint>
#include <exception>
#include <vector>

#include "aggregate.h"
#include "capture_decoder.h"
#include "capture_index.h"
#include "capture_overview.h"
#include "exercise.h"

using namespace gpumem;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Model m;
  CaptureDecoder dec;
  size_t split = size ? data[size - 1] * size / 256 : 0;
  try {
    std::vector<uint8_t> buf(data, data + split);
    size_t used = dec.feed(m, buf.data(), buf.size());
    m.derive();
    buf.erase(buf.begin(), buf.begin() + used);
    buf.insert(buf.end(), data + split, data + size);
    dec.feed(m, buf.data(), buf.size());
    m.derive();
  } catch (const std::exception&) {
    return 0;
  }
  exercise_model(m);
  // The first view and the rank row read a capture's index from its end (Note [Capture first view], Note [Index
  // sections]); the writer's index builder, lines at the peak included, over the same bytes as records.
  try {
    (void)capture_overview_json(data, size, 16);
    (void)capture_overview_json(data, size, 0, true);
  } catch (const std::exception&) {}
  if (size > 16) {
    fmt::IndexBuilder b;
    b.observe_all(data + 16, size - 16);
    (void)b.payload(0, 4096);
  }
  return 0;
}
