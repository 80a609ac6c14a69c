// json.h — the one JSON codec of native code (Note [One JSON codec]): a value type with a strict
// parser (gpumem_configure's argument, the control protocol, the capture header) and two writers that
// share one escaper and one number format: Value::dump() for small trees, and the streaming Writer for
// large results (the reader's query answers cross to JS as one string and one JSON.parse). Header-only,
// no dependencies, not on any hot path of the allocator.
//
// Note [One JSON codec]: native code once had five JSON writers/parsers (this file's parent
// in native/allocator, the addon's json_out.h, and strings built by hand in the capture decoder, the
// stack-walk statistics and the stats dump). Everything now goes through here; a hand-built JSON string
// in native code is a review comment.
//
// Note [JSON numbers]: integers that fit int64 stay exact (byte counts, pids); anything with a fraction
// or exponent, or too large, becomes a double. The writers print integers exactly. Infinity and NaN have
// no JSON form: both writers write null (the TypeScript side restores them where it means something).
//
// Note [Parser errors]: the parser never throws and never reads past the text; an error names what was
// expected and the byte offset ("expected ',' or '}' at byte 17"), so a bad configure string or a
// damaged capture header can be found and fixed. Nesting is bounded (kMaxDepth) because control-socket
// input is untrusted. native/addon/fuzz/fuzz_json.cpp and the reader tests hammer it.
#pragma once
#include <cerrno>
#include <charconv>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpumem::json {

// The one escaper: quotes, backslash and control characters; UTF-8 passes through unchanged.
inline void write_string(std::string& out, std::string_view s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}
// Integers by std::to_chars: the same digits as printf's %lld, without its format parsing (a timeline answer or a
// ranks view writes thousands of them; snprintf was most of a 600-bucket series' cost).
inline void write_int(std::string& out, int64_t v) {
  char buf[24];
  out.append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}
inline void write_uint(std::string& out, uint64_t v) {
  char buf[24];
  out.append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}
// Shortest text that reads back to the same double (%.17g); null for Infinity and NaN.
inline void write_double(std::string& out, double v) {
  if (!std::isfinite(v)) {
    out += "null";
    return;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  out += buf;
}

class Value {
 public:
  enum Kind { Null, Bool, Int, Double, String, Array, Object };

  Value() = default;
  Value(std::nullptr_t) {}
  Value(bool b) : kind_(Bool), b_(b) {}
  Value(int v) : kind_(Int), i_(v) {}
  Value(int64_t v) : kind_(Int), i_(v) {}
  Value(uint64_t v) : kind_(Int), i_(static_cast<int64_t>(v)) {}
  Value(uint32_t v) : kind_(Int), i_(v) {}
  Value(double v) : kind_(Double), d_(v) {}
  Value(const char* s) : kind_(String), s_(s) {}
  Value(std::string s) : kind_(String), s_(std::move(s)) {}

  static Value array() {
    Value v;
    v.kind_ = Array;
    return v;
  }
  static Value object() {
    Value v;
    v.kind_ = Object;
    return v;
  }

  Kind kind() const { return kind_; }
  bool is_null() const { return kind_ == Null; }
  bool is_bool() const { return kind_ == Bool; }
  bool is_number() const { return kind_ == Int || kind_ == Double; }
  bool is_int() const { return kind_ == Int; }
  bool is_string() const { return kind_ == String; }
  bool is_array() const { return kind_ == Array; }
  bool is_object() const { return kind_ == Object; }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return kind_ == Double ? static_cast<int64_t>(d_) : i_; }
  double as_double() const { return kind_ == Int ? static_cast<double>(i_) : d_; }
  const std::string& as_string() const { return s_; }
  const std::vector<Value>& items() const { return a_; }
  // Object members keep insertion order (a header JSON reads better in the order it was built).
  const std::vector<std::pair<std::string, Value>>& members() const { return o_; }

  // Object access: nullptr when absent or when this is not an object.
  const Value* find(const std::string& key) const {
    if (kind_ != Object) return nullptr;
    for (auto& m : o_)
      if (m.first == key) return &m.second;
    return nullptr;
  }
  // Sets (or replaces) a member; turns a null value into an object.
  Value& set(const std::string& key, Value v) {
    if (kind_ == Null) kind_ = Object;
    for (auto& m : o_)
      if (m.first == key) return m.second = std::move(v);
    o_.emplace_back(key, std::move(v));
    return o_.back().second;
  }
  Value& push(Value v) {
    if (kind_ == Null) kind_ = Array;
    a_.push_back(std::move(v));
    return a_.back();
  }

  std::string dump() const {
    std::string out;
    write(out);
    return out;
  }

  void write(std::string& out) const {
    switch (kind_) {
      case Null: out += "null"; break;
      case Bool: out += b_ ? "true" : "false"; break;
      case Int: write_int(out, i_); break;
      case Double: write_double(out, d_); break;
      case String: json::write_string(out, s_); break;
      case Array:
        out += '[';
        for (size_t i = 0; i < a_.size(); i++) {
          if (i) out += ',';
          a_[i].write(out);
        }
        out += ']';
        break;
      case Object:
        out += '{';
        for (size_t i = 0; i < o_.size(); i++) {
          if (i) out += ',';
          json::write_string(out, o_[i].first);
          out += ':';
          o_[i].second.write(out);
        }
        out += '}';
        break;
    }
  }

 private:
  Kind kind_ = Null;
  bool b_ = false;
  int64_t i_ = 0;
  double d_ = 0;
  std::string s_;
  std::vector<Value> a_;
  std::vector<std::pair<std::string, Value>> o_;
};

