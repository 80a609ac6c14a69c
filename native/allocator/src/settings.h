// settings.h — reads the recording settings of gpumem_configure's JSON by the one settings table
// (settings_table.h, generated from src/core/base/settings/table.ts: Note [Settings table] there). A wrong value
// is refused with "\"<key>\" <rule>, got <value>", the sentence the launchers and the bootstrap give for it
// (test/unit/settings.test.mjs sends the same wrong values through all three).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "../../format/json.h"
#include "settings_table.h"

namespace gpumem::settings {

// The value as the message shows it: text in single quotes, anything else as JSON.
inline std::string shown(const json::Value& v) { return v.is_string() ? "'" + v.as_string() + "'" : v.dump(); }

inline bool refuse(const Setting& s, const json::Value& v, std::string* err) {
  *err = std::string("\"") + s.json + "\" " + s.rule + ", got " + shown(v);
  return false;
}

// Choice: `*out` is one of the setting's values; absent: untouched.
inline bool read(const json::Value& cfg, const Setting& s, std::string* out, std::string* err) {
  const json::Value* v = cfg.find(s.json);
  if (!v) return true;
  if (v->is_string())
    for (const char* c = s.choices; c && *c; c += std::strlen(c) + 1)
      if (v->as_string() == c) {
        *out = c;
        return true;
      }
  return refuse(s, *v, err);
}

// Flag: true or false; absent: untouched.
inline bool read(const json::Value& cfg, const Setting& s, bool* out, std::string* err) {
  const json::Value* v = cfg.find(s.json);
  if (!v) return true;
  if (!v->is_bool()) return refuse(s, *v, err);
  *out = v->as_bool();
  return true;
}

// Count and size: a whole number, 0 where the table allows it (it means what the rule says), else at least min.
inline bool read(const json::Value& cfg, const Setting& s, uint64_t* out, std::string* err) {
  const json::Value* v = cfg.find(s.json);
  if (!v) return true;
  if (!v->is_int() || v->as_int() < 0) return refuse(s, *v, err);
  const uint64_t n = uint64_t(v->as_int());
  if (n == 0 ? !s.zero : n < s.min) return refuse(s, *v, err);
  *out = n;
  return true;
}

}  // namespace gpumem::settings
