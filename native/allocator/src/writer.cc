// writer.cc — see writer.h for the ordering and bound rules.
#include "writer.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "../../format/capture_index.h"
#include "../../format/gpumem_format.h"
#include "clock.h"
#include "compactor.h"

namespace gpumem::rec::writer {
namespace {

using Batch = std::vector<uint8_t>;
constexpr size_t kBatchBytes = 1u << 20;  // a batch is handed to the writer thread when it reaches this

struct State {
  std::mutex mu;                    // guards everything below except fd (writer thread / close only)
  std::condition_variable wake;     // writer thread: work or stop
  std::condition_variable written;  // flush(): a write pass finished
  Batch cur;
  std::vector<Batch> full;
  std::vector<Batch> spare;
  uint64_t queued = 0;        // bytes appended but not yet written
  uint64_t offset = 0;        // capture offset of the next appended record
  uint64_t lost_pending = 0;  // dropped since the last REC_LOST
  uint64_t lost_total = 0;
  uint64_t written_through = 0;  // capture offset up to which bytes have been handed to write()
  bool flush_requested = false;
  bool stop = false;
  bool open = false;
  std::atomic<bool> write_failed{false};  // set once, by the writer thread (Note [Writer failure])
  uint32_t max_string_id = 0;             // the largest REC_STRING id appended (the failure message takes the next)
  uint64_t data_start = 0;                // capture offset of the first record
  // Budgeted captures (Note [Capture budget]): offsets above are logical (they never shrink); the file holds
  // logical offset x at x − shift. The writer thread alone touches the fields below.
  uint64_t shift = 0;
  uint64_t prefix_end = 0;  // file offset where the full-detail window starts (after the compacted ranges)
  std::unique_ptr<compactor::Compactor> compactor;
  std::atomic<uint64_t> compactions{0};
  std::atomic<uint64_t> merges{0};  // of the compacted ranges (Note [Budget as a cap])
  // Note [Capture index] (gpumem_format.h): the writer thread alone feeds it, with every record it writes; close()
  // leaves the REC_END to the writer thread, which writes the REC_INDEX and then the END naming it.
  fmt::IndexBuilder index;
  bool end_pending = false;
  fmt::EndRec end_rec{};
  Options opt;
  std::string path;
  int fd = -1;
  std::thread thread;
};

std::atomic<bool> g_forked{false};

State& S() {
  static State* s = new State();  // leaked on purpose: usable from atexit handlers in any order
  return *s;
}

// Writes all `n` bytes; on failure returns the errno, with *done the bytes that reached the file.
int write_all(int fd, const uint8_t* p, size_t n, size_t* done = nullptr) {
  size_t total = 0;
  while (total < n) {
    ssize_t w = ::write(fd, p + total, n - total);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (done) *done = total;
      return errno;
    }
    if (w == 0) {  // no progress and no error: treat as a full device rather than spin
      if (done) *done = total;
      return ENOSPC;
    }
    total += size_t(w);
  }
  if (done) *done = total;
  return 0;
}

int pwrite_all(int fd, const std::string& bytes, uint64_t at) {
  size_t total = 0;
  while (total < bytes.size()) {
    ssize_t w = ::pwrite(fd, bytes.data() + total, bytes.size() - total, off_t(at + total));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return w < 0 ? errno : ENOSPC;
    total += size_t(w);
  }
  return 0;
}

void append_record(std::string* out, uint8_t type, const void* a, uint32_t an, const void* b = nullptr,
                   uint32_t bn = 0) {
  fmt::RecordHeader h{type, 0, 0, an + bn};
  out->append(reinterpret_cast<const char*>(&h), sizeof h);
  out->append(static_cast<const char*>(a), an);
  if (bn) out->append(static_cast<const char*>(b), bn);
}

// Note [Writer failure]: when a write fails (disk full, RLIMIT_FSIZE, the file removed), the workload
// goes on and the capture ends properly where it stopped. The writer thread, which alone owns the file,
// cuts it to the last whole record, appends REC_STRING(message) + REC_END (reason 1) and says so once
// on stderr; after that nothing is written or queued. The end record may not fit where the failure
// happened (a file size limit reached exactly, a full device): then whole records are dropped from the
// end until it does (truncating frees the space), trying a few cut points. If none works the file
// still ends at a whole record, and stderr says that the end record is missing.
class FailureReport {
 public:
  // `max_string_id`: the largest REC_STRING id among the records handed to the file.
  FailureReport(State& s, int err, uint32_t max_string_id) : s_(s), err_(err), message_id_(max_string_id + 1) {}

