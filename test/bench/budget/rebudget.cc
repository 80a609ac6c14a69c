// rebudget — writes a capture again through the lens writer with a budget, so a budgeted capture and an unbudgeted
// one hold the same stream (same times, same ids) and their summaries can be compared figure by figure:
//
//     rebudget IN.gpumem OUT.gpumem BUDGET_BYTES
//
// Built by test/bench/budget/run.mjs and the budget test from native/allocator/src/{writer,compactor}.cc. The
// records go through writer::append exactly as the recorder's do (pinned, so none is dropped; the tool waits for the
// writer every 16 MiB, as a workload's pace would), and REC_END keeps the original's time and exit code.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../../../native/allocator/src/writer.h"
#include "../../../native/format/gpumem_format.h"

namespace f = gpumem::fmt;
namespace w = gpumem::rec::writer;

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: rebudget IN.gpumem OUT.gpumem BUDGET_BYTES\n");
    return 2;
  }
  FILE* in = std::fopen(argv[1], "rb");
  if (!in) {
    std::perror(argv[1]);
    return 1;
  }
  f::FileHeader fh;
  if (std::fread(&fh, sizeof fh, 1, in) != 1 || std::memcmp(fh.magic, f::kMagic, 8) != 0) {
    std::fprintf(stderr, "%s: not a capture\n", argv[1]);
    return 1;
  }
  std::string json(fh.json_bytes, '\0');
  if (std::fread(&json[0], 1, json.size(), in) != json.size()) return 1;
  const unsigned long long budget = std::strtoull(argv[3], nullptr, 10);
  size_t brace = json.find('{');
  json.insert(brace + 1, "\"budget_bytes\":" + std::to_string(budget) + (json.size() > brace + 2 ? "," : ""));
  w::Options opt;
  opt.budget_bytes = budget;
  opt.buffer_limit_bytes = 1ull << 30;
  std::string err;
  if (!w::open(argv[2], json, opt, &err)) {
    std::fprintf(stderr, "%s\n", err.c_str());
    return 1;
  }
  std::vector<uint8_t> payload;
  uint64_t since_flush = 0;
  f::RecordHeader h;
  while (std::fread(&h, sizeof h, 1, in) == 1) {
    payload.resize(h.payload_bytes);
    if (h.payload_bytes && std::fread(payload.data(), 1, h.payload_bytes, in) != h.payload_bytes) break;
    if (h.type == f::REC_END) {
      f::EndRec e{};
      std::memcpy(&e, payload.data(), std::min<size_t>(payload.size(), sizeof e));
      w::close(e.exit_code, e.t_ns);
      std::fclose(in);
      std::printf("{\"compactions\":%llu,\"merges\":%llu}\n", (unsigned long long)w::compactions(),
                  (unsigned long long)w::merges());
      return 0;
    }
    if (h.type == f::REC_INDEX) continue;  // the source's index: the writer writes its own at close (Note [Capture index])
    w::append(h.type, h.device, h.flags, payload.data(), h.payload_bytes, nullptr, 0, true);
    if ((since_flush += sizeof h + h.payload_bytes) > (16u << 20)) w::flush(), since_flush = 0;
  }
  w::close(-1);
  std::fclose(in);
  return 0;
}
