#include "pickle_reader.h"

#include <sys/mman.h>
#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <thread>

namespace gpumem {

namespace {

std::string hex_byte(uint8_t b) {
  char buf[8];
  snprintf(buf, sizeof buf, "0x%02x", b);
  return buf;
}

const char* code_opcode_name(uint8_t op) {
  switch (op) {
    case 'c': return "GLOBAL";
    case 0x93: return "STACK_GLOBAL";
    case 'R': return "REDUCE";
    case 'b': return "BUILD";
    case 'i': return "INST";
    case 'o': return "OBJ";
    case 0x81: return "NEWOBJ";
    case 0x92: return "NEWOBJ_EX";
    case 0x82: return "EXT1";
    case 0x83: return "EXT2";
    case 0x84: return "EXT4";
    case 'P': return "PERSID";
    case 'Q': return "BINPERSID";
    default: return nullptr;
  }
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += (char)cp;
  } else if (cp < 0x800) {
    out += (char)(0xC0 | (cp >> 6));
    out += (char)(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += (char)(0xE0 | (cp >> 12));
    out += (char)(0x80 | ((cp >> 6) & 0x3F));
    out += (char)(0x80 | (cp & 0x3F));
  } else {
    out += (char)(0xF0 | (cp >> 18));
    out += (char)(0x80 | ((cp >> 12) & 0x3F));
    out += (char)(0x80 | ((cp >> 6) & 0x3F));
    out += (char)(0x80 | (cp & 0x3F));
  }
}

// Protocol 0 UNICODE is raw-unicode-escape: only \uXXXX and \UXXXXXXXX are escapes; other bytes are
// Latin-1 code points.
std::string decode_raw_unicode_escape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); i++) {
    uint8_t c = (uint8_t)s[i];
    if (c == '\\' && i + 1 < s.size() && (s[i + 1] == 'u' || s[i + 1] == 'U')) {
      size_t n = s[i + 1] == 'u' ? 4 : 8;
      if (i + 2 + n <= s.size()) {
        std::string hex(s.substr(i + 2, n));
        char* end = nullptr;
        unsigned long cp = strtoul(hex.c_str(), &end, 16);
        if (end == hex.c_str() + n && cp <= 0x10FFFF) {
          append_utf8(out, (uint32_t)cp);
          i += 1 + n;
          continue;
        }
      }
    }
    append_utf8(out, c);
  }
  return out;
}

// Note [Prefaulting]: a 10 M-event pickle fills ~1.5 GB of fresh memory (values, items, containers);
// with 4 KiB pages half of the parse was the kernel's page-fault path. A helper thread asks the kernel to
// map each buffer's next slice (MADV_POPULATE_WRITE: populates without writing, so it never races with
// the parser's stores) a little ahead of the parser, taking that cost off the parsing core. Without
// the flag (kernels before 5.14) madvise fails and the parser faults pages in itself, as before.
// With rows decoded as they complete (Note [Trace entries as rows]) the tree stays small and is not
// populated; the helper then maps the input (a file mapping, no longer MAP_POPULATE'd) ahead of the
// parser and, when allowed, drops what the parser has passed (Note [Input window]).
class Prefaulter {
 public:
  struct Range {
    uintptr_t begin, end;
  };
  Prefaulter(std::vector<Range> ranges, size_t input_size, const uint8_t* input = nullptr, bool drop_input = false)
      : ranges_(std::move(ranges)), input_(input_size), input_base_(input), drop_input_(drop_input) {
#if defined(MADV_POPULATE_WRITE) && defined(MADV_POPULATE_READ)
    if (input_size >= (32u << 20) && std::thread::hardware_concurrency() > 1) thread_ = std::thread([this] { run(); });
#endif
  }
  ~Prefaulter() {
    stop_.store(true, std::memory_order_relaxed);
    if (thread_.joinable()) thread_.join();
  }
  // The parser's position in the input; slices up to a little ahead of it get populated.
  void progress(size_t pos) { pos_.store(pos, std::memory_order_relaxed); }

 private:
  static constexpr size_t kSlices = 512, kAhead = 8;
  void run() {
#if defined(MADV_POPULATE_WRITE) && defined(MADV_POPULATE_READ)
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    auto slice = [&](uintptr_t begin, uintptr_t end, size_t k, uintptr_t& a, uintptr_t& b) {
      uintptr_t len = end - begin;
      a = (begin + len * k / kSlices) & ~(page - 1), b = (begin + len * (k + 1) / kSlices) & ~(page - 1);
      if (a < begin) a += page;
    };
    bool write_ok = true, read_ok = input_base_ != nullptr;
    for (size_t k = 0; k < kSlices + kAhead && !stop_.load(std::memory_order_relaxed); k++) {
      // Wait until the parser is within kAhead slices of slice k.
      size_t at = 0;
      while (!stop_.load(std::memory_order_relaxed) &&
             (at = (pos_.load(std::memory_order_relaxed) * kSlices) / input_) + kAhead < k)
        std::this_thread::sleep_for(std::chrono::microseconds(500));
      uintptr_t a, b;
      if (k < kSlices) {
        for (const Range& r : ranges_) {
          if (!write_ok) break;
          slice(r.begin, r.end, k, a, b);
          if (b > a && madvise((void*)a, b - a, MADV_POPULATE_WRITE) != 0)
            write_ok = false;  // unsupported: give up quietly
        }
        if (read_ok) {
          slice((uintptr_t)input_base_, (uintptr_t)input_base_ + input_, k, a, b);
          if (b > a && madvise((void*)a, b - a, MADV_POPULATE_READ) != 0) read_ok = false;
        }
      }
      // Note [Input window]: the input is a read-only private file mapping, so dropped pages are read
      // again from the page cache if a string in them is used later; only a window near the parser stays
      // resident, which keeps a 750 MB pickle out of the peak RSS.
      if (drop_input_ && at >= 4) {
        while (dropped_ + 4 <= at && !stop_.load(std::memory_order_relaxed)) {
          slice((uintptr_t)input_base_, (uintptr_t)input_base_ + input_, dropped_++, a, b);
          if (b > a) (void)madvise((void*)a, b - a, MADV_DONTNEED);
        }
      }
    }
#endif
  }
  std::vector<Range> ranges_;
  size_t input_;
  const uint8_t* input_base_;
  bool drop_input_;
  size_t dropped_ = 0;
  std::atomic<size_t> pos_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

template <typename T>
Prefaulter::Range range_of(const std::vector<T>& v) {
  return {(uintptr_t)v.data(), (uintptr_t)(v.data() + v.capacity())};
}

}  // namespace

