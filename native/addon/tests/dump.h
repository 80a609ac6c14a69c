// dump.h — `reader_tests --dump FILE...`: what the reader answers about each file, as text, the same bytes on every
// machine. Each query a view makes of a pickle or a capture (the answers are the JSON the extension parses), and
// the PyTorch pickle the model exports (its length and FNV-1a hash). An x64 and an ARM64 build print the same dump
// of the same fixtures (native/addon/Makefile, test-arm64; Note [ARM64] in native/floor/README.md).
#pragma once
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "aggregate.h"
#include "capture_decoder.h"
#include "export_pickle.h"
#include "policy_replay.h"
#include "snapshot_import.h"

namespace gpumem {

inline std::string fnv1a64(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(h));
  return b;
}

inline void dump_line(const char* what, const std::string& answer) { std::printf("%s %s\n", what, answer.c_str()); }

// Returns 0, or 1 when a file cannot be read.
inline int dump_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "dump: cannot open %s\n", path.c_str());
    return 1;
  }
  std::vector<uint8_t> b((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Model m;
  if (CaptureDecoder::looks_like_capture(b.data(), b.size())) {
    CaptureDecoder d;
    d.feed(m, b.data(), b.size());
  } else {
    import_snapshot(m, b.data(), b.size());
  }
  m.derive();
  std::printf("== %s (%zu bytes)\n", path.substr(path.find_last_of('/') + 1).c_str(), b.size());
  dump_line("summary", summary_json(m));
  dump_line("devices", devices_json(m));
  dump_line("fileInfo", file_info_json(m));
  dump_line("problems", problems_json(m));
  dump_line("ooms", ooms_json(m));
  dump_line("userMetadata", user_metadata_json(m));
  dump_line("extras", extras_json(m));
  for (auto& [idx, d] : m.devices) {
    std::printf("-- device %d\n", idx);
    const double t0 = d.count() ? double(d.t.front()) : 0, t1 = d.count() ? double(d.t.back()) : 1;
    dump_line("timeRange", time_range_json(m, idx));
    dump_line("current", current_json(m, idx));
    dump_line("timeline", timeline_json(m, idx, t0, t1, 64));
    dump_line("timelineOwners", timeline_json(m, idx, t0, t1, 64, true));
    dump_line("stateMid", state_json(m, idx, (t0 + t1) / 2));
    dump_line("stateEnd", state_json(m, idx, INFINITY));
    dump_line("lineStats", line_stats_json(m, idx));
    dump_line("markers", markers_json(m, idx));
    dump_line("spans", spans_json(m, idx, t0, t1, 50));
    dump_line("diff", diff_json(m, idx, t0, m, t1));
    for (core::Policy p : {core::Policy::kPytorch, core::Policy::kLens}) {
      std::string name = std::string("replay ") + core::policy_name(p);
      try {
        dump_line(name.c_str(), replay_json(replay_policy(m, idx, p, 0)));
      } catch (const std::runtime_error& e) {
        dump_line(name.c_str(), std::string("error: ") + e.what());
      }
    }
  }
  const std::string pickle = export_pickle(m, INFINITY);
  std::printf("exportPickle %zu bytes fnv1a64 %s\n", pickle.size(), fnv1a64(pickle).c_str());
  return 0;
}

inline int dump_files(int n, char** paths) {
  int bad = 0;
  for (int i = 0; i < n; i++) bad |= dump_file(paths[i]);
  std::fflush(stdout);
  return bad;
}

}  // namespace gpumem