  // The file holds everything before `batch_at` and `done` bytes of `batch` (written from batch_at).
  void cut_and_end(uint64_t batch_at, const uint8_t* batch, size_t done) {
    // Record boundaries of the batch that reached the file (batch_at itself is one).
    std::vector<uint64_t> bounds{batch_at};
    for (size_t pos = 0; pos + sizeof(fmt::RecordHeader) <= done;) {
      fmt::RecordHeader h;
      std::memcpy(&h, batch + pos, sizeof h);
      pos += sizeof h + h.payload_bytes;
      if (pos > done) break;
      bounds.push_back(batch_at + pos);
    }
    const uint64_t whole = bounds.back();
    // The tail is about 200 bytes plus the path; drop that much, then more, if it does not fit.
    const uint64_t room = 256 + s_.path.size();
    int end_err = 0;
    for (uint64_t back : {uint64_t(0), room, room + (4u << 10), room + (64u << 10), room + (1u << 20)}) {
      uint64_t at = back > whole ? s_.data_start : whole - back;
      at = std::max(boundary_at_or_before(at, bounds, batch_at), s_.data_start);
      if (::ftruncate(s_.fd, off_t(at)) != 0) {
        end_err = errno;
        continue;
      }
      kept_ = at;
      end_err = pwrite_all(s_.fd, tail(at), at);
      if (end_err == 0) {
        ended_ = true;
        break;
      }
    }
    if (!ended_) {
      end_error_ = end_err;
      kept_ = whole;
      if (::ftruncate(s_.fd, off_t(whole)) != 0) {
        // the file keeps a torn tail; readers treat it as truncated
      }
    }
  }

  // The file was unlinked (its folder removed): nothing to cut, nobody to read an end record.
  void file_gone(uint64_t size) { kept_ = size; }

  void say_once() {
    std::string line = "gpumem: " + message(kept_);
    if (!ended_ && end_error_)
      line += " (the capture has no end record: " + std::string(std::strerror(end_error_)) + ")";
    line += "\n";
    if (::write(2, line.data(), line.size()) < 0) {}
  }

 private:
  std::string message(uint64_t kept) const {
    return "capture stopped at " + s_.path + ": " + std::strerror(err_) + " (" + std::to_string(kept) +
           " bytes written); the workload continues without recording";
  }

  std::string tail(uint64_t kept) const {
    const std::string text = message(kept);
    fmt::StringRec sr{message_id_, uint32_t(text.size())};
    fmt::EndRec er{clock::now_ns(), -1, 1, message_id_, 0};  // reason 1: writer failure
    std::string out;
    append_record(&out, fmt::REC_STRING, &sr, sizeof sr, text.data(), uint32_t(text.size()));
    append_record(&out, fmt::REC_END, &er, sizeof er);
    return out;
  }

  // The largest record boundary <= at: from the failing batch, else by reading the file's record
  // headers from the start (once, only on this rare path).
  uint64_t boundary_at_or_before(uint64_t at, const std::vector<uint64_t>& bounds, uint64_t batch_at) {
    if (at >= batch_at) return *(std::upper_bound(bounds.begin(), bounds.end(), at) - 1);
    if (file_bounds_.empty()) read_file_bounds(batch_at);
    auto it = std::upper_bound(file_bounds_.begin(), file_bounds_.end(), at);
    return it == file_bounds_.begin() ? s_.data_start : *(it - 1);
  }

