// writer.cc — see writer.h for the ordering and bound rules.
#include "writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "../../format/gpumem_format.h"
#include "clock.h"

namespace gpumem::rec::writer {
namespace {

using Batch = std::vector<uint8_t>;
constexpr size_t kBatchBytes = 1u << 20;  // a batch is handed to the writer thread when it reaches this

struct State {
  std::mutex mu;  // guards everything below except fd (writer thread / close only)
  std::condition_variable wake;       // writer thread: work or stop
  std::condition_variable written;    // flush(): a write pass finished
  Batch cur;
  std::vector<Batch> full;
  std::vector<Batch> spare;
  uint64_t queued = 0;         // bytes appended but not yet written
  uint64_t offset = 0;         // capture offset of the next appended record
  uint64_t lost_pending = 0;   // dropped since the last REC_LOST
  uint64_t lost_total = 0;
  uint64_t written_through = 0;  // capture offset up to which bytes have been handed to write()
  bool flush_requested = false;
  bool stop = false;
  bool open = false;
  bool write_failed = false;
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

bool write_all(int fd, const uint8_t* p, size_t n) {
  while (n) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += w;
    n -= size_t(w);
  }
  return true;
}

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
  fmt::RecordHeader h{type, device, flags, an + bn};
  size_t at = s.cur.size();
  s.cur.resize(at + n);
  std::memcpy(s.cur.data() + at, &h, sizeof h);
  if (an) std::memcpy(s.cur.data() + at + sizeof h, a, an);
  if (bn) std::memcpy(s.cur.data() + at + sizeof h + an, b, bn);
  s.queued += n;
  s.offset += n;
}

void run() {
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
    lk.unlock();
    uint64_t bytes = 0;
    for (auto& b : todo) {
      // A failed write (disk full) stops all further writes: the file stays a prefix of whole records
      // plus at most one torn record, which readers treat as a truncated tail.
      if (!s.write_failed && !write_all(s.fd, b.data(), b.size())) s.write_failed = true;
      bytes += b.size();
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
    case fmt::REC_STATS:
      return false;
    default:
      return true;
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
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
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
  if (!write_all(fd, reinterpret_cast<const uint8_t*>(&fh), sizeof fh) ||
      !write_all(fd, reinterpret_cast<const uint8_t*>(header_json.data()), header_json.size())) {
    *err = "cannot write capture file " + path + ": " + std::strerror(errno);
    ::close(fd);
    return false;
  }
  s.fd = fd;
  s.path = path;
  s.opt = opt;
  if (s.opt.flush_interval_ms == 0) s.opt.flush_interval_ms = 50;
  s.offset = sizeof fh + header_json.size();
  s.written_through = s.offset;
  s.cur.reserve(kBatchBytes);
  s.open = true;
  s.stop = false;
  s.thread = std::thread(run);
  return true;
}

bool is_open() { return !g_forked.load(std::memory_order_relaxed) && S().open; }
const std::string& path() { return S().path; }
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
  if (!s.open || s.stop) return -1;
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

void close(int exit_code) {
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
    fmt::EndRec er{clock::now_ns(), exit_code, 0};
    put(s, fmt::REC_END, 0, 0, &er, sizeof er, nullptr, 0);
    s.stop = true;
    s.wake.notify_one();
  }
  if (s.thread.joinable()) s.thread.join();
  std::lock_guard<std::mutex> lk(s.mu);
  ::close(s.fd);
  s.fd = -1;
}

void forget_after_fork() {
  // Runs in a fork child: no locks (another thread may have held them at the fork) and no writer
  // thread. The file belongs to the parent, so the child writes nothing, not even REC_END.
  g_forked.store(true, std::memory_order_relaxed);
}

}  // namespace gpumem::rec::writer