// Recursive-descent parser. Errors name the byte offset so a bad configure string can be fixed.
class Parser {
 public:
  static bool parse(const std::string& text, Value* out, std::string* err) {
    Parser p(text);
    p.ws();
    if (!p.value(out, 0)) {
      if (err) *err = p.err_ + " at byte " + std::to_string(p.pos_);
      return false;
    }
    p.ws();
    if (p.pos_ != text.size()) {
      if (err) *err = "unexpected trailing characters at byte " + std::to_string(p.pos_);
      return false;
    }
    return true;
  }

 private:
  explicit Parser(const std::string& t) : t_(t) {}
  static constexpr int kMaxDepth = 64;  // control-socket input is untrusted: bound the recursion

  bool fail(const char* msg) {
    err_ = msg;
    return false;
  }
  void ws() {
    while (pos_ < t_.size() && (t_[pos_] == ' ' || t_[pos_] == '\t' || t_[pos_] == '\n' || t_[pos_] == '\r')) pos_++;
  }
  bool lit(const char* w) {
    size_t n = std::char_traits<char>::length(w);
    if (t_.compare(pos_, n, w) != 0) return fail("invalid literal");
    pos_ += n;
    return true;
  }

  bool value(Value* out, int depth) {
    if (depth > kMaxDepth) return fail("nesting too deep");
    if (pos_ >= t_.size()) return fail("unexpected end of JSON");
    char c = t_[pos_];
    if (c == '{') return object(out, depth);
    if (c == '[') return array(out, depth);
    if (c == '"') {
      std::string s;
      if (!string(&s)) return false;
      *out = Value(std::move(s));
      return true;
    }
    if (c == 't') {
      if (!lit("true")) return false;
      *out = Value(true);
      return true;
    }
    if (c == 'f') {
      if (!lit("false")) return false;
      *out = Value(false);
      return true;
    }
    if (c == 'n') {
      if (!lit("null")) return false;
      *out = Value();
      return true;
    }
    if (c == '-' || (c >= '0' && c <= '9')) return number(out);
    return fail("unexpected character");
  }

  bool object(Value* out, int depth) {
    *out = Value::object();
    pos_++;  // '{'
    ws();
    if (pos_ < t_.size() && t_[pos_] == '}') {
      pos_++;
      return true;
    }
    for (;;) {
      ws();
      if (pos_ >= t_.size() || t_[pos_] != '"') return fail("expected a string key");
      std::string key;
      if (!string(&key)) return false;
      ws();
      if (pos_ >= t_.size() || t_[pos_] != ':') return fail("expected ':'");
      pos_++;
      ws();
      Value v;
      if (!value(&v, depth + 1)) return false;
      out->set(key, std::move(v));
      ws();
      if (pos_ < t_.size() && t_[pos_] == ',') {
        pos_++;
        continue;
      }
      if (pos_ < t_.size() && t_[pos_] == '}') {
        pos_++;
        return true;
      }
      return fail("expected ',' or '}'");
    }
  }

  bool array(Value* out, int depth) {
    *out = Value::array();
    pos_++;  // '['
    ws();
    if (pos_ < t_.size() && t_[pos_] == ']') {
      pos_++;
      return true;
    }
    for (;;) {
      ws();
      Value v;
      if (!value(&v, depth + 1)) return false;
      out->push(std::move(v));
      ws();
      if (pos_ < t_.size() && t_[pos_] == ',') {
        pos_++;
        continue;
      }
      if (pos_ < t_.size() && t_[pos_] == ']') {
        pos_++;
        return true;
      }
      return fail("expected ',' or ']'");
    }
  }