  // Keeps the last boundaries before `end` (enough to back off a few MiB).
  void read_file_bounds(uint64_t end) {
    constexpr size_t kKeep = 1 << 16;
    std::vector<uint64_t> ring;
    uint64_t pos = s_.data_start;
    while (pos + sizeof(fmt::RecordHeader) <= end) {
      fmt::RecordHeader h;
      if (::pread(s_.fd, &h, sizeof h, off_t(pos)) != ssize_t(sizeof h)) break;
      if (ring.size() == kKeep) ring.erase(ring.begin(), ring.begin() + kKeep / 2);
      ring.push_back(pos);
      pos += sizeof h + h.payload_bytes;
    }
    file_bounds_ = std::move(ring);
    if (file_bounds_.empty()) file_bounds_.push_back(s_.data_start);
  }

  State& s_;
  const int err_;
  const uint32_t message_id_;  // no record in the file has this string id
  uint64_t kept_ = 0;
  bool ended_ = false;
  int end_error_ = 0;
  std::vector<uint64_t> file_bounds_;
};

void put(State& s, uint8_t type, uint8_t device, uint16_t flags, const void* a, uint32_t an, const void* b,
         uint32_t bn) {
  uint32_t n = uint32_t(sizeof(fmt::RecordHeader)) + an + bn;
  if (s.cur.size() + n > kBatchBytes && !s.cur.empty()) {
    s.full.push_back(std::move(s.cur));
    if (!s.spare.empty()) {
      s.cur = std::move(s.spare.back());
      s.spare.pop_back();
    } else {
      s.cur = Batch();
      s.cur.reserve(kBatchBytes);
    }
    s.wake.notify_one();
  }
  if (type == fmt::REC_STRING && an >= sizeof(uint32_t)) {
    uint32_t id;
    std::memcpy(&id, a, sizeof id);
    s.max_string_id = std::max(s.max_string_id, id);
  }
  fmt::RecordHeader h{type, device, flags, an + bn};
  // Appended as ranges, not resize() then copy: resize would first zero the bytes it then overwrites.
  const auto* hp = reinterpret_cast<const uint8_t*>(&h);
  s.cur.insert(s.cur.end(), hp, hp + sizeof h);
  if (an) s.cur.insert(s.cur.end(), static_cast<const uint8_t*>(a), static_cast<const uint8_t*>(a) + an);
  if (bn) s.cur.insert(s.cur.end(), static_cast<const uint8_t*>(b), static_cast<const uint8_t*>(b) + bn);
  s.queued += n;
  s.offset += n;
}

// Calls fn for every whole record in file bytes [from, to), reading in chunks; returns where the last one ends.
uint64_t scan(int fd, uint64_t from, uint64_t to, const std::function<void(const compactor::RecordView&)>& fn) {
  std::vector<uint8_t> buf;
  uint64_t pos = from;
  while (pos + sizeof(fmt::RecordHeader) <= to) {
    size_t want = size_t(std::min<uint64_t>(to - pos, 8u << 20));
    buf.resize(want);
    ssize_t got = ::pread(fd, buf.data(), want, off_t(pos));
    if (got <= 0) break;
    size_t at = 0;
    while (at + sizeof(fmt::RecordHeader) <= size_t(got)) {
      fmt::RecordHeader h;
      std::memcpy(&h, buf.data() + at, sizeof h);
      size_t whole = sizeof h + h.payload_bytes;
      if (at + whole > size_t(got)) {
        if (at == 0) {  // one record larger than the chunk: read it alone
          buf.resize(whole);
          if (::pread(fd, buf.data(), whole, off_t(pos)) != ssize_t(whole)) return pos;
          got = ssize_t(whole);
          continue;
        }
        break;
      }
      fn(compactor::RecordView{h.type, h.device, h.flags, buf.data() + at + sizeof h, h.payload_bytes});
      at += whole;
    }
    if (at == 0) break;
    pos += at;
  }
  return pos;
}

int copy_range(int from_fd, uint64_t at, uint64_t n, int to_fd) {
  std::vector<uint8_t> buf(std::min<uint64_t>(n, 8u << 20));
  while (n) {
    size_t want = size_t(std::min<uint64_t>(n, buf.size()));
    ssize_t got = ::pread(from_fd, buf.data(), want, off_t(at));
    if (got <= 0) return got < 0 ? errno : EIO;
    if (int err = write_all(to_fd, buf.data(), size_t(got))) return err;
    at += uint64_t(got), n -= uint64_t(got);
  }
  return 0;
}

// Replaces the file by: its first `head` bytes · `piece` · its bytes [from, file_end). Returns false, leaving the
// file as it was, if that fails.
bool rewrite(State& s, uint64_t head, const std::string& piece, uint64_t from, uint64_t file_end) {
  const std::string tmp = s.path + ".compacting";
  int nfd = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (nfd < 0) return false;
  int err = copy_range(s.fd, 0, head, nfd);
  if (!err) err = write_all(nfd, reinterpret_cast<const uint8_t*>(piece.data()), piece.size());
  if (!err) err = copy_range(s.fd, from, file_end - from, nfd);
  if (err || ::rename(tmp.c_str(), s.path.c_str()) != 0) {
    ::close(nfd);
    ::unlink(tmp.c_str());
    return false;
  }
  ::close(s.fd);
  s.fd = nfd;
  return true;
}

// Note [Capture budget] (compactor.cc): rewrites the file as header · compacted ranges · a new compacted range ·
// the newest `keep` bytes of the window (at a record boundary), and renames it over the old one. Runs on the writer
// thread between writes, with no lock held; `file_end` is the file's size. Returns the new size, or file_end if
// nothing changed (the capture then just grows: a failed compaction never loses records).
uint64_t compact_file(State& s, uint64_t file_end, uint64_t keep) {
  const uint64_t prefix = s.prefix_end;
  if (file_end <= prefix + keep) return file_end;
  const uint64_t target = file_end - keep;
  // The cut: the first record boundary at or after `target`.
  uint64_t cut = prefix;
  {
    uint64_t pos = prefix;
    while (pos < target) {
      fmt::RecordHeader h;
      if (::pread(s.fd, &h, sizeof h, off_t(pos)) != ssize_t(sizeof h)) return file_end;
      pos += sizeof h + h.payload_bytes;
    }
    cut = std::min(pos, file_end);
  }
  std::string piece;
  s.compactor->compact(
      [&](const std::function<void(const compactor::RecordView&)>& fn) { scan(s.fd, prefix, cut, fn); }, &piece);
  if (!rewrite(s, prefix, piece, cut, file_end)) return file_end;
  s.prefix_end = prefix + piece.size();
  s.compactions++;
  return s.prefix_end + (file_end - cut);
}

// Note [Budget as a cap] (compactor.cc): the compacted ranges, merged into one and thinned.
uint64_t merge_compacted(State& s, uint64_t file_end) {
  const uint64_t first = s.data_start, prefix = s.prefix_end;
  std::string piece;
  compactor::Compactor::merge(
      [&](const std::function<void(const compactor::RecordView&)>& fn) { scan(s.fd, first, prefix, fn); },
      s.opt.budget_bytes, &piece);
  if (piece.size() >= prefix - first || !rewrite(s, first, piece, prefix, file_end)) return file_end;
  s.prefix_end = first + piece.size();
  s.merges++;
  return s.prefix_end + (file_end - prefix);
}

// Makes room for `len` more bytes under the budget, most detail kept first: the oldest part of the window is
// compacted (the newest ~half of the budget stays in full detail); if the compacted history has outgrown a quarter
// of the budget it is merged and thinned; then the whole window is compacted; then the history merged again.
// Whatever is left over the budget is what no thinning removes (tables, step facts, segment events, OOMs:
// Note [Budget as a cap]). Returns the file's new size.
uint64_t make_room(State& s, uint64_t file_end, uint64_t len) {
  const uint64_t budget = s.opt.budget_bytes;
  auto fits = [&](uint64_t end) { return end + len <= budget; };
  uint64_t end = file_end;
  if (s.prefix_end - s.data_start > budget / 4) end = merge_compacted(s, end);
  const uint64_t history = s.prefix_end - s.data_start;
  uint64_t keep = budget / 2 > history ? budget / 2 - history : 0;
  keep = std::min(std::max(keep, budget / 8), budget > history + len ? budget - history - len : 0);
  if (!fits(end)) end = compact_file(s, end, keep);
  if (!fits(end)) end = compact_file(s, end, 0);
  if (!fits(end)) end = merge_compacted(s, end);
  return end;
}

// The length of the records of `b` from `pos` that fit in `max` bytes (at least one record).
size_t chunk_at(const Batch& b, size_t pos, uint64_t max) {
  size_t n = 0;
  while (pos + n + sizeof(fmt::RecordHeader) <= b.size()) {
    fmt::RecordHeader h;
    std::memcpy(&h, b.data() + pos + n, sizeof h);
    const size_t rec = sizeof h + h.payload_bytes;
    if (n && n + rec > max) break;
    n += rec;
  }
  return n ? std::min(n, b.size() - pos) : b.size() - pos;
}

void run() {
  // A write past RLIMIT_FSIZE raises SIGXFSZ in the writing thread, which by default kills the process.
  // Blocked here, the write fails with EFBIG instead and the workload goes on (Note [Writer failure]).
  sigset_t xfsz;
  sigemptyset(&xfsz);
  sigaddset(&xfsz, SIGXFSZ);
  pthread_sigmask(SIG_BLOCK, &xfsz, nullptr);
  pthread_setname_np(pthread_self(), "gpumem-writer");  // Note [Thread names] in sequencer.cc
  State& s = S();
  std::vector<Batch> todo;
  std::unique_lock<std::mutex> lk(s.mu);
  for (;;) {
    s.wake.wait_for(lk, std::chrono::milliseconds(s.opt.flush_interval_ms),
                    [&] { return s.stop || s.flush_requested || !s.full.empty(); });
    s.flush_requested = false;
    todo.swap(s.full);
    if (!s.cur.empty()) {
      todo.push_back(std::move(s.cur));
      s.cur = Batch();
      if (!s.spare.empty()) {
        s.cur = std::move(s.spare.back());
        s.spare.pop_back();
      }
    }
    bool stopping = s.stop;
    uint64_t file_at = s.written_through - s.shift;  // where this pass's first batch starts in the file
    const uint32_t max_string_id = s.max_string_id;  // covers every record in `todo`
    lk.unlock();
    uint64_t bytes = 0;
    auto write_batch = [&](const Batch& b) {
      // A budgeted capture writes a batch in pieces of at most an eighth of the budget, making room before each:
      // a whole batch (1 MiB, more under load) could pass a small budget by itself.
      const uint64_t piece = s.compactor ? std::max<uint64_t>(s.opt.budget_bytes / 8, 4096) : b.size();
      for (size_t pos = 0; pos < b.size() && !s.write_failed;) {
        const size_t len = s.compactor ? chunk_at(b, pos, piece) : b.size();
        if (s.compactor && file_at + len > s.opt.budget_bytes) {
          uint64_t now = make_room(s, file_at, len);
          s.shift += file_at - now;  // read under s.mu only by this thread
          file_at = now;
        }
        size_t done = 0;
        if (int err = write_all(s.fd, b.data() + pos, len, &done)) {
          s.write_failed = true;  // Note [Writer failure]: no further writes
          FailureReport r(s, err, max_string_id);
          r.cut_and_end(file_at, b.data() + pos, done);
          r.say_once();
        }
        file_at += len;
        pos += len;
      }
    };
    for (auto& b : todo) {
      if (!s.write_failed) s.index.observe_all(b.data(), b.size());
      write_batch(b);
      bytes += b.size();
    }
    if (stopping && s.end_pending && !s.write_failed) {
      lk.lock();
      const bool drained = s.full.empty() && s.cur.empty();
      lk.unlock();
      if (drained) {
        // Note [Capture index]: the index of everything written, then the END that says where it starts.
        s.end_pending = false;
        const std::string payload = s.index.payload(clock::now_ns(), s.compactor ? s.opt.budget_bytes / 16 : 0);
        std::string tail;
        if (payload.size() <= fmt::kMaxPayload)
          append_record(&tail, fmt::REC_INDEX, payload.data(), uint32_t(payload.size()));
        fmt::EndRec er = s.end_rec;
        er.index_bytes = uint32_t(tail.size());
        append_record(&tail, fmt::REC_END, &er, sizeof er);
        write_batch(Batch(tail.begin(), tail.end()));
      }
    }
    struct stat st;
    if (!s.write_failed && ::fstat(s.fd, &st) == 0 && st.st_nlink == 0) {
      s.write_failed = true;  // the file (or its folder) was removed: what we write, nobody can read
      FailureReport r(s, ENOENT, max_string_id);
      r.file_gone(file_at);
      r.say_once();
    }
    lk.lock();
    s.queued -= bytes;
    for (auto& b : todo) {
      b.clear();
      if (s.spare.size() < 4) s.spare.push_back(std::move(b));
    }
    todo.clear();
    s.written_through += bytes;
    s.written.notify_all();
    if (stopping && s.full.empty() && s.cur.empty()) return;
  }
}

}  // namespace