PickleTree::PickleTree(const uint8_t* data, size_t size, PickleLimits limits)
    : data_(data), size_(size), limits_(limits) {
  parse();
}

PickleTree::PickleTree(const uint8_t* data, size_t size, EntryDecoder* decoder, bool drop_input, PickleLimits limits)
    : data_(data), size_(size), limits_(limits), decoder_(decoder), drop_input_(drop_input) {
  // Tagged refs need every value index below 2^30 (Note [Trace entries as rows]).
  limits_.max_values = std::min<size_t>(limits_.max_values, size_t(1) << 30);
  parse();
}

std::string_view PickleTree::str(uint32_t i) const {
  const PValue& v = at(i);
  if (v.type != PType::Str && v.type != PType::Bytes) return {};
  if (v.flag) return owned_[v.aux];
  return std::string_view(reinterpret_cast<const char*>(data_ + v.raw), v.aux);
}

int64_t PickleTree::as_int(uint32_t i, int64_t fallback) const {
  const PValue& v = at(i);
  switch (v.type) {
    case PType::Int:
    case PType::UInt: return (int64_t)v.raw;
    case PType::Bool: return v.flag ? 1 : 0;
    case PType::Float: {
      double d;
      memcpy(&d, &v.raw, 8);
      if (!(d > -9.2e18 && d < 9.2e18)) return fallback;  // NaN or beyond int64: not a usable integer
      return (int64_t)d;
    }
    default: return fallback;
  }
}

double PickleTree::as_number(uint32_t i, double fallback) const {
  const PValue& v = at(i);
  switch (v.type) {
    case PType::Int: return (double)(int64_t)v.raw;
    case PType::UInt: return (double)v.raw;
    case PType::Bool: return v.flag ? 1 : 0;
    case PType::Float: {
      double d;
      memcpy(&d, &v.raw, 8);
      return d;
    }
    default: return fallback;
  }
}

uint32_t PickleTree::get(uint32_t dict, std::string_view key) const {
  if (at(dict).type != PType::Dict) return kNone;
  const ItemSpan kv = items(dict);
  // Later keys win, like Python's dict built by SETITEMS.
  for (size_t j = kv.size(); j >= 2; j -= 2) {
    uint32_t k = kv[j - 2];
    if (at(k).type == PType::Str && str(k) == key) return kv[j - 1];
  }
  return kNone;
}

// Note [Gentle release]: one munmap of a 1 GB buffer holds the process's mmap lock for ~0.1 s, and
// every page fault or mmap elsewhere in the process (the JS thread answering the panel's first queries)
// waits for it. MADV_DONTNEED in 16 MiB steps frees the same pages under the shared lock; the final
// munmap then has nothing left to free.
namespace {
template <typename T>
void drop_vector_pages(const std::vector<T>& v) {
  const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), step = 16u << 20;
  uintptr_t a = ((uintptr_t)v.data() + page - 1) & ~(page - 1),
            end = ((uintptr_t)(v.data() + v.capacity())) & ~(page - 1);
  for (; a < end; a += step) (void)madvise((void*)a, std::min(step, end - a), MADV_DONTNEED);
}
}  // namespace

void PickleTree::drop_pages() { drop_vector_pages(values_), drop_vector_pages(arena_), drop_vector_pages(containers_); }

uint32_t PickleTree::push(PValue v) {
  if (values_.size() >= limits_.max_values) throw PickleError("pickle has too many values (limit reached)", 0);
  values_.push_back(v);
  return (uint32_t)(values_.size() - 1);
}

uint32_t PickleTree::new_container(PType t) {
  // off = the arena's end at creation, which a rollback returns to (Note [Trace entries as rows]); a
  // first fill moves the container to the end anyway.
  containers_.push_back(Cont{arena_.size(), 0, 0});
  return push(PValue{t, false, (uint32_t)(containers_.size() - 1), 0});
}

void PickleTree::append_items(uint32_t cont, const uint32_t* items, size_t n) {
  if (n == 0) return;
  if (decoder_) {
    if (append_log_.size() < kLogCap)
      append_log_.push_back(cont), append_log_.push_back((uint32_t)values_.size());
    else
      restart_log();
  }
  Cont& c = containers_[cont];
  size_t need = (size_t)c.len + n;
  if (need > limits_.max_container_items || need > UINT32_MAX)
    throw PickleError("a container in the pickle is larger than the reader's limit", 0);
  if (need <= c.cap) {
    std::copy(items, items + n, arena_.begin() + (ptrdiff_t)(c.off + c.len));
  } else if (c.off + c.cap == arena_.size() && c.cap > 0) {
    // At the arena's end: grow in place.
    arena_.insert(arena_.end(), items + (c.cap - c.len), items + n);
    std::copy(items, items + (c.cap - c.len), arena_.begin() + (ptrdiff_t)(c.off + c.len));
    c.cap = (uint32_t)need;
  } else {
    // A first fill takes exactly what it needs; a later growth moves with room to double.
    size_t cap = c.len == 0 ? need : std::max(need, (size_t)c.len * 2);
    if (cap > UINT32_MAX) cap = UINT32_MAX;
    uint64_t off = arena_.size();
    arena_.resize(arena_.size() + cap);
    std::copy(arena_.begin() + (ptrdiff_t)c.off, arena_.begin() + (ptrdiff_t)(c.off + c.len),
              arena_.begin() + (ptrdiff_t)off);
    std::copy(items, items + n, arena_.begin() + (ptrdiff_t)(off + c.len));
    c.off = off;
    c.cap = (uint32_t)cap;
  }
  c.len = (uint32_t)need;
}

