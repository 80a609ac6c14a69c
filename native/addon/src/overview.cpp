// overview.cpp — a first pass over a PyTorch snapshot pickle that yields allocated and reserved over the
// whole run as min/max buckets, without building the model.
//
// Note [First view]: the snapshot panel's timeline used to wait for the whole open (the pickle VM, frames
// interned, every column built, pairing): 1.5–3 s for a 10 M-event, 749 MiB pickle, so the first paint
// grew with the file. What the first paint needs is much less: allocated and reserved over the whole run
// at the panel's resolution, and the peaks. This pass reads only that:
//   - a pickle VM of its own that builds no tree: values are small tags (a string of interest, an integer,
//     a container index, "something else"); dicts and lists keep only what the overview reads (the keys
//     below; list items that are dicts or lists). Code opcodes and text-protocol opcodes end the pass.
//   - trace entries take a fast path: EMPTY_DICT MEMOIZE MARK (key value)… SETITEMS, with keys and action
//     strings memo references and values integers, memo references or fresh short strings, is read in
//     one tight loop; only action, size and time_us are kept (frames are a memo reference skipped, never
//     interned). Its byte shape is then kept, and later entries of that shape are matched with masked
//     word compares (Note [Entry shapes]). Anything else in a dict rewinds to its first opcode and the
//     general path reads it.
//   - per entry two numbers are stored (time, allocated delta; reserved deltas are rare and kept apart);
//     at the end, the segments give the state at the end (as import_snapshot computes the start:
//     allocated = active_allocated blocks − Σ alloc + Σ free_requested, reserved likewise), times are
//     made monotonic in place as trace() does, and one pass buckets the series exactly as timeline_json
//     does (bucket k covers [ceil(t0 + k·w), ceil(t0 + (k+1)·w)), the last includes t1, and the value
//     carried in counts), so each bucket equals the full model's (test/unit/reader-overview.test.mjs).
//     An entry object named twice in a trace (a memo reference) cannot be cut in place: no overview then,
//     never a wrong one (the panel waits for the model).
// On the ×180 benchmark pickle (10 M events, 749 MiB) the pass reads about 2–3× faster than the full open's
// parse and holds ≈ 16 bytes per entry plus a window of the input (Note [Overview window]); it runs on a
// libuv worker (addon.cpp, overviewAsync) before the full open starts, so the two never compete for the
// 2 cores of a CI-like machine. The panel paints the overview first and replaces it in place when the model
// arrives (Note [First view] in src/glue/snapshot/panelHost.ts; figures in test/bench/snapshot-panel/README.md).
#include "overview.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string_view>
#include <vector>

#include <sys/mman.h>

#include "json.h"
#include "model.h"

namespace gpumem {
namespace {

// Strings the overview reads: keys, then the actions (kActionNames order), then a block state.
enum StrId : uint32_t {
  S_OTHER = 0,
  S_SEGMENTS,
  S_DEVICE_TRACES,
  S_ANNOTATIONS,
  S_DEVICE,
  S_TOTAL_SIZE,
  S_BLOCKS,
  S_SIZE,
  S_STATE,
  S_ACTION,
  S_TIME,
  S_ACTIVE_ALLOCATED,
  S_ACTION0,  // + ACT_*
};
const char* const kKeys[] = {"",       "segments",   "device_traces", "external_annotations",
                             "device", "total_size", "blocks",        "size",
                             "state",  "action",     "time_us",       "active_allocated"};

uint32_t string_id(std::string_view s) {
  if (s.size() > 24) return S_OTHER;
  for (uint32_t k = 1; k < S_ACTION0; k++)
    if (s == kKeys[k]) return k;
  for (int a = 0; a < ACT_COUNT; a++)
    if (s == kActionNames[a]) return S_ACTION0 + (uint32_t)a;
  return S_OTHER;
}

enum Kind : uint8_t { K_OTHER, K_NONE, K_INT, K_FLOAT, K_STR, K_LIST, K_DICT, K_ENTRY };
struct V {
  Kind kind = K_OTHER;
  uint32_t a = 0;  // Str: string id; List/Dict: store index; Entry: entry number
  uint64_t b = 0;  // Int: int64 bits; Float: double bits
};
// Memo entries are packed: kind in the top 3 bits, a (string id or container index) below.
constexpr uint32_t kMemoPayload = (1u << 29) - 1;
uint32_t pack(const V& v) {
  Kind k = v.kind == K_STR || v.kind == K_LIST || v.kind == K_DICT || v.kind == K_ENTRY ? v.kind : K_OTHER;
  if (v.a > kMemoPayload) k = K_OTHER;
  return ((uint32_t)k << 29) | (k == K_OTHER ? 0 : v.a);
}
V unpack(uint32_t m) { return V{(Kind)(m >> 29), m & kMemoPayload, 0}; }

// As PickleTree::as_int reads a node (Note [Absent is None]: absent reads as None).
int64_t as_int(const V& v, int64_t fallback) {
  if (v.kind == K_INT) return (int64_t)v.b;
  if (v.kind == K_FLOAT) {
    double d;
    memcpy(&d, &v.b, 8);
    if (!(d > -9.2e18 && d < 9.2e18)) return fallback;
    return (int64_t)d;
  }
  return fallback;
}

constexpr int64_t kNoTime = std::numeric_limits<int64_t>::min();  // time_us present but not a number
constexpr int64_t kNoTimeKey = kNoTime + 1;                       // no time_us key

struct Scanner {
  const uint8_t* p;
  const uint8_t* end;
  const uint8_t* base;
  std::vector<V> stack;
  std::vector<size_t> marks;
  std::vector<uint32_t> memo;
  std::vector<std::vector<std::pair<uint32_t, V>>> dicts;  // pairs with a key of interest
  std::vector<std::vector<V>> lists;                       // items that are lists or dicts
  // Entries in pickle order; which list each run of them went to.
  std::vector<int64_t> t;
  std::vector<int64_t> da;                       // allocated delta
  std::vector<std::pair<uint32_t, int64_t>> dr;  // (entry, reserved delta), rare
  struct Run {
    uint32_t list, first, count;
  };
  std::vector<Run> runs;