bool pinned_type(uint8_t type) {
  switch (type) {
    case fmt::REC_ALLOC:
    case fmt::REC_FREE_REQUESTED:
    case fmt::REC_FREE_COMPLETED:
    case fmt::REC_SEGMENT_ALLOC:
    case fmt::REC_SEGMENT_FREE:
    case fmt::REC_SEGMENT_MAP:
    case fmt::REC_SEGMENT_UNMAP:
    case fmt::REC_DEVICE_SAMPLE:
    case fmt::REC_STATS: return false;
    default: return true;
  }
}

bool open(const std::string& path, const std::string& header_json, const Options& opt, std::string* err) {
  State& s = S();
  std::lock_guard<std::mutex> lk(s.mu);
  if (s.open) {
    *err = "a capture is already being written to " + s.path + " (one capture file per process)";
    return false;
  }
  if (header_json.size() > fmt::kMaxHeaderJson) {
    *err = "capture header JSON is " + std::to_string(header_json.size()) + " bytes; the format allows at most " +
           std::to_string(fmt::kMaxHeaderJson) + " (shorten configure's \"header\" object)";
    return false;
  }
  // Read-write: after a failed write the writer reads record headers back to cut at a whole record.
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    *err = "cannot create capture file " + path + ": " + std::strerror(errno) +
           " (check that its folder exists and is writable)";
    return false;
  }
  fmt::FileHeader fh;
  std::memcpy(fh.magic, fmt::kMagic, sizeof fh.magic);
  fh.major = fmt::kMajor;
  fh.minor = fmt::kMinor;
  fh.json_bytes = uint32_t(header_json.size());
  if (write_all(fd, reinterpret_cast<const uint8_t*>(&fh), sizeof fh) ||
      write_all(fd, reinterpret_cast<const uint8_t*>(header_json.data()), header_json.size())) {
    *err = "cannot write capture file " + path + ": " + std::strerror(errno);
    ::close(fd);
    return false;
  }
  s.fd = fd;
  s.path = path;
  s.opt = opt;
  // Note [Lines at the peak in the index]: the header's own directories are never the user's lines.
  s.index = fmt::IndexBuilder();
  s.index.header(header_json);
  if (s.opt.flush_interval_ms == 0) s.opt.flush_interval_ms = 50;
  s.offset = sizeof fh + header_json.size();
  s.data_start = s.offset;
  s.written_through = s.offset;
  s.prefix_end = s.offset;
  if (s.opt.budget_bytes) s.compactor = std::make_unique<compactor::Compactor>(s.opt.budget_bytes);
  s.cur.reserve(kBatchBytes);
  s.open = true;
  s.stop = false;
  s.thread = std::thread(run);
  return true;
}

