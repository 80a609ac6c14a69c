// A minimal JSON writer: results cross to JS as one string per query and one JSON.parse (V8's parser is
// faster than building objects through N-API one property at a time).
// Note [JSON numbers]: byte counts above 2^53 lose precision in JS anyway (types.ts says so); Infinity
// and NaN have no JSON form, so callers write null and the TypeScript side restores them.
#pragma once
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <string>
#include <string_view>

namespace gpumem {

class Json {
 public:
  std::string s;

  Json& raw(std::string_view v) {
    s.append(v);
    return *this;
  }
  Json& str(std::string_view v) {
    s.push_back('"');
    for (unsigned char c : v) {
      switch (c) {
        case '"': s += "\\\""; break;
        case '\\': s += "\\\\"; break;
        case '\n': s += "\\n"; break;
        case '\r': s += "\\r"; break;
        case '\t': s += "\\t"; break;
        default:
          if (c < 0x20) {
            char buf[8];
            snprintf(buf, sizeof buf, "\\u%04x", c);
            s += buf;
          } else {
            s.push_back((char)c);
          }
      }
    }
    s.push_back('"');
    return *this;
  }
  Json& num(int64_t v) {
    char buf[24];
    snprintf(buf, sizeof buf, "%" PRId64, v);
    s += buf;
    return *this;
  }
  Json& unum(uint64_t v) {
    char buf[24];
    snprintf(buf, sizeof buf, "%" PRIu64, v);
    s += buf;
    return *this;
  }
  Json& dbl(double v) {
    if (!std::isfinite(v)) return raw("null");
    char buf[32];
    snprintf(buf, sizeof buf, "%.17g", v);
    s += buf;
    return *this;
  }
  Json& boolean(bool b) { return raw(b ? "true" : "false"); }
  Json& key(std::string_view k) {
    comma();
    str(k);
    s.push_back(':');
    return *this;
  }
  Json& open(char c) {
    comma();
    s.push_back(c);
    return *this;
  }
  Json& close(char c) {
    s.push_back(c);
    return *this;
  }
  // Inserts a separating comma unless the previous character opened a container or ended a key.
  void comma() {
    if (!s.empty()) {
      char last = s.back();
      if (last != '{' && last != '[' && last != ':' && last != ',') s.push_back(',');
    }
  }
  // Helpers for object members.
  Json& kv(std::string_view k, int64_t v) { return key(k).num(v); }
  Json& kvu(std::string_view k, uint64_t v) { return key(k).unum(v); }
  Json& kvs(std::string_view k, std::string_view v) { return key(k).str(v); }
  Json& kvb(std::string_view k, bool v) { return key(k).boolean(v); }
  Json& kvd(std::string_view k, double v) { return key(k).dbl(v); }
  Json& item() {
    comma();
    return *this;
  }
};

}  // namespace gpumem
