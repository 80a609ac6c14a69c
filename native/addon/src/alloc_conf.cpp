#include "alloc_conf.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

namespace gpumem {

namespace {

constexpr uint64_t kMiB = 1ull << 20;

// PyTorch's ConfigTokenizer: ',' ':' '[' ']' are tokens of their own; whitespace is dropped.
std::vector<std::string> tokens(const std::string& text) {
  std::vector<std::string> out;
  std::string word;
  for (char c : text) {
    if (c == ',' || c == ':' || c == '[' || c == ']') {
      if (!word.empty()) out.push_back(word), word.clear();
      out.emplace_back(1, c);
    } else if (!std::isspace(static_cast<unsigned char>(c))) {
      word += c;
    }
  }
  if (!word.empty()) out.push_back(word);
  return out;
}

[[noreturn]] void bad(const std::string& what) { throw std::invalid_argument("PYTORCH_CUDA_ALLOC_CONF: " + what); }

bool power_of_two(uint64_t v) { return v && (v & (v - 1)) == 0; }
size_t log2_of(uint64_t v) { return size_t(63 - __builtin_clzll(v)); }

struct Cursor {
  const std::vector<std::string>& t;
  size_t i = 0;
  const std::string& at(size_t k) const {
    static const std::string end;
    return k < t.size() ? t[k] : end;
  }
  void expect(size_t k, const char* what) const {
    if (at(k) != what) bad(std::string("expected '") + what + "' after " + (k ? "'" + at(k - 1) + "'" : "the start"));
  }
  uint64_t size_at(size_t k, const std::string& key) const {
    const std::string& s = at(k);
    if (s.empty() || s.size() > 19 || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
      bad(key + " wants a whole number, not '" + s + "'");
    return std::strtoull(s.c_str(), nullptr, 10);
  }
  double double_at(size_t k, const std::string& key) const {
    const std::string& s = at(k);
    char* end = nullptr;
    const double v = s.empty() ? NAN : std::strtod(s.c_str(), &end);
    if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v)) bad(key + " wants a number, not '" + s + "'");
    return v;
  }
  bool bool_at(size_t k, const std::string& key) const {
    const std::string& s = at(k);
    if (s == "True" || s == "true") return true;
    if (s == "False" || s == "false") return false;
    bad(key + " wants True or False, not '" + s + "'");
  }
};

// roundup_power2_divisions' value at i (after ':'): one number for every interval, or [MiB:divisions,…,>:divisions]
// as AllocatorConfig::parseRoundUpPower2Divisions reads it. Returns the last token's index.
size_t parse_roundup(const Cursor& c, size_t i, std::array<uint32_t, core::kRoundupIntervals>& out) {
  const std::string key = "roundup_power2_divisions";
  out.fill(0);
  if (c.at(i) != "[") {
    const uint64_t v = c.size_at(i, key);
    if (!power_of_two(v)) bad(key + " must be a power of 2, not " + std::to_string(v));
    out.fill(uint32_t(v));
    return i;
  }
  bool first = true;
  size_t last = 0;
  while (++i < c.t.size() && c.at(i) != "]") {
    const size_t at = i;
    c.expect(++i, ":");
    const uint64_t v = c.size_at(++i, key);
    if (v != 0 && !power_of_two(v)) bad(key + " divisions must be a power of 2 or 0, not " + std::to_string(v));
    if (c.at(at) == ">") {
      std::fill(out.begin() + std::min(last + 1, out.size()), out.end(), uint32_t(v));
    } else {
      const uint64_t boundary = c.size_at(at, key + " interval");
      if (!power_of_two(boundary)) bad(key + " intervals must be powers of 2 (MiB), not " + std::to_string(boundary));
      const size_t index = std::min(log2_of(boundary), out.size() - 1);
      if (first) std::fill(out.begin(), out.begin() + index, uint32_t(v)), first = false;
      out[index] = uint32_t(v);
      last = index;
    }
    if (c.at(i + 1) != "]") c.expect(++i, ",");
  }
  if (i >= c.t.size()) bad(key + " is missing its closing ']'");
  return i;
}

// The index after a key's value that this reader does not parse (a bracketed list or one token).
size_t skip_value(const Cursor& c, size_t i) {
  if (c.at(i) != "[") return i;
  int depth = 0;
  for (; i < c.t.size(); i++) {
    if (c.at(i) == "[") depth++;
    if (c.at(i) == "]" && --depth == 0) return i;
  }
  bad("a '[' without its ']'");
}

void add_unique(std::vector<std::string>& v, const std::string& s) {
  if (std::find(v.begin(), v.end(), s) == v.end()) v.push_back(s);
}

std::string number_text(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
}

}  // namespace