  [[noreturn]] void fail(const char* why) const {
    throw std::runtime_error(std::string("overview: ") + why + " at offset " + std::to_string(p - base));
  }
  void need(size_t n) const {
    if ((size_t)(end - p) < n) fail("truncated");
  }
  static uint64_t le(const uint8_t* q, int n) {
    if (n == 4) {
      uint32_t v;
      memcpy(&v, q, 4);
      return v;
    }
    if (n == 2) return (uint64_t)q[0] | (uint64_t)q[1] << 8;
    uint64_t v = 0;
    memcpy(&v, q, (size_t)n);  // little-endian hosts (x86-64, arm64)
    return v;
  }
  V pop() {
    if (stack.empty() || (!marks.empty() && stack.size() <= marks.back())) fail("stack underflow");
    V v = stack.back();
    stack.pop_back();
    return v;
  }
  size_t pop_mark() {
    if (marks.empty()) fail("no mark");
    size_t m = marks.back();
    marks.pop_back();
    return m;
  }
  V memo_get(uint64_t k) const {
    if (k >= memo.size()) fail("memo key not defined");
    return unpack(memo[k]);
  }
  void memo_put(uint64_t k, const V& v) {
    if (k > (uint64_t)(end - base)) fail("memo key beyond the file size");
    if (k >= memo.size())
      memo.resize(k + 1, 0);
    else
      nshapes = 0;  // a memo key named again: the shapes' keys may name other strings now
    memo[k] = pack(v);
  }
  static V int_v(int64_t x) { return V{K_INT, 0, (uint64_t)x}; }
  V long_v(const uint8_t* q, size_t n) const {
    if (n == 0) return int_v(0);
    if (n <= 8) {
      uint64_t v;
      if (end - q >= 8)
        memcpy(&v, q, 8);  // one load; the bytes beyond n are shifted out below
      else
        v = le(q, (int)n);
      const int shift = 64 - 8 * (int)n;  // sign-extend from n bytes
      return int_v(shift ? (int64_t)(v << shift) >> shift : (int64_t)v);
    }
    if (n == 9 && q[8] == 0) return V{K_INT, 0, le(q, 8)};  // ≥ 2^63: as_int wraps, as the tree's UInt does
    return V{};                                             // a big int: as_int's fallback
  }
  V str_v(const uint8_t* q, size_t n) const { return V{K_STR, string_id(std::string_view((const char*)q, n)), 0}; }

  // Written in place: a V built on the stack and copied in stalls on store forwarding (the hot spot of the
  // fast paths before).
  void push_entry(uint32_t e) {
    V& v = stack.emplace_back();
    v.kind = K_ENTRY, v.a = e;
  }
  uint32_t add_entry(int act, const V& size, bool has_time, const V& time) {
    return record(act, (uint64_t)as_int(size, 0), has_time ? as_int(time, kNoTime) : kNoTimeKey);
  }
  uint32_t record(int act, uint64_t s, int64_t time_us) {
    uint32_t e = (uint32_t)t.size();
    t.push_back(time_us);
    int64_t d = 0;
    switch (act) {
      case ACT_ALLOC: d = (int64_t)s; break;
      case ACT_FREE_REQUESTED: d = (int64_t)(0 - s); break;
      case ACT_SEGMENT_ALLOC:
      case ACT_SEGMENT_MAP: dr.push_back({e, (int64_t)s}); break;
      case ACT_SEGMENT_FREE:
      case ACT_SEGMENT_UNMAP: dr.push_back({e, (int64_t)(0 - s)}); break;
      default: break;
    }
    da.push_back(d);
    return e;
  }