bool PickleTree::try_row(std::vector<uint32_t>& stack, std::vector<uint32_t>& max_below, size_t m,
                         std::vector<uint32_t>& memo) {
  const uint32_t v_d = stack[m - 1];
  const uint32_t* kv = stack.data() + m;
  const size_t n = stack.size() - m;
  uint32_t frames = kNone;
  if (!decoder_->is_entry(*this, kv, n, (v_d & kTagged) ? 0 : v_d, frames)) return false;
  // Forget the logs (and everything created before now) whatever happens below, so the next entry has
  // a fresh start.
  struct Clear {
    PickleTree& t;
    ~Clear() { t.restart_log(); }
  } clear{*this};
  auto keep = [&] {
    rows_kept_++;
    return false;
  };
  // The dict: created since the logs started, never filled before, the only stack ref to anything after it.
  if ((v_d & kTagged) || v_d < track_floor_ || v_d >= values_.size()) return keep();
  const uint32_t c_d = values_[v_d].aux;
  if (containers_[c_d].len != 0 || containers_[c_d].cap != 0 || m < 1) return keep();
  if (m >= 2 && max_below[m - 2] > v_d) return keep();  // (+1 encoding: > v_d means some ref ≥ v_d)
  if (decoder_->row_count() >= kMaxTagged) return keep();
  const bool frames_fresh = frames != kNone && !(frames & kTagged) && frames > v_d && at(frames).type != PType::Dict;
  const ItemSpan frame_items = frames_fresh ? items(frames) : ItemSpan{};
  // No older container got items since the dict began.
  for (size_t k = 0; k + 1 < append_log_.size(); k += 2)
    if (append_log_[k] < c_d && append_log_[k + 1] > v_d) return keep();
  // Every memo entry reaching what is forgotten is the dict, its fresh frames list, a fresh frame dict
  // in that list, or a scalar (kept, moved down).
  enum Fate : uint8_t { F_ENTRY, F_STACK, F_FRAME, F_MOVE };
  auto fate_of = [&](uint32_t v, size_t& frame_index) -> int {
    if (v == v_d) return F_ENTRY;
    if (frames_fresh && v == frames) return F_STACK;
    PType ty = values_[v].type;
    if (ty == PType::Dict) {
      for (size_t j = 0; j < frame_items.size(); j++)
        if (frame_items[j] == v) return frame_index = j, F_FRAME;
      return -1;
    }
    return ty == PType::List || ty == PType::Tuple ? -1 : F_MOVE;
  };
  size_t moves = 0;
  for (const auto& [key, v] : memo_log_) {
    uint32_t cur = memo[key];
    if ((cur & kTagged) || cur < v_d) continue;
    size_t j;
    int fate = fate_of(cur, j);
    if (fate < 0) return keep();
    moves += fate == F_MOVE;
  }
  uint32_t stack_id = 0;
  uint32_t row = decoder_->decode(*this, kv, n, v_d, stack_id);
  if (stack_id > kMaxTagged) stack_id = 0;
  const std::vector<uint32_t>& frame_ids = decoder_->fresh_frames();
  // Scalars to keep: old index → new index (v_d, v_d + 1, … in memo order; few: new strings).
  std::vector<std::pair<uint32_t, uint32_t>> moved;
  std::vector<PValue> keep_values;
  if (moves) moved.reserve(moves), keep_values.reserve(moves);
  // Fates from the values before any rewrite (a key logged twice must not see its own new value).
  std::vector<std::pair<uint64_t, uint32_t>> slots;
  slots.reserve(memo_log_.size());
  for (const auto& [key, v] : memo_log_) slots.emplace_back(key, memo[key]);
  for (const auto& [key, cur] : slots) {
    if ((cur & kTagged) || cur < v_d) continue;
    size_t j = 0;
    switch (fate_of(cur, j)) {
      case F_ENTRY: memo[key] = kEntryTag | row; break;
      case F_STACK: memo[key] = kStackTag | stack_id; break;
      case F_FRAME: {
        uint32_t id = j < frame_ids.size() ? frame_ids[j] : UINT32_MAX;
        memo[key] = kFrameTag | std::min(id, kMaxTagged);  // (the importer skips ids it does not have)
        break;
      }
      default: {
        uint32_t to = kNone;
        for (const auto& [from, nv] : moved)
          if (from == cur) to = nv;
        if (to == kNone) {
          to = v_d + (uint32_t)moved.size();
          moved.emplace_back(cur, to);
          keep_values.push_back(values_[cur]);
        }
        memo[key] = to;
      }
    }
  }
  stack.resize(m);
  max_below.resize(m);
  stack[m - 1] = kEntryTag | row;
  max_below[m - 1] = m >= 2 ? max_below[m - 2] : 0;
  arena_.resize(containers_[c_d].off);
  containers_.resize(c_d);
  values_.resize(v_d);
  values_.insert(values_.end(), keep_values.begin(), keep_values.end());
  rows_taken_++;
  return true;
}