bool is_open() { return !g_forked.load(std::memory_order_relaxed) && S().open; }
const std::string& path() { return S().path; }
uint64_t compactions() { return S().compactions.load(); }
uint64_t merges() { return S().merges.load(); }
uint64_t lost_total() {
  std::lock_guard<std::mutex> lk(S().mu);
  return S().lost_total + S().lost_pending;
}

int64_t append(uint8_t type, uint8_t device, uint16_t flags, const void* a, uint32_t an, const void* b, uint32_t bn,
               bool pinned) {
  if (g_forked.load(std::memory_order_relaxed)) return -1;
  State& s = S();
  if (uint64_t(an) + bn > fmt::kMaxPayload) return -1;  // cannot be a valid record: never write it
  std::lock_guard<std::mutex> lk(s.mu);
  if (!s.open || s.stop || s.write_failed) return -1;  // after a failure nothing more is queued
  if (!pinned && !pinned_type(type) && s.queued + sizeof(fmt::RecordHeader) + an + bn > s.opt.buffer_limit_bytes) {
    s.lost_pending++;
    return -1;
  }
  if (s.lost_pending) {
    fmt::LostRec lr{clock::now_ns(), s.lost_pending};
    put(s, fmt::REC_LOST, 0, 0, &lr, sizeof lr, nullptr, 0);
    s.lost_total += s.lost_pending;
    s.lost_pending = 0;
  }
  int64_t at = int64_t(s.offset);
  put(s, type, device, flags, a, an, b, bn);
  return at;
}