  // Note [Entry shapes]: a trace's entries repeat a few byte shapes: the same keys (memo references) in
  // the same order, each with a value of the same opcode and length (LONG1's count byte included). Once
  // the fast path below has read an entry, its shape is kept (up to kShapes): the bytes that must be equal
  // (keys, opcodes, LONG1 counts, MEMOIZE, MARK, SETITEMS) and a mask of them. A later entry is matched
  // with a few 8-byte masked compares that do not depend on each other (no walk from opcode to opcode),
  // then action, size and time_us are decoded at their known offsets. A mismatch falls back to the
  // per-opcode fast path, which may learn the new shape.
  static constexpr int kShapes = 16, kMaxPairs = 16, kShapeWords = 24;  // entries up to 192 bytes
  struct Shape {
    int len = 0, words = 0;
    uint64_t expect[kShapeWords], mask[kShapeWords];
    int16_t off_action = -1, off_size = -1, off_time = -1;  // of the value's opcode
    // Integer values decoded with one load: the bytes at off + skip, shifted (signed or not) to their width.
    struct IntField {
      int16_t at = -1;  // -1: decode with value_at
      uint8_t shift = 0;
      bool is_signed = false;
    } size_int, time_int;
    uint32_t action_mask = 0;  // memo index bytes of the action's BINGET (0xFF) or LONG_BINGET (0xFFFFFFFF)
  };
  static Shape::IntField int_field(const uint8_t* op_at, int16_t off) {
    Shape::IntField f;
    switch (*op_at) {
      case 'K': f = {(int16_t)(off + 1), 56, false}; break;
      case 'M': f = {(int16_t)(off + 1), 48, false}; break;
      case 'J': f = {(int16_t)(off + 1), 32, true}; break;
      case 0x8a:
        if (op_at[1] >= 1 && op_at[1] <= 8) f = {(int16_t)(off + 2), (uint8_t)(64 - 8 * op_at[1]), true};
        break;
      default: break;
    }
    return f;
  }
  int64_t load_int(const Shape::IntField& f) const {
    uint64_t w;
    memcpy(&w, p + f.at, 8);
    w <<= f.shift;
    return f.is_signed ? (int64_t)w >> f.shift : (int64_t)(w >> f.shift);
  }
  Shape shapes[kShapes];
  int nshapes = 0, next_shape = 0, last_shape = 0;
  static constexpr ptrdiff_t kShapeSlack = kShapeWords * 8 + 8;
  bool match_shape(const Shape& sh) {
    uint64_t diff = 0;
    for (int k = 0; k < sh.words; k++) {
      uint64_t w;
      memcpy(&w, p + 8 * k, 8);
      diff |= (w ^ sh.expect[k]) & sh.mask[k];
    }
    if (diff) return false;
    int act = -1;
    if (sh.action_mask) {
      uint32_t k;
      memcpy(&k, p + sh.off_action + 1, 4);
      k &= sh.action_mask;
      const uint32_t m = k < memo.size() ? memo[k] : 0;
      if ((m >> 29) == K_STR && (m & kMemoPayload) >= S_ACTION0) act = (int)((m & kMemoPayload) - S_ACTION0);
    } else {
      const V act_v = value_at(p + sh.off_action);
      act = act_v.kind == K_STR && act_v.a >= S_ACTION0 ? (int)(act_v.a - S_ACTION0) : -1;
    }
    if (act < 0 || act >= ACT_COUNT) return false;
    const uint32_t e = (uint32_t)t.size();
    memo.push_back(pack(V{K_ENTRY, e, 0}));  // the dict's MEMOIZE
    if (sh.size_int.at >= 0 && sh.time_int.at >= 0) {
      record(act, (uint64_t)load_int(sh.size_int), load_int(sh.time_int));
    } else {
      const V size = sh.off_size >= 0 ? value_at(p + sh.off_size) : V{K_NONE};
      const V time = sh.off_time >= 0 ? value_at(p + sh.off_time) : V{K_NONE};
      add_entry(act, size, sh.off_time >= 0, time);
    }
    p += sh.len;
    push_entry(e);
    return true;
  }
  bool shaped_entry() {
    if (nshapes == 0 || end - p < kShapeSlack) return false;
    if (match_shape(shapes[last_shape])) return true;
    for (int si = 0; si < nshapes; si++)
      if (si != last_shape && match_shape(shapes[si])) {
        last_shape = si;
        return true;
      }
    return false;
  }
  // The learner: bytes [from, to) of the entry at p are fixed (equal in every entry of this shape).
  static void fix(Shape& sh, const uint8_t* base, const uint8_t* from, const uint8_t* to) {
    for (const uint8_t* c = from; c < to; c++) {
      size_t i = (size_t)(c - base);
      sh.expect[i / 8] |= (uint64_t)*c << (8 * (i % 8));
      sh.mask[i / 8] |= 0xFFull << (8 * (i % 8));
    }
  }
  // Length of a value opcode the shapes read (0: not one of them); LONG1 adds its count.
  struct LenTable {
    uint8_t len[256];
    LenTable() {
      for (int op = 0; op < 256; op++) len[op] = value_len_of((uint8_t)op);
    }
  };
  static const LenTable& lens() {
    static const LenTable table;
    return table;
  }
  static uint8_t value_len_of(uint8_t op) {
    switch (op) {
      case 'h':
      case 'K': return 2;
      case 'M': return 3;
      case 'j':
      case 'J': return 5;
      case 'N':
      case 0x88:
      case 0x89: return 1;
      case 0x8a: return 2;
      case 'G': return 9;
      default: return 0;
    }
  }
  // A value opcode at q (one value_len knows) as the general path reads it.
  V value_at(const uint8_t* q) const {
    switch (*q) {
      case 'h': return q[1] < memo.size() ? unpack(memo[q[1]]) : V{};
      case 'j': {
        uint64_t k = le(q + 1, 4);
        return k < memo.size() ? unpack(memo[k]) : V{};
      }
      case 'K': return int_v(q[1]);
      case 'M': return int_v((int64_t)le(q + 1, 2));
      case 'J': return int_v((int32_t)(uint32_t)le(q + 1, 4));
      case 'N': return V{K_NONE};
      case 0x88: return int_v(1);
      case 0x89: return int_v(0);
      case 0x8a: return long_v(q + 2, q[1]);
      case 'G': {
        uint64_t bits = 0;
        for (int i = 1; i <= 8; i++) bits = (bits << 8) | q[i];
        return V{K_FLOAT, 0, bits};
      }
      default: return V{};
    }
  }
  // Note [Fresh frames lists]: PyTorch dumps every trace entry with a fresh frames list of fresh frame dicts
  // (EMPTY_LIST MEMOIZE, then MARK (EMPTY_DICT MEMOIZE MARK key value … SETITEMS)… APPENDS, or one dict and
  // APPEND); their keys and file names are memo references or fresh strings. The overview needs none of it: the
  // list is skipped by counting values and marks, with every memo entry it makes kept in step (fresh strings
  // by value, so a key first named in a frame is still known by a later entry). Anything else: nullptr, and the
  // general path reads the entry. Without this, an entry's frames went through the general path's stores and
  // the first pass took longer than the full open on PyTorch-shaped pickles.
  const uint8_t* skip_fresh_list(const uint8_t* q) {
    int height = 0;  // values this list pushed and not yet consumed: 1 once the list is there
    int marks_at[8];
    int nmarks = 0;
    for (int ops = 0; ops < (1 << 20); ops++) {
      if (ops > 0 && nmarks == 0 && height == 1 && *q != '(' && *q != '}' && *q != 0x94) return q;  // complete
      if (end - q < 600 || height < 0) return nullptr;
      const uint8_t op = *q;
      size_t len;
      switch (op) {
        case ']':
        case '}':
        case 'N':
        case 0x88:
        case 0x89: len = 1, height++; break;
        case 'h':
        case 'K': len = 2, height++; break;
        case 'M': len = 3, height++; break;
        case 'j':
        case 'J': len = 5, height++; break;
        case 0x8a: len = 2 + (size_t)q[1], height++; break;
        case 0x8c:
        case 'X': {
          size_t n = op == 0x8c ? q[1] : (size_t)le(q + 1, 4);
          size_t head = op == 0x8c ? 2 : 5;
          if (n > 256) return nullptr;
          height++;
          if (q[head + n] == 0x94) {
            memo.push_back(pack(str_v(q + head, n)));
            len = head + n + 1;
          } else {
            len = head + n;
          }
          break;
        }
        case 0x94: memo.push_back(0), len = 1; break;
        case '(':
          if (nmarks == 8) return nullptr;
          marks_at[nmarks++] = height, len = 1;
          break;
        case 'u':
        case 'e':
          if (nmarks == 0) return nullptr;
          height = marks_at[--nmarks], len = 1;
          break;
        case 'a': height--, len = 1; break;
        case 's': height -= 2, len = 1; break;
        default: return nullptr;
      }
      q += len;
    }
    return nullptr;
  }

