// user_frames.h — the user-frame rule, Note [User frames] (native/format/README.md), said once for native code: the
// reader marks each stack's innermost user frame with it (native/addon: Model::intern_stack), and the writer's index
// ranks the lines at the peak with it (capture_index.h, Note [Index sections]), so both name the same line. Its table
// of cases is user_frames_cases.json beside this file.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "json.h"

namespace gpumem::fmt {

namespace user_frames_detail {
inline bool is_digit(char c) { return c >= '0' && c <= '9'; }
// "python3", "python3.12", "python3.13t": a standard-library directory name.
inline bool is_python_version_dir(std::string_view d) {
  if (d.substr(0, 6) != "python") return false;
  size_t k = 6, n = d.size();
  if (n > k && d[n - 1] == 't') n--;  // free-threaded build
  size_t major = k;
  while (k < n && is_digit(d[k])) k++;
  if (k == major) return false;
  if (k < n && d[k] == '.') {
    size_t minor = ++k;
    while (k < n && is_digit(d[k])) k++;
    if (k == minor) return false;
  }
  return k == n;
}
}  // namespace user_frames_detail

// User code unless the file name is empty or a pseudo-file ('<string>', '<frozen runpy>'), or the path has a
// site-packages or dist-packages directory, or a lib/pythonX[.Y][t] (or lib64/…) directory (the standard library), or a
// torchinductor_* directory (torch.compile's generated code), or lies in one of internal_dirs (the tool's own: a
// capture header's bootstrap_dir and generated_code_dirs). '\\' counts as '/'.
inline bool is_user_path(std::string_view path, const std::vector<std::string>& internal_dirs = {}) {
  // Note [User frames]: a pseudo-file or an empty name cannot be opened or annotated: not the user's line.
  if (path.empty() || path[0] == '<') return false;
  std::string p(path);
  for (char& c : p)
    if (c == '\\') c = '/';
  for (std::string dir : internal_dirs) {
    for (char& c : dir)
      if (c == '\\') c = '/';
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    if (!dir.empty() && p.size() > dir.size() && p.compare(0, dir.size(), dir) == 0 && p[dir.size()] == '/')
      return false;
  }
  // Directory names only (the last component is the file itself).
  std::string_view prev;
  size_t start = 0;
  for (size_t slash = p.find('/'); slash != std::string::npos; start = slash + 1, slash = p.find('/', start)) {
    std::string_view dir(p.data() + start, slash - start);
    if (dir == "site-packages" || dir == "dist-packages") return false;
    if ((prev == "lib" || prev == "lib64") && user_frames_detail::is_python_version_dir(dir)) return false;
    if (dir.substr(0, 14) == "torchinductor_") return false;  // torch.compile's generated code
    prev = dir;
  }
  return true;
}

// The tool's own directories a capture header names (FORMAT.md "Header JSON"): its bootstrap_dir (the lens bootstrap
// that wraps backward(), so attribution lands on the user's own line) and generated_code_dirs (where torch.compile
// wrote its generated code when the run moved inductor's cache).
inline std::vector<std::string> internal_dirs_of_header(const json::Value& h) {
  std::vector<std::string> out;
  if (!h.is_object()) return out;
  const json::Value* boot = h.find("bootstrap_dir");
  if (boot && boot->is_string() && boot->as_string().size() > 1) {
    std::string bootstrap = boot->as_string();
    while (bootstrap.size() > 1 && bootstrap.back() == '/') bootstrap.pop_back();
    out.push_back(bootstrap);
  }
  const json::Value* generated = h.find("generated_code_dirs");
  if (generated && generated->is_array())
    for (const json::Value& d : generated->items())
      if (d.is_string() && d.as_string().size() > 1) out.push_back(d.as_string());
  return out;
}

}  // namespace gpumem::fmt