  static void utf8(std::string* s, uint32_t cp) {
    if (cp < 0x80) {
      *s += static_cast<char>(cp);
    } else if (cp < 0x800) {
      *s += static_cast<char>(0xC0 | (cp >> 6));
      *s += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      *s += static_cast<char>(0xE0 | (cp >> 12));
      *s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      *s += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      *s += static_cast<char>(0xF0 | (cp >> 18));
      *s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      *s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      *s += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  bool hex4(uint32_t* cp) {
    if (pos_ + 4 > t_.size()) return fail("truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
      char c = t_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9')
        v |= c - '0';
      else if (c >= 'a' && c <= 'f')
        v |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        v |= c - 'A' + 10;
      else
        return fail("bad hex digit in \\u escape");
    }
    *cp = v;
    return true;
  }

  bool string(std::string* s) {
    pos_++;  // '"'
    while (pos_ < t_.size()) {
      char c = t_[pos_++];
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) return fail("control character in string");
      if (c != '\\') {
        *s += c;
        continue;
      }
      if (pos_ >= t_.size()) break;
      char e = t_[pos_++];
      switch (e) {
        case '"': *s += '"'; break;
        case '\\': *s += '\\'; break;
        case '/': *s += '/'; break;
        case 'b': *s += '\b'; break;
        case 'f': *s += '\f'; break;
        case 'n': *s += '\n'; break;
        case 'r': *s += '\r'; break;
        case 't': *s += '\t'; break;
        case 'u': {
          uint32_t cp;
          if (!hex4(&cp)) return false;
          if (cp >= 0xD800 && cp < 0xDC00 && pos_ + 6 <= t_.size() && t_[pos_] == '\\' && t_[pos_ + 1] == 'u') {
            pos_ += 2;
            uint32_t lo;
            if (!hex4(&lo)) return false;
            if (lo >= 0xDC00 && lo < 0xE000)
              cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            else
              return fail("unpaired surrogate in \\u escape");
          }
          utf8(s, cp);
          break;
        }
        default: return fail("bad escape in string");
      }
    }
    return fail("unterminated string");
  }

  bool number(Value* out) {
    size_t start = pos_;
    bool is_double = false;
    if (t_[pos_] == '-') pos_++;
    if (pos_ >= t_.size() || !(t_[pos_] >= '0' && t_[pos_] <= '9')) return fail("bad number");
    while (pos_ < t_.size()) {
      char c = t_[pos_];
      if (c >= '0' && c <= '9') {
        pos_++;
        continue;
      }
      if (c == '.' || c == 'e' || c == 'E' || c == '+' || (c == '-' && pos_ > start)) {
        is_double = true;
        pos_++;
        continue;
      }
      break;
    }
    std::string num = t_.substr(start, pos_ - start);
    char* end = nullptr;
    if (!is_double) {
      errno = 0;
      long long v = std::strtoll(num.c_str(), &end, 10);
      if (errno == 0 && end && *end == 0) {
        *out = Value(static_cast<int64_t>(v));
        return true;
      }
    }
    double d = std::strtod(num.c_str(), &end);
    if (!end || *end != 0) return fail("bad number");
    *out = Value(d);
    return true;
  }

  const std::string& t_;
  size_t pos_ = 0;
  std::string err_;
};

// Streaming writer: callers open/close containers and the writer places the commas.
//   json::Writer j; j.open('{').kv("id", 3).key("frames").open('[').close(']').close('}'); j.s is the text.
class Writer {
 public:
  std::string s;

  Writer& raw(std::string_view v) {
    s.append(v);
    return *this;
  }
  Writer& str(std::string_view v) {
    write_string(s, v);
    return *this;
  }
  Writer& num(int64_t v) {
    write_int(s, v);
    return *this;
  }
  Writer& unum(uint64_t v) {
    write_uint(s, v);
    return *this;
  }
  Writer& dbl(double v) {
    write_double(s, v);
    return *this;
  }
  Writer& boolean(bool b) { return raw(b ? "true" : "false"); }
  Writer& key(std::string_view k) {
    comma();
    str(k);
    s.push_back(':');
    return *this;
  }
  Writer& open(char c) {
    comma();
    s.push_back(c);
    return *this;
  }
  Writer& close(char c) {
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
  Writer& kv(std::string_view k, int64_t v) { return key(k).num(v); }
  Writer& kvu(std::string_view k, uint64_t v) { return key(k).unum(v); }
  Writer& kvs(std::string_view k, std::string_view v) { return key(k).str(v); }
  Writer& kvb(std::string_view k, bool v) { return key(k).boolean(v); }
  Writer& kvd(std::string_view k, double v) { return key(k).dbl(v); }
  Writer& item() {
    comma();
    return *this;
  }
};

inline bool parse(const std::string& text, Value* out, std::string* err) { return Parser::parse(text, out, err); }

}  // namespace gpumem::json