  // Note [First view]'s fast path: p is at EMPTY_DICT; true when a flat trace entry was read (pushed).
  // Bounds are checked once per pair: no opcode it reads is longer than kSlack bytes; closer to the end
  // the general path reads it.
  static constexpr ptrdiff_t kSlack = 2 * 260;
  bool fast_entry() {
    const uint8_t* q = p;
    if (end - q < kSlack || q[1] != 0x94 || q[2] != '(') return false;
    const size_t memo_before = memo.size();
    memo.push_back(pack(V{K_ENTRY, (uint32_t)t.size(), 0}));  // the dict, if it is an entry
    q += 3;
    V size{K_NONE}, time{K_NONE};
    int act = -1;
    bool has_time = false;
    const uint32_t* mem = memo.data();
    size_t msize = memo.size();
    Shape learn{};
    bool learnable = true;
    const uint8_t* const entry = p;
    const LenTable& lt = lens();
    for (int pairs = 0; pairs < 32; pairs++) {
      if (end - q < kSlack) break;
      uint8_t op = *q;
      if (op == 'u') {
        if (act < 0) break;  // not a trace entry: the general path reads it
        p = q + 1;
        push_entry(add_entry(act, size, has_time, time));
        learn.len = (int)(p - entry);
        if (learnable && learn.len <= kShapeWords * 8 && learn.off_action >= 0) {
          fix(learn, entry, entry, entry + 3);  // EMPTY_DICT MEMOIZE MARK
          fix(learn, entry, q, q + 1);          // SETITEMS
          learn.words = (learn.len + 7) / 8;
          last_shape = nshapes < kShapes ? nshapes++ : next_shape++ % kShapes;
          shapes[last_shape] = learn;
        }
        return true;
      }
      uint64_t k;
      const uint8_t* key_at = q;
      if (op == 'j')
        k = le(q + 1, 4), q += 5;
      else if (op == 'h')
        k = q[1], q += 2;
      else
        break;
      if (k >= msize || (mem[k] >> 29) != K_STR) break;
      const uint32_t key = mem[k] & kMemoPayload;
      const bool wanted = key == S_ACTION || key == S_SIZE || key == S_TIME;
      V v;
      op = *q;
      if (learnable && lt.len[op] && q + 2 - entry <= kShapeWords * 8) {
        fix(learn, entry, key_at, q + 1);                 // the key and the value's opcode
        if (op == 0x8a) fix(learn, entry, q + 1, q + 2);  // LONG1's count
        const int16_t off = (int16_t)(q - entry);
        if (key == S_ACTION) {
          learn.off_action = off;
          learn.action_mask = op == 'j' ? 0xFFFFFFFFu : op == 'h' ? 0xFFu : 0;
        }
        if (key == S_SIZE) learn.off_size = off, learn.size_int = int_field(q, off);
        if (key == S_TIME) learn.off_time = off, learn.time_int = int_field(q, off);
      } else {
        learnable = false;
      }
      switch (op) {
        case 'j':
          if (wanted) {
            k = le(q + 1, 4);
            if (k >= msize) goto rewind;
            v = unpack(mem[k]);
          }
          q += 5;
          break;
        case 'h':
          if (wanted) {
            if (q[1] >= msize) goto rewind;
            v = unpack(mem[q[1]]);
          }
          q += 2;
          break;
        case 'K': v = int_v(q[1]), q += 2; break;
        case 'M': v = int_v((int64_t)le(q + 1, 2)), q += 3; break;
        case 'J': v = int_v((int32_t)(uint32_t)le(q + 1, 4)), q += 5; break;
        case 0x8a:
          if (wanted) v = long_v(q + 2, q[1]);
          q += 2 + q[1];
          break;
        case 'N': v = V{K_NONE}, q += 1; break;
        case 0x88: v = int_v(1), q += 1; break;
        case 0x89: v = int_v(0), q += 1; break;
        case 0x8c:
          v = str_v(q + 2, q[1]), q += 2 + q[1];
          if (*q == 0x94) memo.push_back(pack(v)), q++, mem = memo.data(), msize = memo.size();
          break;
        case ']':
          // A fresh frames list (Note [Fresh frames lists]): skipped, its memo entries kept.
          if (!(q = skip_fresh_list(q))) goto rewind;
          mem = memo.data(), msize = memo.size();
          v = V{};
          break;
        default: goto rewind;
      }
      if (wanted) {
        if (key == S_ACTION)
          act = v.kind == K_STR && v.a >= S_ACTION0 ? (int)(v.a - S_ACTION0) : -1;
        else if (key == S_SIZE)
          size = v;
        else
          time = v, has_time = true;
      }
    }
  rewind:
    memo.resize(memo_before);
    return false;
  }

