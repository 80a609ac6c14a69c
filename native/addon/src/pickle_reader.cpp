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

std::string hexByte(uint8_t b) {
  char buf[8];
  snprintf(buf, sizeof buf, "0x%02x", b);
  return buf;
}

const char* codeOpcodeName(uint8_t op) {
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

void appendUtf8(std::string& out, uint32_t cp) {
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
std::string decodeRawUnicodeEscape(std::string_view s) {
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
          appendUtf8(out, (uint32_t)cp);
          i += 1 + n;
          continue;
        }
      }
    }
    appendUtf8(out, c);
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
  Prefaulter(std::vector<Range> ranges, size_t inputSize, const uint8_t* input = nullptr, bool dropInput = false)
      : ranges_(std::move(ranges)), input_(inputSize), inputBase_(input), dropInput_(dropInput) {
#if defined(MADV_POPULATE_WRITE) && defined(MADV_POPULATE_READ)
    if (inputSize >= (32u << 20) && std::thread::hardware_concurrency() > 1) thread_ = std::thread([this] { run(); });
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
    bool writeOk = true, readOk = inputBase_ != nullptr;
    for (size_t k = 0; k < kSlices + kAhead && !stop_.load(std::memory_order_relaxed); k++) {
      // Wait until the parser is within kAhead slices of slice k.
      size_t at = 0;
      while (!stop_.load(std::memory_order_relaxed) &&
             (at = (pos_.load(std::memory_order_relaxed) * kSlices) / input_) + kAhead < k)
        std::this_thread::sleep_for(std::chrono::microseconds(500));
      uintptr_t a, b;
      if (k < kSlices) {
        for (const Range& r : ranges_) {
          if (!writeOk) break;
          slice(r.begin, r.end, k, a, b);
          if (b > a && madvise((void*)a, b - a, MADV_POPULATE_WRITE) != 0)
            writeOk = false;  // unsupported: give up quietly
        }
        if (readOk) {
          slice((uintptr_t)inputBase_, (uintptr_t)inputBase_ + input_, k, a, b);
          if (b > a && madvise((void*)a, b - a, MADV_POPULATE_READ) != 0) readOk = false;
        }
      }
      // Note [Input window]: the input is a read-only private file mapping, so dropped pages are read
      // again from the page cache if a string in them is used later; only a window near the parser stays
      // resident, which keeps a 750 MB pickle out of the peak RSS.
      if (dropInput_ && at >= 4) {
        while (dropped_ + 4 <= at && !stop_.load(std::memory_order_relaxed)) {
          slice((uintptr_t)inputBase_, (uintptr_t)inputBase_ + input_, dropped_++, a, b);
          if (b > a) (void)madvise((void*)a, b - a, MADV_DONTNEED);
        }
      }
    }
#endif
  }
  std::vector<Range> ranges_;
  size_t input_;
  const uint8_t* inputBase_;
  bool dropInput_;
  size_t dropped_ = 0;
  std::atomic<size_t> pos_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

template <typename T>
Prefaulter::Range rangeOf(const std::vector<T>& v) {
  return {(uintptr_t)v.data(), (uintptr_t)(v.data() + v.capacity())};
}

}  // namespace

PickleTree::PickleTree(const uint8_t* data, size_t size, PickleLimits limits)
    : data_(data), size_(size), limits_(limits) {
  parse();
}

PickleTree::PickleTree(const uint8_t* data, size_t size, EntryDecoder* decoder, bool dropInput, PickleLimits limits)
    : data_(data), size_(size), limits_(limits), decoder_(decoder), dropInput_(dropInput) {
  // Tagged refs need every value index below 2^30 (Note [Trace entries as rows]).
  limits_.maxValues = std::min<size_t>(limits_.maxValues, size_t(1) << 30);
  parse();
}

std::string_view PickleTree::str(uint32_t i) const {
  const PValue& v = at(i);
  if (v.type != PType::Str && v.type != PType::Bytes) return {};
  if (v.flag) return owned_[v.aux];
  return std::string_view(reinterpret_cast<const char*>(data_ + v.raw), v.aux);
}

