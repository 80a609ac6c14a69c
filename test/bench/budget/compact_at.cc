// compact_at — compacts a capture at record boundaries the caller picks, so a test can put a range's end exactly
// where it matters (between a block's free_requested and its free_completed, say) instead of where the writer's
// timing puts it (Note [Pending frees across a cut], native/allocator/src/compactor.cc):
//
//     compact_at IN.gpumem OUT.gpumem BUDGET_BYTES CUT [CUT ...]
//
// CUTs are increasing record indices (0 = the first record after the header JSON): records [0, CUT1) become the
// first compacted range, [CUT1, CUT2) the second, …; the records from the last CUT on are copied verbatim. The
// compactor is the writer's (native/allocator/src/compactor.cc); BUDGET_BYTES goes into the header JSON and the
// ranges' REC_AGGREGATED, as a budgeted recording writes them.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../../../native/allocator/src/compactor.h"
#include "../../../native/format/gpumem_format.h"

namespace f = gpumem::fmt;
namespace c = gpumem::rec::compactor;

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: compact_at IN.gpumem OUT.gpumem BUDGET_BYTES CUT [CUT ...]\n");
    return 2;
  }
  FILE* in = std::fopen(argv[1], "rb");
  if (!in) return std::perror(argv[1]), 1;
  f::FileHeader fh;
  if (std::fread(&fh, sizeof fh, 1, in) != 1 || std::memcmp(fh.magic, f::kMagic, 8) != 0) {
    std::fprintf(stderr, "%s: not a capture\n", argv[1]);
    return 1;
  }
  std::string json(fh.json_bytes, '\0');
  if (std::fread(&json[0], 1, json.size(), in) != json.size()) return 1;
  struct Rec {
    f::RecordHeader h;
    std::vector<uint8_t> p;
  };
  std::vector<Rec> recs;
  f::RecordHeader h;
  while (std::fread(&h, sizeof h, 1, in) == 1) {
    Rec r{h, std::vector<uint8_t>(h.payload_bytes)};
    if (h.payload_bytes && std::fread(r.p.data(), 1, h.payload_bytes, in) != h.payload_bytes) break;
    recs.push_back(std::move(r));
  }
  std::fclose(in);
  const unsigned long long budget = std::strtoull(argv[3], nullptr, 10);
  size_t brace = json.find('{');
  json.insert(brace + 1, "\"budget_bytes\":" + std::to_string(budget) + (json.size() > brace + 2 ? "," : ""));
  fh.json_bytes = uint32_t(json.size());
  std::string out(reinterpret_cast<const char*>(&fh), sizeof fh);
  out += json;
  c::Compactor compactor(budget);
  size_t from = 0;
  for (int a = 4; a < argc; a++) {
    size_t to = std::min<size_t>(std::strtoull(argv[a], nullptr, 10), recs.size());
    if (to < from) return std::fprintf(stderr, "cuts must increase\n"), 2;
    compactor.compact(
        [&](const std::function<void(const c::RecordView&)>& fn) {
          for (size_t i = from; i < to; i++)
            fn(c::RecordView{recs[i].h.type, recs[i].h.device, recs[i].h.flags, recs[i].p.data(),
                             recs[i].h.payload_bytes});
        },
        &out);
    from = to;
  }
  for (size_t i = from; i < recs.size(); i++) {
    out.append(reinterpret_cast<const char*>(&recs[i].h), sizeof recs[i].h);
    out.append(reinterpret_cast<const char*>(recs[i].p.data()), recs[i].p.size());
  }
  FILE* o = std::fopen(argv[2], "wb");
  if (!o || std::fwrite(out.data(), 1, out.size(), o) != out.size() || std::fclose(o) != 0)
    return std::perror(argv[2]), 1;
  return 0;
}