  void set_items(V& dict, size_t from) {
    if (dict.kind != K_DICT) return;  // a dict the overview does not read, or not a dict
    auto& pairs = dicts[dict.a];
    int act = -2;
    V size{K_NONE}, time{K_NONE};
    bool has_time = false;
    for (size_t k = from; k + 1 < stack.size(); k += 2) {
      const V& key = stack[k];
      if (key.kind != K_STR || key.a == S_OTHER) continue;
      const V& v = stack[k + 1];
      pairs.push_back({key.a, v});
      if (key.a == S_ACTION) act = v.kind == K_STR && v.a >= S_ACTION0 ? (int)(v.a - S_ACTION0) : -1;
      if (key.a == S_SIZE) size = v;
      if (key.a == S_TIME) time = v, has_time = true;
    }
    // A trace entry the fast path did not take (fresh frames lists, other key shapes): the same row.
    if (act >= 0) {
      for (const auto& [k, v] : pairs) {
        if (k == S_SIZE) size = v;
        if (k == S_TIME) time = v, has_time = true;
      }
      pairs.clear();
      if (entry_dicts.size() <= dict.a) entry_dicts.resize(dict.a + 1);
      entry_dicts[dict.a] = true;
      dict = V{K_ENTRY, add_entry(act, size, has_time, time), 0};
    }
  }

  // Entries named twice (memo references) or out of order: what the overview cannot cut in place (times are
  // made monotonic in place, one slot per entry); the full open reads them. Reported at the end.
  bool reused_entry = false;
  uint32_t next_seq = 0;
  std::vector<bool> entry_dicts;  // dicts the general path read as entries (a memo reference names them so)
  void append(const V& list, const V& item) {
    if (list.kind != K_LIST) return;
    if (item.kind == K_DICT && item.a < entry_dicts.size() && entry_dicts[item.a]) reused_entry = true;
    if (item.kind == K_ENTRY) {
      if (item.a < next_seq) reused_entry = true;
      next_seq = item.a + 1;
      if (!runs.empty() && runs.back().list == list.a && runs.back().first + runs.back().count == item.a)
        runs.back().count++;
      else
        runs.push_back(Run{list.a, item.a, 1});
    } else if (item.kind == K_LIST || item.kind == K_DICT) {
      lists[list.a].push_back(item);
    }
  }