int64_t PickleTree::asInt(uint32_t i, int64_t fallback) const {
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

double PickleTree::asNumber(uint32_t i, double fallback) const {
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
void dropVectorPages(const std::vector<T>& v) {
  const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), step = 16u << 20;
  uintptr_t a = ((uintptr_t)v.data() + page - 1) & ~(page - 1),
            end = ((uintptr_t)(v.data() + v.capacity())) & ~(page - 1);
  for (; a < end; a += step) (void)madvise((void*)a, std::min(step, end - a), MADV_DONTNEED);
}
}  // namespace

void PickleTree::dropPages() { dropVectorPages(values_), dropVectorPages(arena_), dropVectorPages(containers_); }

uint32_t PickleTree::push(PValue v) {
  if (values_.size() >= limits_.maxValues) throw PickleError("pickle has too many values (limit reached)", 0);
  values_.push_back(v);
  return (uint32_t)(values_.size() - 1);
}

uint32_t PickleTree::newContainer(PType t) {
  // off = the arena's end at creation, which a rollback returns to (Note [Trace entries as rows]); a
  // first fill moves the container to the end anyway.
  containers_.push_back(Cont{arena_.size(), 0, 0});
  return push(PValue{t, false, (uint32_t)(containers_.size() - 1), 0});
}