void PickleTree::parse() {
  // Snapshot pickles hold about one value per 15 bytes and one container per 100 (measured on the
  // fixtures); sizing once avoids re-moving millions of entries while they grow.
  // With a decoder the tree keeps only what is not a row (segments, frames, strings): a few % of that.
  const size_t shrink = decoder_ ? 16 : 1;
  values_.reserve(std::min<size_t>(size_ / 12 / shrink + 16, limits_.max_values));
  containers_.reserve(size_ / 64 / shrink + 16);
  arena_.reserve(size_ / 4 / shrink + 16);
  // The VM stack, with the running maximum of its untagged refs (+1; 0: none) for rollbacks.
  struct VmStack {
    std::vector<uint32_t> v, mx;
    void push_back(uint32_t x) {
      uint32_t below = mx.empty() ? 0 : mx.back();
      mx.push_back((x & kTagged) ? below : std::max(below, x + 1));
      v.push_back(x);
    }
    void pop_back() { v.pop_back(), mx.pop_back(); }
    void resize(size_t n) { v.resize(n), mx.resize(n); }
    uint32_t back() const { return v.back(); }
    bool empty() const { return v.empty(); }
    size_t size() const { return v.size(); }
    const uint32_t* data() const { return v.data(); }
    uint32_t operator[](size_t i) const { return v[i]; }
  } stack;
  std::vector<size_t> marks;
  std::vector<uint32_t> memo;
  memo.reserve(size_ / 64 + 16);
  // The estimates above are generous: populate what a snapshot pickle typically fills (Note [Prefaulting]).
  std::vector<Prefaulter::Range> populate;
  if (!decoder_)
    populate = {
        {(uintptr_t)values_.data(), (uintptr_t)(values_.data() + size_ / 18)}, range_of(arena_), range_of(containers_)};
  populate.push_back(range_of(memo));
  Prefaulter prefault(std::move(populate), size_, decoder_ ? data_ : nullptr, decoder_ && drop_input_);
  size_t reported = 0;
  size_t pos = 0;
  size_t op_start = 0;

  auto fail = [&](const std::string& msg) -> void { throw PickleError(msg, op_start); };
  auto need = [&](size_t n) {
    if (n > size_ - pos)
      throw PickleError("the pickle is truncated at byte " + std::to_string(size_) + " (an opcode at byte " +
                            std::to_string(op_start) + " needs " + std::to_string(n) +
                            " more bytes); the file was probably cut off while being written or copied",
                        op_start);
  };
  auto rd = [&](size_t n) -> const uint8_t* {
    need(n);
    const uint8_t* p = data_ + pos;
    pos += n;
    return p;
  };
  auto le = [&](size_t n) -> uint64_t {
    const uint8_t* p = rd(n);
    uint64_t v = 0;
    for (size_t k = 0; k < n; k++) v |= (uint64_t)p[k] << (8 * k);
    return v;
  };
  auto line = [&]() -> std::string_view {
    const void* nl = memchr(data_ + pos, '\n', size_ - pos);
    if (!nl) need(size_ - pos + 1);
    size_t len = (const uint8_t*)nl - (data_ + pos);
    std::string_view s(reinterpret_cast<const char*>(data_ + pos), len);
    pos += len + 1;
    return s;
  };
  auto push_stack = [&](uint32_t v) {
    if (stack.size() >= limits_.max_stack) fail("pickle stack is deeper than the reader's limit");
    stack.push_back(v);
  };
  auto pop = [&]() -> uint32_t {
    if (stack.empty() || (!marks.empty() && stack.size() <= marks.back())) fail("malformed pickle: stack underflow");
    uint32_t v = stack.back();
    stack.pop_back();
    return v;
  };
  auto top = [&]() -> uint32_t {
    if (stack.empty()) fail("malformed pickle: empty stack");
    return stack.back();
  };
  auto pop_mark = [&]() -> size_t {
    if (marks.empty()) fail("malformed pickle: no MARK");
    size_t m = marks.back();
    marks.pop_back();
    return m;
  };
  auto str_value = [&](size_t len, PType t) {
    need(len);
    if (len > UINT32_MAX) fail("string longer than 4 GiB");
    uint32_t v = push(PValue{t, false, (uint32_t)len, (uint64_t)pos});
    pos += len;
    push_stack(v);
  };
  auto owned_str = [&](std::string s) {
    owned_.push_back(std::move(s));
    push_stack(push(PValue{PType::Str, true, (uint32_t)(owned_.size() - 1), 0}));
  };
  // Immutable scalars are shared: one node per small integer and for None/True/False (a trace entry's
  // stream, line numbers, flags), which a tree of plain values cannot tell apart from copies.
  uint32_t small_ints[256];
  std::fill(std::begin(small_ints), std::end(small_ints), kNone);
  uint32_t const_nodes[3] = {kNone, kNone, kNone};
  auto int_value = [&](int64_t x) {
    if (x >= 0 && x < 256) {
      uint32_t& n = small_ints[x];
      if (n == kNone) n = push(PValue{PType::Int, false, 0, (uint64_t)x});
      return push_stack(n);
    }
    push_stack(push(PValue{PType::Int, false, 0, (uint64_t)x}));
  };
  if (decoder_) {
    // Created first, so no rollback ever forgets a shared scalar (Note [Trace entries as rows]).
    for (int x = 0; x < 256; x++) small_ints[x] = push(PValue{PType::Int, false, 0, (uint64_t)x});
    const_nodes[0] = push(PValue{PType::None, false, 0, 0});
    const_nodes[1] = push(PValue{PType::Bool, true, 0, 0});
    const_nodes[2] = push(PValue{PType::Bool, false, 0, 0});
    track_floor_ = (uint32_t)values_.size();
  }
  auto const_value = [&](int k, PValue v) {
    if (const_nodes[k] == kNone) const_nodes[k] = push(v);
    push_stack(const_nodes[k]);
  };
  auto long_bytes = [&](size_t n) {
    const uint8_t* p = rd(n);
    if (n == 0) return int_value(0);
    bool neg = p[n - 1] & 0x80;
    if (n > 8) {
      // Fits if the extra high bytes are pure sign extension (or zero for a u64).
      bool sign_ext = true, zero_ext = true;
      for (size_t k = 8; k < n; k++) {
        if (p[k] != (neg ? 0xFF : 0x00)) sign_ext = false;
        if (p[k] != 0) zero_ext = false;
      }
      uint64_t low = 0;
      for (size_t k = 0; k < 8; k++) low |= (uint64_t)p[k] << (8 * k);
      if (sign_ext && ((low >> 63) == (neg ? 1u : 0u))) return int_value((int64_t)low);
      if (zero_ext) return push_stack(push(PValue{PType::UInt, false, 0, low}));
      // Too big to keep exactly: flagged so consumers can refuse to use it as a number.
      return push_stack(push(PValue{PType::BigInt, neg, 0, 0}));
    }
    uint64_t v = 0;
    for (size_t k = 0; k < n; k++) v |= (uint64_t)p[k] << (8 * k);
    if (n == 8) {
      if (neg) return int_value((int64_t)v);
      return int_value((int64_t)v);  // < 2^63, sign bit clear
    }
    if (neg) v |= ~uint64_t(0) << (8 * n);  // sign-extend
    int_value((int64_t)v);
  };
  auto text_int = [&](std::string_view s, bool is_long) {
    std::string t(s);
    if (is_long && !t.empty() && t.back() == 'L') t.pop_back();
    if (!is_long && t == "01") return push_stack(push(PValue{PType::Bool, true, 0, 0}));
    if (!is_long && t == "00") return push_stack(push(PValue{PType::Bool, false, 0, 0}));
    errno = 0;
    char* end = nullptr;
    long long v = strtoll(t.c_str(), &end, 10);
    if (end == t.c_str() || *end != 0) fail("malformed integer in pickle");
    if (errno == ERANGE) {
      unsigned long long u = strtoull(t.c_str(), &end, 10);
      if (errno == ERANGE || t[0] == '-') return push_stack(push(PValue{PType::BigInt, t[0] == '-', 0, 0}));
      return push_stack(push(PValue{PType::UInt, false, 0, (uint64_t)u}));
    }
    int_value(v);
  };
  auto memo_put = [&](uint64_t idx) {
    uint32_t v = top();
    // A real pickle's memo keys count its MEMOIZE/PUT opcodes, so they stay below its byte size.
    if (idx >= limits_.max_memo || idx > size_)
      fail("malformed pickle: memo key " + std::to_string(idx) + " is out of range");
    if (idx >= memo.size()) memo.resize(idx + 1, kNone);
    memo[idx] = v;
    if (decoder_ && !(v & kTagged) && v >= track_floor_) {
      if (memo_log_.size() < kLogCap)
        memo_log_.emplace_back(idx, v);
      else
        restart_log();
    }
  };
  auto memo_get = [&](uint64_t idx) {
    if (idx >= memo.size() || memo[idx] == kNone)
      fail("malformed pickle: memo key " + std::to_string(idx) + " not found");
    push_stack(memo[idx]);
  };
  auto container = [&](uint32_t v, PType want, const char* op) -> uint32_t {
    if (at(v).type != want)
      fail(std::string("malformed pickle: ") + op + " on a value that is not a " +
           (want == PType::Dict ? "dict" : "list"));
    return values_[v].aux;
  };
  auto fill_from_stack = [&](uint32_t v, size_t from) {
    append_items(values_[v].aux, stack.data() + from, stack.size() - from);
    stack.resize(from);
  };
  auto tuple_from = [&](size_t from) {
    uint32_t t = new_container(PType::Tuple);
    fill_from_stack(t, from);
    push_stack(t);
  };
  auto check_items = [&](size_t n) {
    if (n > limits_.max_container_items) fail("a container in the pickle is larger than the reader's limit");
  };

  // Note [Shared pair tuples]: PyTorch 2.12+ gives every trace entry a `pool_id`, a fresh (int, int) tuple
  // that the pickler memoises. The flat path took only scalars, so those entries went the general way, ≈ 3×
  // slower (62 against 18 ms for the 55 k-event fixture). The flat path now reads a pair of ints closed by
  // TUPLE2 as one node per distinct pair, made once and shared: a later memo get of any of them reads an
  // equal tuple, and the tree holds one tuple per pool, not per entry (10 M entries would add ~360 MB).
  struct PairNode {
    uint64_t a, b;
    uint32_t node;
  };
  std::vector<PairNode> pairs_made;
  // A node made earlier is still that tuple unless a rollback forgot it (a row taken by the general path drops
  // what was made after its dict began): checked, not assumed.
  auto still_pair = [&](const PairNode& q) {
    if (q.node >= values_.size() || values_[q.node].type != PType::Tuple) return false;
    const ItemSpan it = items(q.node);
    return it.size() == 2 && (uint64_t)as_int(it[0], -1) == q.a && (uint64_t)as_int(it[1], -1) == q.b;
  };
  auto pair_node = [&](uint64_t a, uint64_t b) -> uint32_t {
    for (size_t i = 0; i < pairs_made.size(); i++) {
      if (pairs_made[i].a != a || pairs_made[i].b != b) continue;
      if (still_pair(pairs_made[i])) return pairs_made[i].node;
      pairs_made.erase(pairs_made.begin() + (std::ptrdiff_t)i);
      break;
    }
    auto int_node = [&](uint64_t x) {
      return x < 256 && small_ints[x] != kNone ? small_ints[x] : push(PValue{PType::Int, false, 0, x});
    };
    const uint32_t items[2] = {int_node(a), int_node(b)};
    const uint32_t t = new_container(PType::Tuple);
    append_items(values_[t].aux, items, 2);
    pairs_made.push_back(PairNode{a, b, t});
    return t;
  };

  // Note [Flat entries]: reads EMPTY_DICT … SETITEMS of a flat trace entry without building the dict; on
  // anything unexpected it restores pos and the memo size and returns false (the caller reads it the
  // general way, from the same EMPTY_DICT).
  auto flat_entry = [&]() -> bool {
    // A private cursor (pos is shared with the general path's out-of-line helpers, so it lives in memory).
    const uint8_t* p = data_ + pos;
    const uint8_t* const end = data_ + size_;
    const size_t memo_size = memo.size(), values_size = values_.size(), log_size = memo_log_.size();
    const size_t append_size = append_log_.size(), pairs_size = pairs_made.size();
    const uint64_t epoch = log_epoch_;
    // Fresh strings go too: a memo key below memo_size that now names one is put again by the general path
    // (same opcodes) before anything can get it, and logged again. So do pair tuples made by this entry.
    auto rewind = [&] {
      memo.resize(memo_size);
      values_.resize(values_size);
      pairs_made.resize(pairs_size);
      if (log_epoch_ == epoch) {  // (after a restart the logs stay restarted)
        memo_log_.resize(log_size);
        append_log_.resize(std::min(append_log_.size(), append_size));
      }
      return false;
    };
    auto have = [&](size_t n) { return (size_t)(end - p) >= n; };
    auto u32 = [&]() {
      uint32_t v;
      memcpy(&v, p, 4);  // little-endian hosts (x86-64, arm64), as pickle is
      p += 4;
      return v;
    };
    // The next opcode, past FRAME markers (protocol 4 frames may start anywhere between opcodes).
    auto op = [&]() -> int {
      while (p < end && *p == 0x95) {
        if (!have(9)) return -1;
        p += 9;
      }
      return p < end ? *p++ : -1;
    };
    // A memo put right after a value: MEMOIZE, BINPUT or LONG_BINPUT (or none): 1, 0, or −1 on a bad key.
    auto memo_after = [&](uint32_t v, uint64_t& key_out) -> int {
      const uint8_t* at = p;
      int o = op();
      uint64_t key;
      if (o == 0x94)
        key = memo.size();
      else if (o == 'q' && have(1))
        key = *p++;
      else if (o == 'r' && have(4))
        key = u32();
      else
        return p = at, 0;
      if (key >= limits_.max_memo || key > size_) return -1;
      if (key == memo.size())
        memo.push_back(v);
      else if (key > memo.size())
        memo.resize(key + 1, kNone), memo[key] = v;
      else
        memo[key] = v;
      key_out = key;
      // Logged like any put, for a rollback of a dict that encloses this one (Note [Trace entries as rows]).
      if (v != kNone && !(v & kTagged) && v >= track_floor_) {
        if (memo_log_.size() < kLogCap)
          memo_log_.emplace_back(key, v);
        else
          restart_log();
      }
      return 1;
    };
    auto memo_ref = [&](uint64_t key, uint32_t& out) {
      if (key >= memo.size() || memo[key] == kNone) return false;
      out = memo[key];
      return true;
    };
    // A fresh string: kept in the tree (it is memoised for later entries).
    auto fresh_str = [&](size_t len, uint32_t& out) {
      if (!have(len) || values_.size() >= limits_.max_values) return false;
      values_.push_back(PValue{PType::Str, false, (uint32_t)len, (uint64_t)(p - data_)});
      out = (uint32_t)(values_.size() - 1);
      p += len;
      uint64_t key;
      return memo_after(out, key) >= 0;
    };
    // A string or memo reference (keys, and string values): BINGET, LONG_BINGET, SHORT_BINUNICODE, BINUNICODE.
    auto str_or_ref = [&](int o, uint32_t& out) __attribute__((always_inline)) {
      switch (o) {
        case 'h': return have(1) && memo_ref(*p++, out);
        case 'j': return have(4) && memo_ref(u32(), out);
        case 0x8c: return have(1) && fresh_str(*p++, out);
        case 'X': return have(4) && fresh_str(u32(), out);
        default: return false;
      }
    };
    // A scalar value (a string or memo reference, an integer, None, a bool): false for anything else.
    auto scalar = [&](int o, FastValue& v) __attribute__((always_inline)) {
      switch (o) {
        case 'h':
        case 'j':
        case 0x8c:
        case 'X':
          v.kind = FastValue::Ref;
          if (!str_or_ref(o, v.ref)) return false;
          break;
        case 'K':
          if (!have(1)) return false;
          v = FastValue{FastValue::Int, 0, *p++};
          break;
        case 'M':
          if (!have(2)) return false;
          v = FastValue{FastValue::Int, 0, (uint64_t)p[0] | (uint64_t)p[1] << 8};
          p += 2;
          break;
        case 'J':
          if (!have(4)) return false;
          v = FastValue{FastValue::Int, 0, (uint64_t)(int64_t)(int32_t)u32()};
          break;
        case 0x8a: {  // LONG1 of at most 8 bytes
          if (!have(1)) return false;
          size_t n = *p;
          if (n > 8 || !have(1 + n)) return false;
          p++;
          uint64_t x = 0;
          for (size_t k = 0; k < n; k++) x |= (uint64_t)p[k] << (8 * k);
          if (n > 0 && n < 8 && (p[n - 1] & 0x80)) x |= ~uint64_t(0) << (8 * n);  // sign-extend
          p += n;
          v = FastValue{FastValue::Int, 0, x};
          break;
        }
        case 'N': v = FastValue{FastValue::None, 0, 0}; break;
        case 0x88: v = FastValue{FastValue::Bool, 0, 1}; break;
        case 0x89: v = FastValue{FastValue::Bool, 0, 0}; break;
        default: return false;
      }
      return true;
    };
    // MARK (key, scalar)… SETITEMS after a frame dict's EMPTY_DICT and memo put.
    constexpr size_t kMaxPairs = 32;
    auto frame_pairs = [&](FastPair* out, size_t& n) {
      n = 0;
      if (op() != '(') return false;
      while (true) {
        int o = op();
        if (o == 'u') return true;
        if (n == kMaxPairs) return false;
        FastPair& pair = out[n++];
        if (!str_or_ref(o, pair.key) || !scalar(op(), pair.value)) return false;
      }
    };
    // A frames list after its EMPTY_LIST: memo put, then items in MARK … APPENDS batches or single APPENDs,
    // each a fresh frame dict or a memo reference to one (pickle's own batching, any mix of them).
    auto frames_list = [&](FastValue& v) {
      uint64_t list_key = 0;
      int list_memo = memo_after(kNone, list_key);  // filled with the stack once known
      if (list_memo < 0) return false;
      constexpr size_t kMaxFrames = 512;  // deeper stacks go the general way
      uint32_t ids[kMaxFrames];
      size_t nf = 0;
      auto item = [&](int o) {
        if (nf == kMaxFrames) return false;
        uint32_t id;
        if (o == '}') {
          uint64_t frame_key = 0;
          int frame_memo = memo_after(kNone, frame_key);
          FastPair fp[kMaxPairs];
          size_t n;
          if (frame_memo < 0 || !frame_pairs(fp, n)) return false;
          id = decoder_->flat_frame(*this, fp, n, (uint32_t)values_size);
          if (id > kMaxTagged) return false;
          if (frame_memo > 0) memo[frame_key] = kFrameTag | id;  // later entries may name it again
        } else if (o == 'h' || o == 'j') {
          uint32_t ref;
          if (!str_or_ref(o, ref) || (id = decoder_->frame_of(*this, ref)) > kMaxTagged) return false;
        } else {
          return false;
        }
        ids[nf++] = id;
        return true;
      };
      while (true) {
        const uint8_t* at = p;
        int o = op();
        if (o == '(') {
          while ((o = op()) != 'e')
            if (!item(o)) return false;
        } else if (o == '}') {
          if (!item(o) || op() != 'a') return false;
        } else if (o == 'h' || o == 'j') {
          // One item and APPEND, or the entry's next key when that key is a memo get (2.12+'s `pool_id` after
          // `frames`): a key names a string, never a frame, so it ends the list (Note [Shared pair tuples]).
          if (!item(o) || op() != 'a') {
            p = at;
            break;
          }
        } else {
          p = at;  // the list is complete
          break;
        }
      }
      uint32_t stack_id = decoder_->flat_stack(ids, nf);
      if (stack_id > kMaxTagged) return false;
      if (list_memo > 0) memo[list_key] = kStackTag | stack_id;
      v = FastValue{FastValue::Stack, 0, stack_id};
      return true;
    };
    // MARK (key, value)… SETITEMS after an entry's EMPTY_DICT and memo put; false on anything else.
    auto dict_pairs = [&](FastPair* out, size_t& n) {
      n = 0;
      if (op() != '(') return false;
      while (true) {
        int o = op();
        if (o == 'u') return true;
        if (n == kMaxPairs) return false;
        FastPair& pair = out[n++];
        if (!str_or_ref(o, pair.key)) return false;
        o = op();
        if (o == ']') {  // a frames list, the only container a flat entry holds
          if (!frames_list(pair.value)) return false;
        } else if (!scalar(o, pair.value)) {
          return false;
        } else if (pair.value.kind == FastValue::Int) {
          // Note [Shared pair tuples]: an int followed by an int and TUPLE2 is a pair (2.12+'s pool_id).
          const uint8_t* after_first = p;
          const int o2 = op();
          if (o2 == 'K' || o2 == 'M' || o2 == 'J' || o2 == 0x8a) {
            FastValue second;
            if (!scalar(o2, second) || op() != 0x86) return false;
            const uint32_t t = pair_node(pair.value.raw, second.raw);
            uint64_t key;
            if (memo_after(t, key) < 0) return false;
            pair.value = FastValue{FastValue::Ref, t, 0};
          } else {
            p = after_first;  // the next key
          }
        }
      }
    };
    uint64_t dict_key = 0;
    int dict_memo = memo_after(kNone, dict_key);  // the slot is filled once the row exists
    if (dict_memo < 0) return rewind();
    FastPair pairs[kMaxPairs];
    size_t npairs = 0;
    if (!dict_pairs(pairs, npairs)) return rewind();
    if (decoder_->row_count() >= kMaxTagged) return rewind();
    uint32_t row;
    // Not a row after all: the general path reads the dict again (its fresh strings, too).
    if (!decoder_->decode_flat(*this, pairs, npairs, (uint32_t)values_size, row)) return rewind();
    const uint32_t ref = kEntryTag | row;
    if (dict_memo > 0) memo[dict_key] = ref;
    pos = (size_t)(p - data_);
    push_stack(ref);
    rows_flat_++;
    return true;
  };

  while (true) {
    op_start = pos;
    if (pos - reported >= (1u << 20)) prefault.progress(reported = pos);
    if (pos >= size_)
      throw PickleError("the pickle ends at byte " + std::to_string(size_) +
                            " without a STOP opcode; the file is truncated (was it still being written?)",
                        size_);
    uint8_t op = data_[pos++];
    switch (op) {
      case 0x80: {  // PROTO
        protocol_ = (int)le(1);
        if (protocol_ > 5)
          fail("pickle protocol " + std::to_string(protocol_) + " is newer than this reader supports (2–5)");
        break;
      }
      case 0x95: le(8); break;  // FRAME: framing is only a read-ahead hint
      case '.': {               // STOP
        if (stack.empty()) fail("malformed pickle: STOP with an empty stack");
        root_ = stack.back();
        if (getenv("GPUMEM_READER_TIMINGS"))
          fprintf(stderr, "values %zu/%zu arena %zu/%zu containers %zu/%zu memo %zu/%zu\n", values_.size(),
                  values_.capacity(), arena_.size(), arena_.capacity(), containers_.size(), containers_.capacity(),
                  memo.size(), memo.capacity());
        return;
      }
      case '(': marks.push_back(stack.size()); break;
      case '}':
        if (decoder_ && flat_entry()) break;
        push_stack(new_container(PType::Dict));
        break;
      case ']': push_stack(new_container(PType::List)); break;
      case ')': push_stack(new_container(PType::Tuple)); break;
      case 0x8f: push_stack(new_container(PType::List)); break;  // EMPTY_SET: kept as a list
      case 't': tuple_from(pop_mark()); break;
      case 0x91: {  // FROZENSET
        size_t m = pop_mark();
        tuple_from(m);
        break;
      }
      case 0x85:
      case 0x86:
      case 0x87: {
        size_t n = op - 0x84;
        if (stack.size() < n || (!marks.empty() && stack.size() - n < marks.back()))
          fail("malformed pickle: stack underflow");
        tuple_from(stack.size() - n);
        break;
      }
      case 'l': {  // LIST
        size_t m = pop_mark();
        uint32_t l = new_container(PType::List);
        fill_from_stack(l, m);
        push_stack(l);
        break;
      }
      case 'd': {  // DICT
        size_t m = pop_mark();
        if ((stack.size() - m) % 2) fail("malformed pickle: DICT with an odd number of items");
        uint32_t d = new_container(PType::Dict);
        fill_from_stack(d, m);
        push_stack(d);
        break;
      }
      case 's': {  // SETITEM
        uint32_t v = pop(), k = pop();
        uint32_t c = container(top(), PType::Dict, "SETITEM");
        check_items(containers_[c].len + 2);
        const uint32_t kv[2] = {k, v};
        append_items(c, kv, 2);
        break;
      }
      case 'u': {  // SETITEMS
        size_t m = pop_mark();
        if ((stack.size() - m) % 2) fail("malformed pickle: SETITEMS with an odd number of items");
        if (m == 0) fail("malformed pickle: SETITEMS without a dict");
        uint32_t c = container(stack[m - 1], PType::Dict, "SETITEMS");
        if (decoder_ && try_row(stack.v, stack.mx, m, memo)) break;
        check_items(containers_[c].len + stack.size() - m);
        append_items(c, stack.data() + m, stack.size() - m);
        stack.resize(m);
        break;
      }
      case 'a': {  // APPEND
        uint32_t v = pop();
        uint32_t c = container(top(), PType::List, "APPEND");
        check_items(containers_[c].len + 1);
        append_items(c, &v, 1);
        break;
      }
      case 'e':     // APPENDS
      case 0x90: {  // ADDITEMS (sets are kept as lists)
        size_t m = pop_mark();
        if (m == 0) fail("malformed pickle: APPENDS without a list");
        uint32_t c = container(stack[m - 1], PType::List, op == 'e' ? "APPENDS" : "ADDITEMS");
        check_items(containers_[c].len + stack.size() - m);
        append_items(c, stack.data() + m, stack.size() - m);
        stack.resize(m);
        break;
      }
      case 'J': int_value((int32_t)(uint32_t)le(4)); break;
      case 'K': int_value((int64_t)le(1)); break;
      case 'M': int_value((int64_t)le(2)); break;
      case 'I': text_int(line(), false); break;
      case 'L': text_int(line(), true); break;
      case 0x8a: long_bytes((size_t)le(1)); break;
      case 0x8b: {
        uint64_t n = le(4);
        if (n & 0x80000000u) fail("malformed pickle: negative LONG4 length");
        long_bytes((size_t)n);
        break;
      }
      case 'G': {
        const uint8_t* p = rd(8);
        uint64_t bits = 0;
        for (int k = 0; k < 8; k++) bits = (bits << 8) | p[k];  // big-endian
        push_stack(push(PValue{PType::Float, false, 0, bits}));
        break;
      }
      case 'F': {
        std::string t(line());
        char* end = nullptr;
        double d = strtod(t.c_str(), &end);
        if (end == t.c_str()) fail("malformed float in pickle");
        uint64_t bits;
        memcpy(&bits, &d, 8);
        push_stack(push(PValue{PType::Float, false, 0, bits}));
        break;
      }
      case 'N': const_value(0, PValue{PType::None, false, 0, 0}); break;
      case 0x88: const_value(1, PValue{PType::Bool, true, 0, 0}); break;
      case 0x89: const_value(2, PValue{PType::Bool, false, 0, 0}); break;
      case 'X': str_value((size_t)le(4), PType::Str); break;
      case 0x8c: str_value((size_t)le(1), PType::Str); break;
      case 0x8d: str_value((size_t)le(8), PType::Str); break;
      case 'V': owned_str(decode_raw_unicode_escape(line())); break;
      case 'T': str_value((size_t)le(4), PType::Str); break;  // Python 2 str: bytes read as Latin-1-ish text
      case 'U': str_value((size_t)le(1), PType::Str); break;
      case 'S': {
        std::string_view s = line();
        if (s.size() >= 2 && (s.front() == '\'' || s.front() == '"') && s.back() == s.front())
          s = s.substr(1, s.size() - 2);
        owned_str(std::string(s));
        break;
      }
      case 'B': str_value((size_t)le(4), PType::Bytes); break;
      case 'C': str_value((size_t)le(1), PType::Bytes); break;
      case 0x8e:
      case 0x96: str_value((size_t)le(8), PType::Bytes); break;
      case 'q': memo_put(le(1)); break;
      case 'r': memo_put(le(4)); break;
      case 'p': {
        std::string t(line());
        memo_put(strtoull(t.c_str(), nullptr, 10));
        break;
      }
      case 0x94: memo_put(memo.size()); break;
      case 'h': memo_get(le(1)); break;
      case 'j': memo_get(le(4)); break;
      case 'g': {
        std::string t(line());
        memo_get(strtoull(t.c_str(), nullptr, 10));
        break;
      }
      case '0': pop(); break;
      case '1': stack.resize(pop_mark()); break;
      case '2': push_stack(top()); break;
      case 0x97:
      case 0x98:
        fail("this pickle uses out-of-band buffers (opcode " +
             std::string(op == 0x97 ? "NEXT_BUFFER" : "READONLY_BUFFER") + " at byte " + std::to_string(op_start) +
             "), which a file cannot carry; snapshot pickles never do");
        break;
      default: {
        if (const char* name = code_opcode_name(op)) {
          std::string what;
          if (op == 'c' || op == 'i') {
            std::string mod(line()), nm(line());
            what = " '" + mod + " " + nm + "'";
          } else if (op == 0x93 && stack.size() >= 2 && at(stack[stack.size() - 1]).type == PType::Str &&
                     at(stack[stack.size() - 2]).type == PType::Str) {
            what = " '" + std::string(str(stack[stack.size() - 2])) + " " + std::string(str(stack.back())) + "'";
          }
          throw PickleError(std::string("this pickle contains code (opcode ") + name + what + " at byte " +
                                std::to_string(op_start) +
                                "); snapshot pickles contain only plain data — not loading it. If you trust the "
                                "file, load it with Python and re-save it with torch.cuda.memory._dump_snapshot",
                            op_start);
        }
        fail("not a pickle, or a damaged one: unknown opcode " + hex_byte(op) + " at byte " + std::to_string(op_start));
      }
    }
  }
}

}  // namespace gpumem