  // Note [Overview window]: the input is a private read-only file mapping read once front to back; the pages
  // behind the scanner are dropped (they would count in the RSS: 749 MiB at 10 M events) and the next ones
  // populated ahead in one call instead of a fault per page. Nothing is read again behind p.
  bool window = false;
  const uint8_t* window_next = nullptr;
  const uint8_t* dropped = nullptr;
  static constexpr size_t kWindowStep = 8u << 20, kAhead = 16u << 20;
  void advance_window() {
    const uintptr_t page = 4096;
    window_next = p + kWindowStep;
    if (!window) return;
    uintptr_t upto = ((uintptr_t)p & ~(page - 1));
    upto = upto > (uintptr_t)base + page ? upto - page : (uintptr_t)base;
    if (upto > (uintptr_t)dropped) {
      madvise((void*)dropped, upto - (uintptr_t)dropped, MADV_DONTNEED);
      dropped = (const uint8_t*)upto;
    }
#ifdef MADV_POPULATE_READ
    uintptr_t from = (uintptr_t)p & ~(page - 1), to = std::min((uintptr_t)end, from + kAhead);
    if (to > from) madvise((void*)from, to - from, MADV_POPULATE_READ);
#endif
  }
  V run() {
    dropped = base;
    advance_window();
    while (true) {
      if (p >= window_next) advance_window();
      need(1);
      uint8_t op = *p;
      if (op == '}' && (shaped_entry() || fast_entry())) continue;
      p++;
      switch (op) {
        case 0x80: need(1), p += 1; break;  // PROTO
        case 0x95: need(8), p += 8; break;  // FRAME
        case '.': {                         // STOP
          if (stack.empty()) fail("empty stack at STOP");
          return stack.back();
        }
        case '(': marks.push_back(stack.size()); break;
        case '0': pop(); break;
        case '1': stack.resize(pop_mark()); break;
        case '2': {
          if (stack.empty()) fail("DUP of nothing");
          stack.push_back(stack.back());
          break;
        }
        case 'N': stack.push_back(V{K_NONE}); break;
        case 0x88: stack.push_back(int_v(1)); break;
        case 0x89: stack.push_back(int_v(0)); break;
        case 'K': need(1), stack.push_back(int_v(p[0])), p += 1; break;
        case 'M': need(2), stack.push_back(int_v((int64_t)le(p, 2))), p += 2; break;
        case 'J': need(4), stack.push_back(int_v((int32_t)(uint32_t)le(p, 4))), p += 4; break;
        case 0x8a: {
          need(1);
          size_t n = p[0];
          need(1 + n);
          stack.push_back(long_v(p + 1, n)), p += 1 + n;
          break;
        }
        case 0x8b: {
          need(4);
          uint64_t n = le(p, 4);
          need(4 + n);
          stack.push_back(long_v(p + 4, n)), p += 4 + n;
          break;
        }
        case 'G': {
          need(8);
          uint64_t bits = 0;
          for (int i = 0; i < 8; i++) bits = (bits << 8) | p[i];  // big-endian
          stack.push_back(V{K_FLOAT, 0, bits}), p += 8;
          break;
        }
        case 0x8c:
        case 'U':
        case 'C': {  // SHORT_BINUNICODE, SHORT_BINSTRING, SHORT_BINBYTES
          need(1);
          size_t n = p[0];
          need(1 + n);
          stack.push_back(op == 'C' ? V{} : str_v(p + 1, n)), p += 1 + n;
          break;
        }
        case 'X':
        case 'T':
        case 'B': {
          need(4);
          uint64_t n = le(p, 4);
          need(4 + n);
          stack.push_back(op == 'B' ? V{} : str_v(p + 4, n)), p += 4 + n;
          break;
        }
        case 0x8d:
        case 0x8e:
        case 0x96: {
          need(8);
          uint64_t n = le(p, 8);
          if (n > (uint64_t)(end - p) - 8) fail("truncated");
          stack.push_back(op == 0x8d ? str_v(p + 8, n) : V{}), p += 8 + n;
          break;
        }
        case ']':
          lists.emplace_back();
          stack.push_back(V{K_LIST, (uint32_t)(lists.size() - 1), 0});
          break;
        case '}':
          dicts.emplace_back();
          stack.push_back(V{K_DICT, (uint32_t)(dicts.size() - 1), 0});
          break;
        case ')':
        case 0x8f: stack.push_back(V{}); break;  // EMPTY_TUPLE, EMPTY_SET
        case 0x85: pop(), stack.push_back(V{}); break;
        case 0x86: pop(), pop(), stack.push_back(V{}); break;
        case 0x87: pop(), pop(), pop(), stack.push_back(V{}); break;
        case 't':
        case 0x91: stack.resize(pop_mark()), stack.push_back(V{}); break;  // TUPLE, FROZENSET
        case 0x90: {                                                       // ADDITEMS
          size_t m = pop_mark();
          if (m == 0) fail("ADDITEMS without a set");
          stack.resize(m);
          break;
        }
        case 'l': {  // LIST
          size_t m = pop_mark();
          lists.emplace_back();
          V list{K_LIST, (uint32_t)(lists.size() - 1), 0};
          for (size_t k = m; k < stack.size(); k++) append(list, stack[k]);
          stack.resize(m);
          stack.push_back(list);
          break;
        }
        case 'd': {  // DICT
          size_t m = pop_mark();
          dicts.emplace_back();
          V dict{K_DICT, (uint32_t)(dicts.size() - 1), 0};
          set_items(dict, m);
          stack.resize(m);
          stack.push_back(dict);
          break;
        }
        case 'a': {
          V item = pop();
          if (stack.empty()) fail("APPEND without a list");
          append(stack.back(), item);
          break;
        }
        case 'e': {
          size_t m = pop_mark();
          if (m == 0) fail("APPENDS without a list");
          for (size_t k = m; k < stack.size(); k++) append(stack[m - 1], stack[k]);
          stack.resize(m);
          break;
        }
        case 's': {
          if (stack.size() < 3 || (!marks.empty() && stack.size() < marks.back() + 2)) fail("SETITEM underflow");
          set_items(stack[stack.size() - 3], stack.size() - 2);
          stack.resize(stack.size() - 2);
          break;
        }
        case 'u': {
          size_t m = pop_mark();
          if (m == 0) fail("SETITEMS without a dict");
          set_items(stack[m - 1], m);
          stack.resize(m);
          break;
        }
        case 0x94: {
          if (stack.empty()) fail("MEMOIZE of nothing");
          memo.push_back(pack(stack.back()));
          break;
        }
        case 'q': {
          need(1);
          if (stack.empty()) fail("BINPUT of nothing");
          memo_put(p[0], stack.back()), p += 1;
          break;
        }
        case 'r': {
          need(4);
          if (stack.empty()) fail("LONG_BINPUT of nothing");
          memo_put(le(p, 4), stack.back()), p += 4;
          break;
        }
        case 'h': need(1), stack.push_back(memo_get(p[0])), p += 1; break;
        case 'j': need(4), stack.push_back(memo_get(le(p, 4))), p += 4; break;
        default: --p, fail("an opcode this pass does not read");
      }
    }
  }