void flush() {
  if (g_forked.load(std::memory_order_relaxed)) return;
  State& s = S();
  std::unique_lock<std::mutex> lk(s.mu);
  if (!s.open || !s.thread.joinable()) return;
  // Wait for the bytes queued before this call only: others may keep appending meanwhile.
  uint64_t target = s.offset;
  while (s.written_through < target && s.thread.joinable() && !s.write_failed) {
    s.flush_requested = true;
    s.wake.notify_one();
    s.written.wait_for(lk, std::chrono::milliseconds(100));
  }
}

void close(int exit_code, uint64_t end_t_ns) {
  if (g_forked.load(std::memory_order_relaxed)) return;
  State& s = S();
  {
    std::lock_guard<std::mutex> lk(s.mu);
    if (!s.open || s.stop) return;
    if (s.lost_pending) {
      fmt::LostRec lr{clock::now_ns(), s.lost_pending};
      put(s, fmt::REC_LOST, 0, 0, &lr, sizeof lr, nullptr, 0);
      s.lost_total += s.lost_pending;
      s.lost_pending = 0;
    }
    // reason 0: clean shutdown. The writer thread writes it after the index (Note [Capture index]).
    s.end_rec = fmt::EndRec{end_t_ns ? end_t_ns : clock::now_ns(), exit_code, 0, 0, 0};
    s.end_pending = true;
    s.stop = true;
    s.wake.notify_one();
  }
  if (s.thread.joinable()) s.thread.join();
  std::lock_guard<std::mutex> lk(s.mu);
  ::close(s.fd);
  s.fd = -1;
}

void set_flush_interval_ms(uint32_t ms) {
  State& s = S();
  std::lock_guard<std::mutex> lk(s.mu);
  s.opt.flush_interval_ms = std::min<uint32_t>(std::max<uint32_t>(1, ms), 10000);
}

void forget_after_fork() {
  // Runs in a fork child: no locks (another thread may have held them at the fork) and no writer
  // thread. The file belongs to the parent, so the child writes nothing, not even REC_END.
  g_forked.store(true, std::memory_order_relaxed);
}

}  // namespace gpumem::rec::writer