AllocConf parse_alloc_conf(const std::string& text) {
  AllocConf conf;
  const std::vector<std::string> t = tokens(text);
  const Cursor c{t};
  for (size_t i = 0; i < t.size(); i++) {
    const std::string key = t[i];
    if (key == "," || key == ":" || key == "[" || key == "]") bad("expected a key, not '" + key + "'");
    c.expect(i + 1, ":");
    i += 2;
    if (key == "max_split_size_mb" || key == "max_non_split_rounding_mb") {
      uint64_t mb = c.size_at(i, key);
      if (mb < core::kLargeBuffer / kMiB) bad(key + " must be at least " + std::to_string(core::kLargeBuffer / kMiB));
      mb = std::min<uint64_t>(mb, UINT64_MAX / kMiB);
      (key == "max_split_size_mb" ? conf.pytorch.max_split_size : conf.pytorch.max_non_split_rounding) = mb * kMiB;
    } else if (key == "roundup_power2_divisions") {
      i = parse_roundup(c, i, conf.pytorch.roundup_power2_divisions);
    } else if (key == "expandable_segments") {
      conf.expandable = c.bool_at(i, key) ? 1 : 0;
    } else if (key == "garbage_collection_threshold") {
      const double v = c.double_at(i, key);
      if (!(v > 0 && v < 1)) bad(key + " must be between 0 and 1, not " + t[i]);
      add_unique(conf.not_modelled, key + ":" + t[i] + " (garbage collection of cached blocks)");
    } else if (key == "backend") {
      if (t[i] != "native" && t[i] != "cudaMallocAsync")
        bad("backend must be native or cudaMallocAsync, not '" + t[i] + "'");
      conf.backend = t[i];
      if (t[i] != "native")
        add_unique(conf.not_modelled, "backend:" + t[i] + " (CUDA's allocator, not PyTorch's caching allocator)");
    } else if (key == "per_process_memory_fraction") {
      const double v = c.double_at(i, key);
      if (v < 1) add_unique(conf.not_modelled, key + ":" + t[i] + " (a cap on reserved memory; --capacity sets one)");
    } else if (key == "graph_capture_record_stream_reuse") {
      if (c.bool_at(i, key)) add_unique(conf.not_modelled, key + ":True (block reuse during CUDA graph capture)");
    } else if (key == "release_lock_on_cudamalloc" || key == "pinned_use_cuda_host_register" ||
               key == "pinned_use_background_threads") {
      c.bool_at(i, key);  // locking and pinned host memory: device memory is laid out the same
    } else if (key == "pinned_num_register_threads" || key == "pinned_max_round_threshold_mb" ||
               key == "pinned_max_cached_size_mb" || key == "pinned_reserve_segment_size_mb") {
      c.size_at(i, key);
    } else {
      i = skip_value(c, i);
      add_unique(conf.not_modelled, key + " (a setting this replay does not know)");
    }
    if (i + 1 < t.size()) c.expect(++i, ",");
  }
  return conf;
}

AllocConf alloc_conf_from_settings(const json::Value& settings) {
  AllocConf conf;
  if (!settings.is_object()) return conf;
  if (const json::Value* text = settings.find("PYTORCH_CUDA_ALLOC_CONF"); text && text->is_string()) {
    try {
      conf = parse_alloc_conf(text->as_string());
    } catch (const std::invalid_argument&) {
      // PyTorch accepted it, so a later PyTorch's grammar: the typed fields below still say what they say.
      add_unique(conf.not_modelled, "PYTORCH_CUDA_ALLOC_CONF=" + text->as_string() + " (text this replay cannot read)");
    }
  }
  // the typed members, read as the observer reads them (pytorch_settings_from_json in the allocator core); a text
  // setting those do not carry stays as the text said
  {
    const core::PytorchSettings typed = core::pytorch_settings_from_json(settings);
    if (settings.find("max_split_size")) conf.pytorch.max_split_size = typed.max_split_size;
    if (settings.find("max_non_split_rounding")) conf.pytorch.max_non_split_rounding = typed.max_non_split_rounding;
    if (settings.find("roundup_power2_divisions"))
      conf.pytorch.roundup_power2_divisions = typed.roundup_power2_divisions;
  }
  if (const json::Value* v = settings.find("garbage_collection_threshold"); v && v->is_number()) {
    conf.not_modelled.erase(
        std::remove_if(conf.not_modelled.begin(), conf.not_modelled.end(),
                       [](const std::string& s) { return s.rfind("garbage_collection_threshold", 0) == 0; }),
        conf.not_modelled.end());
    if (v->as_double() > 0)
      conf.not_modelled.insert(
          conf.not_modelled.begin(),
          "garbage_collection_threshold:" + number_text(v->as_double()) + " (garbage collection of cached blocks)");
  }
  if (const json::Value* v = settings.find("expandable_segments"); v && v->is_bool()) conf.expandable = v->as_bool();
  if (const json::Value* v = settings.find("graph_capture_record_stream_reuse"); v && v->is_bool() && v->as_bool())
    add_unique(conf.not_modelled, "graph_capture_record_stream_reuse:True (block reuse during CUDA graph capture)");
  return conf;
}

std::string conf_text(const core::PytorchSettings& s) {
  std::vector<std::string> parts;
  if (s.max_split_size != core::kNoMaxSplit)
    parts.push_back("max_split_size_mb:" + std::to_string(s.max_split_size / kMiB));
  if (s.max_non_split_rounding != core::kLargeBuffer)
    parts.push_back("max_non_split_rounding_mb:" + std::to_string(s.max_non_split_rounding / kMiB));
  const auto& d = s.roundup_power2_divisions;
  if (std::any_of(d.begin(), d.end(), [](uint32_t v) { return v != 0; })) {
    if (std::all_of(d.begin(), d.end(), [&](uint32_t v) { return v == d[0]; })) {
      parts.push_back("roundup_power2_divisions:" + std::to_string(d[0]));
    } else {
      std::string list;
      for (size_t k = 0; k < d.size(); k++)
        list += (k ? "," : "") + std::to_string(1ull << k) + ":" + std::to_string(d[k]);
      parts.push_back("roundup_power2_divisions:[" + list + "]");
    }
  }
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : ",") + p;
  return out;
}

}  // namespace gpumem