  // The value of key k in a stored dict (last wins, as PickleTree::get reads the first… and the
  // importer's fields() the last: segments and annotations have no repeated keys in practice).
  const V* get(const V& dict, uint32_t k) const {
    if (dict.kind != K_DICT) return nullptr;
    const V* found = nullptr;
    for (const auto& [key, v] : dicts[dict.a])
      if (key == k) found = &v;
    return found;
  }
  int64_t get_int(const V& dict, uint32_t k, int64_t fallback) const {
    const V* v = get(dict, k);
    return v ? as_int(*v, fallback) : fallback;
  }
};

struct DeviceOverview {
  bool used = false;
  int64_t end_allocated = 0, end_reserved = 0;
  std::vector<std::pair<uint32_t, uint32_t>> entry_runs;  // (first, count), in trace order
  std::vector<int64_t> marker_times;
};

}  // namespace

std::string pickle_overview_json(const uint8_t* data, size_t size, int buckets, bool file_mapped) {
  buckets = std::max(1, std::min(buckets, 1 << 16));
  Scanner s;
  s.p = data, s.end = data + size, s.base = data;
  s.window = file_mapped;
  // A trace entry takes ≥ 40 bytes of pickle in practice (Note [Row columns prefault] in snapshot_import.cpp).
  if (size >= (32u << 20)) {
    s.t.reserve(size / 40), s.da.reserve(size / 40);
    s.memo.reserve(size / 40);
    advise_huge(s.t.data(), s.t.capacity() * 8), advise_huge(s.da.data(), s.da.capacity() * 8);
    advise_huge(s.memo.data(), s.memo.capacity() * 4);
  }
  const char* timings = getenv("GPUMEM_READER_TIMINGS");
  auto t_start = std::chrono::steady_clock::now();
  V root = s.run();
  if (timings && *timings == '1')
    fprintf(stderr, "gpumem overview: scan %.1f ms, %zu entries, %zu dicts, %zu lists\n",
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_start).count(), s.t.size(),
            s.dicts.size(), s.lists.size());
  if (root.kind != K_DICT || (!s.get(root, S_DEVICE_TRACES) && !s.get(root, S_SEGMENTS)))
    throw std::runtime_error("overview: not a snapshot dict with segments or device_traces");
  s.memo = {};
  if (s.reused_entry) throw std::runtime_error("overview: trace entries named twice; the full open reads them");
  std::vector<DeviceOverview> devs;
  auto device = [&](int64_t d) -> DeviceOverview* {
    if (d < 0 || d >= 1024) return nullptr;  // Note [Device indexes] in snapshot_import.cpp
    if ((size_t)d >= devs.size()) devs.resize((size_t)d + 1);
    devs[(size_t)d].used = true;
    return &devs[(size_t)d];
  };
  // The state at the end, from the segments (import_snapshot: Σ segment sizes, Σ active_allocated blocks).
  if (const V* segs = s.get(root, S_SEGMENTS); segs && segs->kind == K_LIST) {
    for (const V& g : s.lists[segs->a]) {
      if (g.kind != K_DICT) continue;
      DeviceOverview* d = device(s.get_int(g, S_DEVICE, 0));
      if (!d) continue;
      uint64_t total = (uint64_t)s.get_int(g, S_TOTAL_SIZE, 0), block_sum = 0;
      const V* blocks = s.get(g, S_BLOCKS);
      if (blocks && blocks->kind == K_LIST) {
        for (const V& b : s.lists[blocks->a]) {
          if (b.kind != K_DICT) continue;
          uint64_t bs = (uint64_t)s.get_int(b, S_SIZE, 0);
          block_sum += bs;
          const V* st = s.get(b, S_STATE);
          if (st && st->kind == K_STR && st->a == S_ACTIVE_ALLOCATED) d->end_allocated = wrap_add(d->end_allocated, bs);
        }
      }
      d->end_reserved = wrap_add(d->end_reserved, total ? total : block_sum);
    }
  }
  if (const V* traces = s.get(root, S_DEVICE_TRACES); traces && traces->kind == K_LIST) {
    const auto& per = s.lists[traces->a];
    // lists[] keeps only list and dict items: the device index is the item's position among all items,
    // which a None (an empty device) would shift. PyTorch writes a list per device, so a non-list item is
    // read as "this file is not what the overview knows" rather than guessed.
    for (size_t dev = 0; dev < per.size() && dev < 1024; dev++) {
      if (per[dev].kind != K_LIST) throw std::runtime_error("overview: a device trace that is not a list");
      uint32_t list = per[dev].a;
      for (const auto& r : s.runs)
        if (r.list == list) {
          DeviceOverview* d = device((int64_t)dev);
          d->entry_runs.push_back({r.first, r.count});
        }
    }
  }
  if (const V* ann = s.get(root, S_ANNOTATIONS); ann && ann->kind == K_LIST) {
    for (const V& a : s.lists[ann->a]) {
      if (a.kind != K_DICT) continue;
      int64_t dv = s.get_int(a, S_DEVICE, 0);
      if (dv >= 0 && dv < 1024 && (size_t)dv < devs.size())
        devs[(size_t)dv].marker_times.push_back(s.get_int(a, S_TIME, 0));
    }
  }

