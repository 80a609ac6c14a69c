// pickle_emit.h — a header-only writer of Python pickle protocol 4 for plain data: dict, list, tuple,
// str, bytes, int of any size, float, bool, None. What PyTorch snapshot pickles contain, and nothing
// that makes an unpickler run code (no GLOBAL/REDUCE).
//
// Note [Memo-free]: nothing is memoised (no PUT/GET), so any already-emitted fragment can be copied
// and spliced elsewhere with raw(): callers cache the bytes of repeated values (a stack's frame list)
// and paste them. The output is larger than pickle.dumps' for repeated strings, never wrong. No FRAME
// opcodes either: framing is optional in protocol 4 and unpicklers (Python's, MemoryViz's) accept
// unframed streams.
//
// Usage:  PickleEmitter p; p.begin(); p.begin_dict(); p.str("k"); p.integer(1); p.end_dict(); p.end();
//         p.bytes() is the pickle. Containers nest; every begin_* needs its end_*.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace gpumem::fmt {

class PickleEmitter {
 public:
  explicit PickleEmitter(size_t reserve = 1 << 16) { out_.reserve(reserve); }

  void begin() { op(0x80), u8(4); }  // PROTO 4
  void end() { op('.'); }            // STOP
  const std::string& bytes() const { return out_; }
  std::string take() { return std::move(out_); }
  size_t size() const { return out_.size(); }
  // Splices bytes produced by another emitter (one complete value, or several for a container body).
  void raw(std::string_view b) { out_.append(b.data(), b.size()); }

  void none() { op('N'); }
  void boolean(bool b) { op(b ? 0x88 : 0x89); }  // NEWTRUE / NEWFALSE

  void integer(int64_t v) {
    if (v >= 0 && v < 256) {
      op('K'), u8(uint8_t(v));  // BININT1
    } else if (v >= 0 && v < 65536) {
      op('M'), le(uint64_t(v), 2);  // BININT2
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
      op('J'), le(uint64_t(uint32_t(int32_t(v))), 4);  // BININT
    } else {
      uint8_t b[8];
      for (int i = 0; i < 8; i++) b[i] = uint8_t(uint64_t(v) >> (8 * i));
      long_bytes(b, 8);
    }
  }
  void uinteger(uint64_t v) {
    if (v <= uint64_t(INT64_MAX)) return integer(int64_t(v));
    uint8_t b[9];  // needs a 9th byte: the top bit would read as a sign
    for (int i = 0; i < 8; i++) b[i] = uint8_t(v >> (8 * i));
    b[8] = 0;
    long_bytes(b, 9);
  }
  // An integer of any size as little-endian two's complement bytes (Python's int.to_bytes(n, 'little',
  // signed=True)). Emits LONG1/LONG4 with the shortest encoding.
  void big_integer(const uint8_t* le_twos, size_t n) { long_bytes(le_twos, n); }

  void float64(double d) {  // BINFLOAT: big-endian IEEE 754
    uint64_t bits;
    std::memcpy(&bits, &d, 8);
    op('G');
    for (int i = 7; i >= 0; i--) u8(uint8_t(bits >> (8 * i)));
  }

  // UTF-8 text (not validated: callers pass file names and identifiers they got as UTF-8).
  void str(std::string_view s) {
    if (s.size() < 256) {
      op(0x8c), u8(uint8_t(s.size()));  // SHORT_BINUNICODE
    } else if (s.size() <= 0xffffffffu) {
      op('X'), le(s.size(), 4);  // BINUNICODE
    } else {
      op(0x8d), le(s.size(), 8);  // BINUNICODE8
    }
    out_.append(s.data(), s.size());
  }
  void bytes_value(std::string_view s) {
    if (s.size() < 256) {
      op('C'), u8(uint8_t(s.size()));  // SHORT_BINBYTES
    } else if (s.size() <= 0xffffffffu) {
      op('B'), le(s.size(), 4);  // BINBYTES
    } else {
      op(0x8e), le(s.size(), 8);  // BINBYTES8
    }
    out_.append(s.data(), s.size());
  }

  // Containers: EMPTY_x then MARK … SETITEMS/APPENDS, so any number of items (including none) fits.
  void begin_dict() { op('}'), op('('); }
  void end_dict() { op('u'); }
  void begin_list() { op(']'), op('('); }
  void end_list() { op('e'); }
  void begin_tuple() { op('('); }
  void end_tuple() { op('t'); }

  // Shorthands for the common dict entries.
  void key(std::string_view k) { str(k); }
  void kv(std::string_view k, std::string_view v) { str(k), str(v); }
  void kv(std::string_view k, const char* v) { str(k), str(v); }
  void kv_int(std::string_view k, int64_t v) { str(k), integer(v); }
  void kv_uint(std::string_view k, uint64_t v) { str(k), uinteger(v); }
  void kv_bool(std::string_view k, bool v) { str(k), boolean(v); }
  void kv_float(std::string_view k, double v) { str(k), float64(v); }

 private:
  void op(int c) { out_.push_back(char(c)); }
  void u8(uint8_t v) { out_.push_back(char(v)); }
  void le(uint64_t v, int n) {
    for (int i = 0; i < n; i++) out_.push_back(char(uint8_t(v >> (8 * i))));
  }
  void long_bytes(const uint8_t* b, size_t n) {
    // Drop redundant sign bytes: 0x00 over a clear top bit, 0xff over a set one.
    while (n > 1 && ((b[n - 1] == 0x00 && !(b[n - 2] & 0x80)) || (b[n - 1] == 0xff && (b[n - 2] & 0x80)))) n--;
    if (n < 256) {
      op(0x8a), u8(uint8_t(n));  // LONG1
    } else {
      op(0x8b), le(n, 4);  // LONG4
    }
    out_.append(reinterpret_cast<const char*>(b), n);
  }

  std::string out_;
};

}  // namespace gpumem::fmt