void PickleTree::appendItems(uint32_t cont, const uint32_t* items, size_t n) {
  if (n == 0) return;
  if (decoder_) {
    if (appendLog_.size() < kLogCap)
      appendLog_.push_back(cont), appendLog_.push_back((uint32_t)values_.size());
    else
      restartLog();
  }
  Cont& c = containers_[cont];
  size_t need = (size_t)c.len + n;
  if (need > limits_.maxContainerItems || need > UINT32_MAX)
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

bool PickleTree::tryRow(std::vector<uint32_t>& stack, std::vector<uint32_t>& maxBelow, size_t m,
                        std::vector<uint32_t>& memo) {
  const uint32_t vD = stack[m - 1];
  const uint32_t* kv = stack.data() + m;
  const size_t n = stack.size() - m;
  uint32_t frames = kNone;
  if (!decoder_->isEntry(*this, kv, n, (vD & kTagged) ? 0 : vD, frames)) return false;
  // Forget the logs (and everything created before now) whatever happens below, so the next entry has
  // a fresh start.
  struct Clear {
    PickleTree& t;
    ~Clear() { t.restartLog(); }
  } clear{*this};
  auto keep = [&] {
    rowsKept_++;
    return false;
  };
  // The dict: created since the logs started, never filled before, the only stack ref to anything after it.
  if ((vD & kTagged) || vD < trackFloor_ || vD >= values_.size()) return keep();
  const uint32_t cD = values_[vD].aux;
  if (containers_[cD].len != 0 || containers_[cD].cap != 0 || m < 1) return keep();
  if (m >= 2 && maxBelow[m - 2] > vD) return keep();  // (+1 encoding: > vD means some ref ≥ vD)
  if (decoder_->rowCount() >= kMaxTagged) return keep();
  const bool framesFresh = frames != kNone && !(frames & kTagged) && frames > vD && at(frames).type != PType::Dict;
  const ItemSpan frameItems = framesFresh ? items(frames) : ItemSpan{};
  // No older container got items since the dict began.
  for (size_t k = 0; k + 1 < appendLog_.size(); k += 2)
    if (appendLog_[k] < cD && appendLog_[k + 1] > vD) return keep();
  // Every memo entry reaching what is forgotten is the dict, its fresh frames list, a fresh frame dict
  // in that list, or a scalar (kept, moved down).
  enum Fate : uint8_t { F_ENTRY, F_STACK, F_FRAME, F_MOVE };
  auto fateOf = [&](uint32_t v, size_t& frameIndex) -> int {
    if (v == vD) return F_ENTRY;
    if (framesFresh && v == frames) return F_STACK;
    PType ty = values_[v].type;
    if (ty == PType::Dict) {
      for (size_t j = 0; j < frameItems.size(); j++)
        if (frameItems[j] == v) return frameIndex = j, F_FRAME;
      return -1;
    }
    return ty == PType::List || ty == PType::Tuple ? -1 : F_MOVE;
  };
  size_t moves = 0;
  for (const auto& [key, v] : memoLog_) {
    uint32_t cur = memo[key];
    if ((cur & kTagged) || cur < vD) continue;
    size_t j;
    int fate = fateOf(cur, j);
    if (fate < 0) return keep();
    moves += fate == F_MOVE;
  }
  uint32_t stackId = 0;
  uint32_t row = decoder_->decode(*this, kv, n, vD, stackId);
  if (stackId > kMaxTagged) stackId = 0;
  const std::vector<uint32_t>& frameIds = decoder_->freshFrames();
  // Scalars to keep: old index → new index (vD, vD + 1, … in memo order; few: new strings).
  std::vector<std::pair<uint32_t, uint32_t>> moved;
  std::vector<PValue> keepValues;
  if (moves) moved.reserve(moves), keepValues.reserve(moves);
  // Fates from the values before any rewrite (a key logged twice must not see its own new value).
  std::vector<std::pair<uint64_t, uint32_t>> slots;
  slots.reserve(memoLog_.size());
  for (const auto& [key, v] : memoLog_) slots.emplace_back(key, memo[key]);
  for (const auto& [key, cur] : slots) {
    if ((cur & kTagged) || cur < vD) continue;
    size_t j = 0;
    switch (fateOf(cur, j)) {
      case F_ENTRY: memo[key] = kEntryTag | row; break;
      case F_STACK: memo[key] = kStackTag | stackId; break;
      case F_FRAME: {
        uint32_t id = j < frameIds.size() ? frameIds[j] : UINT32_MAX;
        memo[key] = kFrameTag | std::min(id, kMaxTagged);  // (the importer skips ids it does not have)
        break;
      }
      default: {
        uint32_t to = kNone;
        for (const auto& [from, nv] : moved)
          if (from == cur) to = nv;
        if (to == kNone) {
          to = vD + (uint32_t)moved.size();
          moved.emplace_back(cur, to);
          keepValues.push_back(values_[cur]);
        }
        memo[key] = to;
      }
    }
  }
  stack.resize(m);
  maxBelow.resize(m);
  stack[m - 1] = kEntryTag | row;
  maxBelow[m - 1] = m >= 2 ? maxBelow[m - 2] : 0;
  arena_.resize(containers_[cD].off);
  containers_.resize(cD);
  values_.resize(vD);
  values_.insert(values_.end(), keepValues.begin(), keepValues.end());
  rowsTaken_++;
  return true;
}

void PickleTree::parse() {
  // Snapshot pickles hold about one value per 15 bytes and one container per 100 (measured on the
  // fixtures); sizing once avoids re-moving millions of entries while they grow.
  // With a decoder the tree keeps only what is not a row (segments, frames, strings): a few % of that.
  const size_t shrink = decoder_ ? 16 : 1;
  values_.reserve(std::min<size_t>(size_ / 12 / shrink + 16, limits_.maxValues));
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
        {(uintptr_t)values_.data(), (uintptr_t)(values_.data() + size_ / 18)}, rangeOf(arena_), rangeOf(containers_)};
  populate.push_back(rangeOf(memo));
  Prefaulter prefault(std::move(populate), size_, decoder_ ? data_ : nullptr, decoder_ && dropInput_);
  size_t reported = 0;
  size_t pos = 0;
  size_t opStart = 0;

  auto fail = [&](const std::string& msg) -> void { throw PickleError(msg, opStart); };
  auto need = [&](size_t n) {
    if (n > size_ - pos)
      throw PickleError("the pickle is truncated at byte " + std::to_string(size_) + " (an opcode at byte " +
                            std::to_string(opStart) + " needs " + std::to_string(n) +
                            " more bytes); the file was probably cut off while being written or copied",
                        opStart);
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
  auto pushStack = [&](uint32_t v) {
    if (stack.size() >= limits_.maxStack) fail("pickle stack is deeper than the reader's limit");
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
  auto popMark = [&]() -> size_t {
    if (marks.empty()) fail("malformed pickle: no MARK");
    size_t m = marks.back();
    marks.pop_back();
    return m;
  };
  auto strValue = [&](size_t len, PType t) {
    need(len);
    if (len > UINT32_MAX) fail("string longer than 4 GiB");
    uint32_t v = push(PValue{t, false, (uint32_t)len, (uint64_t)pos});
    pos += len;
    pushStack(v);
  };
  auto ownedStr = [&](std::string s) {
    owned_.push_back(std::move(s));
    pushStack(push(PValue{PType::Str, true, (uint32_t)(owned_.size() - 1), 0}));
  };
  // Immutable scalars are shared: one node per small integer and for None/True/False (a trace entry's
  // stream, line numbers, flags), which a tree of plain values cannot tell apart from copies.
  uint32_t smallInts[256];
  std::fill(std::begin(smallInts), std::end(smallInts), kNone);
  uint32_t constNodes[3] = {kNone, kNone, kNone};
  auto intValue = [&](int64_t x) {
    if (x >= 0 && x < 256) {
      uint32_t& n = smallInts[x];
      if (n == kNone) n = push(PValue{PType::Int, false, 0, (uint64_t)x});
      return pushStack(n);
    }
    pushStack(push(PValue{PType::Int, false, 0, (uint64_t)x}));
  };
  if (decoder_) {
    // Created first, so no rollback ever forgets a shared scalar (Note [Trace entries as rows]).
    for (int x = 0; x < 256; x++) smallInts[x] = push(PValue{PType::Int, false, 0, (uint64_t)x});
    constNodes[0] = push(PValue{PType::None, false, 0, 0});
    constNodes[1] = push(PValue{PType::Bool, true, 0, 0});
    constNodes[2] = push(PValue{PType::Bool, false, 0, 0});
    trackFloor_ = (uint32_t)values_.size();
  }
  auto constValue = [&](int k, PValue v) {
    if (constNodes[k] == kNone) constNodes[k] = push(v);
    pushStack(constNodes[k]);
  };
  auto longBytes = [&](size_t n) {
    const uint8_t* p = rd(n);
    if (n == 0) return intValue(0);
    bool neg = p[n - 1] & 0x80;
    if (n > 8) {
      // Fits if the extra high bytes are pure sign extension (or zero for a u64).
      bool signExt = true, zeroExt = true;
      for (size_t k = 8; k < n; k++) {
        if (p[k] != (neg ? 0xFF : 0x00)) signExt = false;
        if (p[k] != 0) zeroExt = false;
      }
      uint64_t low = 0;
      for (size_t k = 0; k < 8; k++) low |= (uint64_t)p[k] << (8 * k);
      if (signExt && ((low >> 63) == (neg ? 1u : 0u))) return intValue((int64_t)low);
      if (zeroExt) return pushStack(push(PValue{PType::UInt, false, 0, low}));
      // Too big to keep exactly: flagged so consumers can refuse to use it as a number.
      return pushStack(push(PValue{PType::BigInt, neg, 0, 0}));
    }
    uint64_t v = 0;
    for (size_t k = 0; k < n; k++) v |= (uint64_t)p[k] << (8 * k);
    if (n == 8) {
      if (neg) return intValue((int64_t)v);
      return intValue((int64_t)v);  // < 2^63, sign bit clear
    }
    if (neg) v |= ~uint64_t(0) << (8 * n);  // sign-extend
    intValue((int64_t)v);
  };
  auto textInt = [&](std::string_view s, bool isLong) {
    std::string t(s);
    if (isLong && !t.empty() && t.back() == 'L') t.pop_back();
    if (!isLong && t == "01") return pushStack(push(PValue{PType::Bool, true, 0, 0}));
    if (!isLong && t == "00") return pushStack(push(PValue{PType::Bool, false, 0, 0}));
    errno = 0;
    char* end = nullptr;
    long long v = strtoll(t.c_str(), &end, 10);
    if (end == t.c_str() || *end != 0) fail("malformed integer in pickle");
    if (errno == ERANGE) {
      unsigned long long u = strtoull(t.c_str(), &end, 10);
      if (errno == ERANGE || t[0] == '-') return pushStack(push(PValue{PType::BigInt, t[0] == '-', 0, 0}));
      return pushStack(push(PValue{PType::UInt, false, 0, (uint64_t)u}));
    }
    intValue(v);
  };
  auto memoPut = [&](uint64_t idx) {
    uint32_t v = top();
    // A real pickle's memo keys count its MEMOIZE/PUT opcodes, so they stay below its byte size.
    if (idx >= limits_.maxMemo || idx > size_)
      fail("malformed pickle: memo key " + std::to_string(idx) + " is out of range");
    if (idx >= memo.size()) memo.resize(idx + 1, kNone);
    memo[idx] = v;
    if (decoder_ && !(v & kTagged) && v >= trackFloor_) {
      if (memoLog_.size() < kLogCap)
        memoLog_.emplace_back(idx, v);
      else
        restartLog();
    }
  };
  auto memoGet = [&](uint64_t idx) {
    if (idx >= memo.size() || memo[idx] == kNone)
      fail("malformed pickle: memo key " + std::to_string(idx) + " not found");
    pushStack(memo[idx]);
  };
  auto container = [&](uint32_t v, PType want, const char* op) -> uint32_t {
    if (at(v).type != want)
      fail(std::string("malformed pickle: ") + op + " on a value that is not a " +
           (want == PType::Dict ? "dict" : "list"));
    return values_[v].aux;
  };
  auto fillFromStack = [&](uint32_t v, size_t from) {
    appendItems(values_[v].aux, stack.data() + from, stack.size() - from);
    stack.resize(from);
  };
  auto tupleFrom = [&](size_t from) {
    uint32_t t = newContainer(PType::Tuple);
    fillFromStack(t, from);
    pushStack(t);
  };
  auto checkItems = [&](size_t n) {
    if (n > limits_.maxContainerItems) fail("a container in the pickle is larger than the reader's limit");
  };

  // Note [Flat entries]: reads EMPTY_DICT … SETITEMS of a flat trace entry without building the dict; on
  // anything unexpected it restores pos and the memo size and returns false (the caller reads it the
  // general way, from the same EMPTY_DICT).
  auto flatEntry = [&]() -> bool {
    // A private cursor (pos is shared with the general path's out-of-line helpers, so it lives in memory).
    const uint8_t* p = data_ + pos;
    const uint8_t* const end = data_ + size_;
    const size_t memoSize = memo.size(), valuesSize = values_.size(), logSize = memoLog_.size();
    const uint64_t epoch = logEpoch_;
    // Fresh strings go too: a memo key below memoSize that now names one is put again by the general path
    // (same opcodes) before anything can get it, and logged again.
    auto rewind = [&] {
      memo.resize(memoSize);
      values_.resize(valuesSize);
      if (logEpoch_ == epoch) memoLog_.resize(logSize);  // (after a restart the log stays restarted)
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
    auto memoAfter = [&](uint32_t v, uint64_t& keyOut) -> int {
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
      if (key >= limits_.maxMemo || key > size_) return -1;
      if (key == memo.size())
        memo.push_back(v);
      else if (key > memo.size())
        memo.resize(key + 1, kNone), memo[key] = v;
      else
        memo[key] = v;
      keyOut = key;
      // Logged like any put, for a rollback of a dict that encloses this one (Note [Trace entries as rows]).
      if (v != kNone && !(v & kTagged) && v >= trackFloor_) {
        if (memoLog_.size() < kLogCap)
          memoLog_.emplace_back(key, v);
        else
          restartLog();
      }
      return 1;
    };
    auto memoRef = [&](uint64_t key, uint32_t& out) {
      if (key >= memo.size() || memo[key] == kNone) return false;
      out = memo[key];
      return true;
    };
    // A fresh string: kept in the tree (it is memoised for later entries).
    auto freshStr = [&](size_t len, uint32_t& out) {
      if (!have(len) || values_.size() >= limits_.maxValues) return false;
      values_.push_back(PValue{PType::Str, false, (uint32_t)len, (uint64_t)(p - data_)});
      out = (uint32_t)(values_.size() - 1);
      p += len;
      uint64_t key;
      return memoAfter(out, key) >= 0;
    };
    // A string or memo reference (keys, and string values): BINGET, LONG_BINGET, SHORT_BINUNICODE, BINUNICODE.
    auto strOrRef = [&](int o, uint32_t& out) __attribute__((always_inline)) {
      switch (o) {
        case 'h': return have(1) && memoRef(*p++, out);
        case 'j': return have(4) && memoRef(u32(), out);
        case 0x8c: return have(1) && freshStr(*p++, out);
        case 'X': return have(4) && freshStr(u32(), out);
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
          if (!strOrRef(o, v.ref)) return false;
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
    auto framePairs = [&](FastPair* out, size_t& n) {
      n = 0;
      if (op() != '(') return false;
      while (true) {
        int o = op();
        if (o == 'u') return true;
        if (n == kMaxPairs) return false;
        FastPair& pair = out[n++];
        if (!strOrRef(o, pair.key) || !scalar(op(), pair.value)) return false;
      }
    };
    // A frames list after its EMPTY_LIST: memo put, then items in MARK … APPENDS batches or single APPENDs,
    // each a fresh frame dict or a memo reference to one (pickle's own batching, any mix of them).
    auto framesList = [&](FastValue& v) {
      uint64_t listKey = 0;
      int listMemo = memoAfter(kNone, listKey);  // filled with the stack once known
      if (listMemo < 0) return false;
      constexpr size_t kMaxFrames = 512;  // deeper stacks go the general way
      uint32_t ids[kMaxFrames];
      size_t nf = 0;
      auto item = [&](int o) {
        if (nf == kMaxFrames) return false;
        uint32_t id;
        if (o == '}') {
          uint64_t frameKey = 0;
          int frameMemo = memoAfter(kNone, frameKey);
          FastPair fp[kMaxPairs];
          size_t n;
          if (frameMemo < 0 || !framePairs(fp, n)) return false;
          id = decoder_->flatFrame(*this, fp, n, (uint32_t)valuesSize);
          if (id > kMaxTagged) return false;
          if (frameMemo > 0) memo[frameKey] = kFrameTag | id;  // later entries may name it again
        } else if (o == 'h' || o == 'j') {
          uint32_t ref;
          if (!strOrRef(o, ref) || (id = decoder_->frameOf(*this, ref)) > kMaxTagged) return false;
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
        } else if (o == '}' || o == 'h' || o == 'j') {
          if (!item(o) || op() != 'a') return false;
        } else {
          p = at;  // the list is complete
          break;
        }
      }
      uint32_t stackId = decoder_->flatStack(ids, nf);
      if (stackId > kMaxTagged) return false;
      if (listMemo > 0) memo[listKey] = kStackTag | stackId;
      v = FastValue{FastValue::Stack, 0, stackId};
      return true;
    };
    // MARK (key, value)… SETITEMS after an entry's EMPTY_DICT and memo put; false on anything else.
    auto dictPairs = [&](FastPair* out, size_t& n) {
      n = 0;
      if (op() != '(') return false;
      while (true) {
        int o = op();
        if (o == 'u') return true;
        if (n == kMaxPairs) return false;
        FastPair& pair = out[n++];
        if (!strOrRef(o, pair.key)) return false;
        o = op();
        if (o == ']') {  // a frames list, the only container a flat entry holds
          if (!framesList(pair.value)) return false;
        } else if (!scalar(o, pair.value)) {
          return false;
        }
      }
    };
    uint64_t dictKey = 0;
    int dictMemo = memoAfter(kNone, dictKey);  // the slot is filled once the row exists
    if (dictMemo < 0) return rewind();
    FastPair pairs[kMaxPairs];
    size_t npairs = 0;
    if (!dictPairs(pairs, npairs)) return rewind();
    if (decoder_->rowCount() >= kMaxTagged) return rewind();
    uint32_t row;
    // Not a row after all: the general path reads the dict again (its fresh strings, too).
    if (!decoder_->decodeFlat(*this, pairs, npairs, (uint32_t)valuesSize, row)) return rewind();
    const uint32_t ref = kEntryTag | row;
    if (dictMemo > 0) memo[dictKey] = ref;
    pos = (size_t)(p - data_);
    pushStack(ref);
    rowsFlat_++;
    return true;
  };

  while (true) {
    opStart = pos;
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
        if (decoder_ && flatEntry()) break;
        pushStack(newContainer(PType::Dict));
        break;
      case ']': pushStack(newContainer(PType::List)); break;
      case ')': pushStack(newContainer(PType::Tuple)); break;
      case 0x8f: pushStack(newContainer(PType::List)); break;  // EMPTY_SET: kept as a list
      case 't': tupleFrom(popMark()); break;
      case 0x91: {  // FROZENSET
        size_t m = popMark();
        tupleFrom(m);
        break;
      }
      case 0x85:
      case 0x86:
      case 0x87: {
        size_t n = op - 0x84;
        if (stack.size() < n || (!marks.empty() && stack.size() - n < marks.back()))
          fail("malformed pickle: stack underflow");
        tupleFrom(stack.size() - n);
        break;
      }
      case 'l': {  // LIST
        size_t m = popMark();
        uint32_t l = newContainer(PType::List);
        fillFromStack(l, m);
        pushStack(l);
        break;
      }
      case 'd': {  // DICT
        size_t m = popMark();
        if ((stack.size() - m) % 2) fail("malformed pickle: DICT with an odd number of items");
        uint32_t d = newContainer(PType::Dict);
        fillFromStack(d, m);
        pushStack(d);
        break;
      }
      case 's': {  // SETITEM
        uint32_t v = pop(), k = pop();
        uint32_t c = container(top(), PType::Dict, "SETITEM");
        checkItems(containers_[c].len + 2);
        const uint32_t kv[2] = {k, v};
        appendItems(c, kv, 2);
        break;
      }
      case 'u': {  // SETITEMS
        size_t m = popMark();
        if ((stack.size() - m) % 2) fail("malformed pickle: SETITEMS with an odd number of items");
        if (m == 0) fail("malformed pickle: SETITEMS without a dict");
        uint32_t c = container(stack[m - 1], PType::Dict, "SETITEMS");
        if (decoder_ && tryRow(stack.v, stack.mx, m, memo)) break;
        checkItems(containers_[c].len + stack.size() - m);
        appendItems(c, stack.data() + m, stack.size() - m);
        stack.resize(m);
        break;
      }
      case 'a': {  // APPEND
        uint32_t v = pop();
        uint32_t c = container(top(), PType::List, "APPEND");
        checkItems(containers_[c].len + 1);
        appendItems(c, &v, 1);
        break;
      }
      case 'e':     // APPENDS
      case 0x90: {  // ADDITEMS (sets are kept as lists)
        size_t m = popMark();
        if (m == 0) fail("malformed pickle: APPENDS without a list");
        uint32_t c = container(stack[m - 1], PType::List, op == 'e' ? "APPENDS" : "ADDITEMS");
        checkItems(containers_[c].len + stack.size() - m);
        appendItems(c, stack.data() + m, stack.size() - m);
        stack.resize(m);
        break;
      }
      case 'J': intValue((int32_t)(uint32_t)le(4)); break;
      case 'K': intValue((int64_t)le(1)); break;
      case 'M': intValue((int64_t)le(2)); break;
      case 'I': textInt(line(), false); break;
      case 'L': textInt(line(), true); break;
      case 0x8a: longBytes((size_t)le(1)); break;
      case 0x8b: {
        uint64_t n = le(4);
        if (n & 0x80000000u) fail("malformed pickle: negative LONG4 length");
        longBytes((size_t)n);
        break;
      }
      case 'G': {
        const uint8_t* p = rd(8);
        uint64_t bits = 0;
        for (int k = 0; k < 8; k++) bits = (bits << 8) | p[k];  // big-endian
        pushStack(push(PValue{PType::Float, false, 0, bits}));
        break;
      }
      case 'F': {
        std::string t(line());
        char* end = nullptr;
        double d = strtod(t.c_str(), &end);
        if (end == t.c_str()) fail("malformed float in pickle");
        uint64_t bits;
        memcpy(&bits, &d, 8);
        pushStack(push(PValue{PType::Float, false, 0, bits}));
        break;
      }
      case 'N': constValue(0, PValue{PType::None, false, 0, 0}); break;
      case 0x88: constValue(1, PValue{PType::Bool, true, 0, 0}); break;
      case 0x89: constValue(2, PValue{PType::Bool, false, 0, 0}); break;
      case 'X': strValue((size_t)le(4), PType::Str); break;
      case 0x8c: strValue((size_t)le(1), PType::Str); break;
      case 0x8d: strValue((size_t)le(8), PType::Str); break;
      case 'V': ownedStr(decodeRawUnicodeEscape(line())); break;
      case 'T': strValue((size_t)le(4), PType::Str); break;  // Python 2 str: bytes read as Latin-1-ish text
      case 'U': strValue((size_t)le(1), PType::Str); break;
      case 'S': {
        std::string_view s = line();
        if (s.size() >= 2 && (s.front() == '\'' || s.front() == '"') && s.back() == s.front())
          s = s.substr(1, s.size() - 2);
        ownedStr(std::string(s));
        break;
      }
      case 'B': strValue((size_t)le(4), PType::Bytes); break;
      case 'C': strValue((size_t)le(1), PType::Bytes); break;
      case 0x8e:
      case 0x96: strValue((size_t)le(8), PType::Bytes); break;
      case 'q': memoPut(le(1)); break;
      case 'r': memoPut(le(4)); break;
      case 'p': {
        std::string t(line());
        memoPut(strtoull(t.c_str(), nullptr, 10));
        break;
      }
      case 0x94: memoPut(memo.size()); break;
      case 'h': memoGet(le(1)); break;
      case 'j': memoGet(le(4)); break;
      case 'g': {
        std::string t(line());
        memoGet(strtoull(t.c_str(), nullptr, 10));
        break;
      }
      case '0': pop(); break;
      case '1': stack.resize(popMark()); break;
      case '2': pushStack(top()); break;
      case 0x97:
      case 0x98:
        fail("this pickle uses out-of-band buffers (opcode " +
             std::string(op == 0x97 ? "NEXT_BUFFER" : "READONLY_BUFFER") + " at byte " + std::to_string(opStart) +
             "), which a file cannot carry; snapshot pickles never do");
        break;
      default: {
        if (const char* name = codeOpcodeName(op)) {
          std::string what;
          if (op == 'c' || op == 'i') {
            std::string mod(line()), nm(line());
            what = " '" + mod + " " + nm + "'";
          } else if (op == 0x93 && stack.size() >= 2 && at(stack[stack.size() - 1]).type == PType::Str &&
                     at(stack[stack.size() - 2]).type == PType::Str) {
            what = " '" + std::string(str(stack[stack.size() - 2])) + " " + std::string(str(stack.back())) + "'";
          }
          throw PickleError(std::string("this pickle contains code (opcode ") + name + what + " at byte " +
                                std::to_string(opStart) +
                                "); snapshot pickles contain only plain data — not loading it. If you trust the "
                                "file, load it with Python and re-save it with torch.cuda.memory._dump_snapshot",
                            opStart);
        }
        fail("not a pickle, or a damaged one: unknown opcode " + hexByte(op) + " at byte " + std::to_string(opStart));
      }
    }
  }
}

}  // namespace gpumem