  json::Writer j;
  j.open('{').key("devices").open('[');
  for (size_t dev = 0; dev < devs.size(); dev++) {
    DeviceOverview& d = devs[dev];
    size_t n = 0;
    for (auto [f, c] : d.entry_runs) n += c;
    if (!d.used || n == 0) continue;  // the full open shows devices without a trace
    bool any_time = false;
    for (auto [f, c] : d.entry_runs)
      for (uint32_t e = f; e < f + c && !any_time; e++) any_time = s.t[e] != kNoTimeKey;
    // In place (each entry belongs to one run): times as trace() makes them, the start as import_snapshot
    // computes it from the end state.
    int64_t last_t = 0, alloc = d.end_allocated, res = d.end_reserved;
    size_t k_event = 0;
    for (auto [f, c] : d.entry_runs) {
      for (uint32_t e = f; e < f + c; e++, k_event++) {
        int64_t raw = s.t[e];
        int64_t tu = any_time ? (raw == kNoTime || raw == kNoTimeKey ? last_t : raw) : (int64_t)k_event;
        if (tu < last_t) tu = last_t;
        s.t[e] = last_t = tu;
        alloc = wrap_sub(alloc, (uint64_t)s.da[e]);
      }
      auto it = std::lower_bound(s.dr.begin(), s.dr.end(), std::make_pair(f, std::numeric_limits<int64_t>::min()));
      for (; it != s.dr.end() && it->first < f + c; ++it) res = wrap_sub(res, (uint64_t)it->second);
    }
    const int64_t first_t = s.t[d.entry_runs.front().first];
    const int64_t last_event_t = last_t;
    // The device's time range as time_range_json gives it (annotations are its markers).
    double t0 = (double)first_t, t1 = (double)last_event_t;
    for (int64_t mt : d.marker_times) t0 = std::min(t0, (double)mt), t1 = std::max(t1, (double)mt);
    const double range_t0 = t0, range_t1 = t1;
    if (!(t1 > t0)) t1 = t0 + 1;
    // Buckets exactly as timeline_json cuts them.
    auto ceil_i64 = [](double v) -> int64_t {
      v = std::ceil(v);
      if (std::isnan(v)) return 0;
      if (v >= 9.2e18) return std::numeric_limits<int64_t>::max();
      if (v <= -9.2e18) return std::numeric_limits<int64_t>::min();
      return (int64_t)v;
    };
    auto floor_i64 = [](double v) -> int64_t {
      v = std::floor(v);
      if (std::isnan(v) || v >= 9.2e18) return std::numeric_limits<int64_t>::max();
      if (v <= -9.2e18) return std::numeric_limits<int64_t>::min();
      return (int64_t)v;
    };
    std::vector<int64_t> amin(buckets), amax(buckets), rmin(buckets), rmax(buckets);
    const double w = (t1 - t0) / buckets;
    // One pass over the events in order, the series made as derive() makes it (peak: the first event
    // that reaches the maximum), cut into buckets as timeline_json cuts them. t0 is at or before the first
    // event, so nothing is carried in from before bucket 0 but the start values.
    int64_t a = alloc, r = res, peak_a = alloc, peak_r = res, peak_t = first_t;
    size_t run = 0;
    uint32_t e = d.entry_runs[0].first, run_end = e + d.entry_runs[0].second;
    auto dr_it = std::lower_bound(s.dr.begin(), s.dr.end(), std::make_pair(e, std::numeric_limits<int64_t>::min()));
    bool more = true;
    for (int k = 0; k < buckets; k++) {
      int64_t alo = a, ahi = a, rlo = r, rhi = r;
      const bool last = k == buckets - 1;
      const int64_t bound = last ? floor_i64(t1) : ceil_i64(t0 + (k + 1) * w);
      while (more && (last ? s.t[e] <= bound : s.t[e] < bound)) {
        a = wrap_add(a, (uint64_t)s.da[e]);
        if (dr_it != s.dr.end() && dr_it->first == e) r = wrap_add(r, (uint64_t)dr_it->second), ++dr_it;
        if (a > peak_a) peak_a = a, peak_t = s.t[e];
        if (r > peak_r) peak_r = r;
        alo = std::min(alo, a), ahi = std::max(ahi, a), rlo = std::min(rlo, r), rhi = std::max(rhi, r);
        if (++e == run_end) {
          if (++run < d.entry_runs.size()) {
            e = d.entry_runs[run].first, run_end = e + d.entry_runs[run].second;
            dr_it = std::lower_bound(s.dr.begin(), s.dr.end(), std::make_pair(e, std::numeric_limits<int64_t>::min()));
          } else {
            more = false;
          }
        }
      }
      amin[k] = alo, amax[k] = ahi, rmin[k] = rlo, rmax[k] = rhi;
    }
    j.open('{').kv("device", (int64_t)dev).kv("events", (int64_t)n);
    j.kvd("rangeT0Us", range_t0).kvd("rangeT1Us", range_t1);
    j.kvd("t0Us", t0).kvd("t1Us", t1).kv("buckets", buckets);
    j.kv("peakAllocatedBytes", peak_a).kv("peakReservedBytes", peak_r);
    j.kv("peakAtTimeUs", peak_t);
    j.kv("startAllocatedBytes", alloc).kv("endAllocatedBytes", a);
    write_overview_series(j, amin, amax, rmin, rmax);
    j.close('}');
  }
  j.close(']').close('}');
  return j.s;
}

void write_overview_series(json::Writer& j, const std::vector<int64_t>& amin, const std::vector<int64_t>& amax,
                           const std::vector<int64_t>& rmin, const std::vector<int64_t>& rmax) {
  const std::pair<const char*, const std::vector<int64_t>*> series[] = {
      {"allocatedMin", &amin}, {"allocatedMax", &amax}, {"reservedMin", &rmin}, {"reservedMax", &rmax}};
  for (const auto& [name, v] : series) {
    j.key(name).open('[');
    for (int64_t x : *v) j.item().num(x);
    j.close(']');
  }
}

}  // namespace gpumem
