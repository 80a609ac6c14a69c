// recorder.cc — configuration, the header, emit(), state records, the sampler, and the recording half
// of the C API (gpumem_snapshot, _snapshot_pickle, _free_buffer, _mark, _notice, _backward_*,
// _shutdown). See recorder.h for the lock order.
#include "recorder.h"

#include <dlfcn.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

#include "../../format/gpumem_format.h"
#include "../include/gpumem_allocator.h"
#include "allocator_api.h"
#include "control_server.h"
#include "json.h"
#include "snapshot_pickle.h"
#include "stack_capture.h"
#include "writer.h"

namespace gpumem::rec {
namespace {

struct Config {
  std::string capture_path;
  std::string control_socket;
  std::string backend = "cuda";
  uint32_t sample_interval_ms = 200;
};

std::mutex g_cfg_mu;  // configure, on_init, shutdown
Config g_cfg;
std::atomic<bool> g_active{false};    // events are wanted (capture open or trace ring on)
std::atomic<bool> g_forked{false};    // this process is a fork child of the recording process
std::atomic<bool> g_shut{false};
std::atomic<uint32_t> g_snapshot_id{0};
std::atomic<uint32_t> g_snapshot_files{0};
int g_announced = 0;                  // devices announced with REC_DEVICE (under g_cfg_mu)
std::vector<std::string> g_pci;       // per device: PCI bus id, for NVML (empty if unknown)
thread_local std::string t_error;

// ---- time and threads ----------------------------------------------------------------------------
uint64_t wall_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

std::atomic<uint32_t> g_next_thread{1};

int env_int(const char* name, int dflt) {
  const char* v = std::getenv(name);
  if (!v || !*v) return dflt;
  char* end = nullptr;
  long n = std::strtol(v, &end, 10);
  return (end && *end == 0) ? int(n) : dflt;
}

// ---- the header ---------------------------------------------------------------------------------
json::Value read_cmdline() {
  json::Value argv = json::Value::array();
  std::ifstream f("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  size_t start = 0;
  while (start < all.size()) {
    size_t end = all.find('\0', start);
    if (end == std::string::npos) end = all.size();
    argv.push(all.substr(start, end - start));
    start = end + 1;
  }
  return argv;
}

json::Value build_header(const json::Value& cfg, uint64_t mono, uint64_t wall) {
  json::Value h = json::Value::object();
  h.set("producer", "gpumem-allocator");
  h.set("allocator_version", gpumem_version());
  h.set("pid", int64_t(::getpid()));
  h.set("rank", env_int("RANK", 0));
  h.set("local_rank", env_int("LOCAL_RANK", 0));
  h.set("world_size", env_int("WORLD_SIZE", 1));
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  h.set("host", host);
  h.set("argv", read_cmdline());
  char cwd[4096];
  h.set("cwd", ::getcwd(cwd, sizeof cwd) ? cwd : "");
  // Clock anchors (FORMAT.md "Header JSON"): top-level is what readers use; "clock" is the same pair
  // grouped, kept for tools written against the first draft of the format.
  h.set("mono_anchor_ns", mono);
  h.set("wall_anchor_ns", wall);
  json::Value clock = json::Value::object();
  clock.set("mono_ns", mono);
  clock.set("wall_ns", wall);
  h.set("clock", std::move(clock));
  if (const json::Value* b = cfg.find("backend")) h.set("backend", *b);
  if (const json::Value* s = cfg.find("segments")) h.set("segments", *s);
  h.set("stacks", stacks::enabled());
  if (const json::Value* u = cfg.find("user_roots")) h.set("user_roots", *u);
  // The caller's own facts (real argv of the script, torch/Python/driver versions) win over ours.
  if (const json::Value* extra = cfg.find("header"))
    for (auto& m : extra->members()) h.set(m.first, m.second);
  return h;
}

// ---- devices: names (driver) and samples (NVML) --------------------------------------------------
struct Cuda {
  int (*Init)(unsigned) = nullptr;
  int (*DeviceGet)(int*, int) = nullptr;
  int (*DeviceGetName)(char*, int, int) = nullptr;
  int (*DeviceGetPCIBusId)(char*, int, int) = nullptr;
  bool ok = false;
};
const Cuda& cuda() {
  static const Cuda c = [] {
    Cuda c;
    // The CUDA backend has loaded the driver already; RTLD_NOLOAD keeps us from being the first.
    void* h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (!h) return c;
    c.Init = reinterpret_cast<decltype(c.Init)>(dlsym(h, "cuInit"));
    c.DeviceGet = reinterpret_cast<decltype(c.DeviceGet)>(dlsym(h, "cuDeviceGet"));
    c.DeviceGetName = reinterpret_cast<decltype(c.DeviceGetName)>(dlsym(h, "cuDeviceGetName"));
    c.DeviceGetPCIBusId = reinterpret_cast<decltype(c.DeviceGetPCIBusId)>(dlsym(h, "cuDeviceGetPCIBusId"));
    c.ok = c.Init && c.DeviceGet && c.DeviceGetName && c.DeviceGetPCIBusId && c.Init(0) == 0;
    return c;
  }();
  return c;
}

struct NvmlMemory {
  unsigned long long total, free, used;
};
struct NvmlProcessInfo {  // nvmlProcessInfo_t as taken by nvmlDeviceGetComputeRunningProcesses_v3
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId, computeInstanceId;
};
struct Nvml {
  int (*GetHandleByPciBusId)(const char*, void**) = nullptr;
  int (*GetMemoryInfo)(void*, NvmlMemory*) = nullptr;
  int (*GetProcesses)(void*, unsigned*, NvmlProcessInfo*) = nullptr;
  bool ok = false;
};
const Nvml& nvml() {
  static const Nvml n = [] {
    Nvml n;
    void* h = dlopen("libnvidia-ml.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!h) return n;
    auto init = reinterpret_cast<int (*)()>(dlsym(h, "nvmlInit_v2"));
    n.GetHandleByPciBusId = reinterpret_cast<decltype(n.GetHandleByPciBusId)>(
        dlsym(h, "nvmlDeviceGetHandleByPciBusId_v2"));
    n.GetMemoryInfo = reinterpret_cast<decltype(n.GetMemoryInfo)>(dlsym(h, "nvmlDeviceGetMemoryInfo"));
    n.GetProcesses =
        reinterpret_cast<decltype(n.GetProcesses)>(dlsym(h, "nvmlDeviceGetComputeRunningProcesses_v3"));
    n.ok = init && n.GetHandleByPciBusId && n.GetMemoryInfo && init() == 0;
    return n;
  }();
  return n;
}

// Device-wide used/total: NVML (what nvidia-smi shows, matched to the CUDA device by PCI bus id so
// CUDA_VISIBLE_DEVICES cannot mix devices up), else the backend's free/total.
fmt::DeviceSampleRec sample_device(int d, const std::string& pci) {
  fmt::DeviceSampleRec r{now_ns(), 0, 0, 0};
  const Nvml& n = nvml();
  void* h = nullptr;
  NvmlMemory m{};
  if (!pci.empty() && n.ok && n.GetHandleByPciBusId(pci.c_str(), &h) == 0 && n.GetMemoryInfo(h, &m) == 0) {
    r.used = m.used;
    r.total = m.total;
    if (n.GetProcesses) {
      NvmlProcessInfo procs[64];
      unsigned count = 64;
      if (n.GetProcesses(h, &count, procs) == 0)
        for (unsigned i = 0; i < count && i < 64; i++)
          if (procs[i].pid == unsigned(::getpid()) && procs[i].usedGpuMemory != ~0ull)
            r.process_used = procs[i].usedGpuMemory;
    }
    return r;
  }
  uint64_t free_b = 0, total_b = 0;
  if (core::device_memory(d, &free_b, &total_b)) {
    r.used = total_b - free_b;
    r.total = total_b;
  }
  return r;
}

// ---- the sampler thread -----------------------------------------------------------------------
std::mutex g_sampler_mu;
std::condition_variable g_sampler_cv;
bool g_sampler_stop = false;
std::thread g_sampler;

void sampler_loop(uint32_t interval_ms) {
  uint64_t resynced_lost = 0;
  std::unique_lock<std::mutex> lk(g_sampler_mu);
  while (!g_sampler_stop) {
    lk.unlock();
    on_init(core::device_count());  // in case the core never called on_init
    int n;
    std::vector<std::string> pci;
    {
      std::lock_guard<std::mutex> cl(g_cfg_mu);
      n = g_announced;
      pci = g_pci;
    }
    for (int d = 0; d < n; d++) {
      fmt::DeviceSampleRec s = sample_device(d, pci[size_t(d)]);
      if (s.total) writer::append(fmt::REC_DEVICE_SAMPLE, uint8_t(d), 0, &s, sizeof s);
      core::Figures f = core::figures(d);
      fmt::StatsRec st{now_ns(),         f.allocated,     f.reserved, f.active,           f.requested,
                       f.peak_allocated, f.peak_reserved, f.num_ooms, f.num_alloc_retries};
      writer::append(fmt::REC_STATS, uint8_t(d), 0, &st, sizeof st);
    }
    // After lost events a reader's replay is wrong until it sees a full state: give it one.
    uint64_t lost = writer::lost_total();
    if (lost != resynced_lost) {
      write_state(-1, 3);
      resynced_lost = lost;
    }
    lk.lock();
    g_sampler_cv.wait_for(lk, std::chrono::milliseconds(interval_ms), [] { return g_sampler_stop; });
  }
}

void stop_sampler() {
  {
    std::lock_guard<std::mutex> lk(g_sampler_mu);
    g_sampler_stop = true;
  }
  g_sampler_cv.notify_all();
  if (g_sampler.joinable()) g_sampler.join();
}

// ---- process lifetime ---------------------------------------------------------------------------
void at_fork_child() {
  // The child has none of our threads and must not touch the parent's capture or socket.
  g_forked.store(true);
  g_active.store(false);
  writer::forget_after_fork();
}

std::atomic<bool> g_in_atexit{false};
void at_exit() {
  g_in_atexit.store(true);
  gpumem_shutdown(-1);
}

void register_process_hooks() {
  static std::once_flag once;
  std::call_once(once, [] {
    pthread_atfork(nullptr, nullptr, at_fork_child);
    std::atexit(at_exit);
  });
}

bool get_string(const json::Value& cfg, const char* key, std::string* out, std::string* err) {
  const json::Value* v = cfg.find(key);
  if (!v) return true;
  if (!v->is_string()) {
    *err = std::string("\"") + key + "\" must be a string";
    return false;
  }
  *out = v->as_string();
  return true;
}

bool get_uint(const json::Value& cfg, const char* key, uint64_t* out, std::string* err) {
  const json::Value* v = cfg.find(key);
  if (!v) return true;
  if (!v->is_int() || v->as_int() < 0) {
    *err = std::string("\"") + key + "\" must be a non-negative integer";
    return false;
  }
  *out = uint64_t(v->as_int());
  return true;
}

}  // namespace

// ---- recorder.h ---------------------------------------------------------------------------------
uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

bool recording() { return g_active.load(std::memory_order_relaxed); }

uint32_t capture_stack() { return g_active.load(std::memory_order_relaxed) ? stacks::capture() : 0; }

uint32_t thread_number() {
  thread_local uint32_t n = [] {
    return pid_t(::syscall(SYS_gettid)) == ::getpid() ? 0u : g_next_thread.fetch_add(1);
  }();
  return n;
}

void emit(uint8_t type, uint8_t device, uint16_t flags, const void* payload, uint32_t bytes) {
  if (!g_active.load(std::memory_order_relaxed)) return;
  writer::append(type, device, flags, payload, bytes);
  snap::on_event(type, device, payload, bytes);
}

void emit2(uint8_t type, uint8_t device, uint16_t flags, const void* a, uint32_t an, const void* b, uint32_t bn) {
  if (!g_active.load(std::memory_order_relaxed)) return;
  writer::append(type, device, flags, a, an, b, bn);
  snap::on_event(type, device, a, an);
}

bool configure(const char* text, std::string* err) {
  json::Value cfg;
  if (!text || !json::parse(text, &cfg, err)) {
    *err = "gpumem_configure: invalid JSON: " + (text ? *err : std::string("null argument"));
    return false;
  }
  if (!cfg.is_object()) {
    *err = "gpumem_configure: expected a JSON object like {\"capture_path\": \"/tmp/x.gpumem\"}";
    return false;
  }
  std::lock_guard<std::mutex> lk(g_cfg_mu);
  Config c = g_cfg;
  uint64_t sample = c.sample_interval_ms, trace_entries = 100000, limit = 64ull << 20, flush_ms = 50;
  std::string segments;
  if (!get_string(cfg, "capture_path", &c.capture_path, err) ||
      !get_string(cfg, "control_socket", &c.control_socket, err) ||
      !get_string(cfg, "backend", &c.backend, err) || !get_string(cfg, "segments", &segments, err) ||
      !get_uint(cfg, "sample_interval_ms", &sample, err) || !get_uint(cfg, "trace_entries", &trace_entries, err) ||
      !get_uint(cfg, "buffer_limit_bytes", &limit, err) || !get_uint(cfg, "flush_interval_ms", &flush_ms, err))
    return false;
  const json::Value* st = cfg.find("stacks");
  if (st && !st->is_bool()) {
    *err = "\"stacks\" must be true or false";
    return false;
  }
  const json::Value* hdr = cfg.find("header");
  if (hdr && !hdr->is_object()) {
    *err = "\"header\" must be a JSON object";
    return false;
  }
  if (flush_ms == 0 || flush_ms > 10000) {
    *err = "\"flush_interval_ms\" must be 1–10000";
    return false;
  }
  if (!c.capture_path.empty() && writer::is_open() && c.capture_path != writer::path()) {
    *err = "already recording to " + writer::path() + "; one capture file per process";
    return false;
  }
  c.sample_interval_ms = uint32_t(sample);
  if (st) stacks::set_enabled(st->as_bool());

  static const uint64_t mono = now_ns(), wall = wall_ns();  // one anchor pair per process
  snap::Settings ss;
  ss.trace_entries = size_t(trace_entries);
  ss.expandable_segments = segments == "expandable";
  ss.mono_anchor_ns = mono;
  ss.wall_anchor_ns = wall;
  snap::configure(ss);

  if (!c.capture_path.empty() && !writer::is_open()) {
    writer::Options wo;
    wo.buffer_limit_bytes = limit;
    wo.flush_interval_ms = uint32_t(flush_ms);
    if (!writer::open(c.capture_path, build_header(cfg, mono, wall).dump(), wo, err)) return false;
    stacks::emit_all_interned();  // anything interned before the file existed
  }
  g_cfg = c;
  g_active.store(writer::is_open() || trace_entries > 0);
  register_process_hooks();

  if (!c.control_socket.empty() && !control::running() && !control::start(c.control_socket, err)) return false;
  if (writer::is_open() && c.sample_interval_ms > 0 && !g_sampler.joinable()) {
    g_sampler_stop = false;
    g_sampler = std::thread(sampler_loop, c.sample_interval_ms);
  }
  return true;
}

void on_init(int device_count) {
  std::lock_guard<std::mutex> lk(g_cfg_mu);
  if (device_count > 256) device_count = 256;  // RecordHeader.device is one byte
  while (g_announced < device_count) {
    int d = g_announced++;
    std::string name = g_cfg.backend == "sim" ? "simulated device" : "CUDA device " + std::to_string(d);
    std::string pci;
    const Cuda& c = cuda();
    int dev = 0;
    char buf[256] = {0};
    if (g_cfg.backend != "sim" && c.ok && c.DeviceGet(&dev, d) == 0) {
      if (c.DeviceGetName(buf, sizeof buf - 1, dev) == 0) name = buf;
      char bus[64] = {0};
      if (c.DeviceGetPCIBusId(bus, sizeof bus - 1, dev) == 0) pci = bus;
    }
    g_pci.push_back(pci);
    uint64_t free_b = 0, total_b = 0;
    core::device_memory(d, &free_b, &total_b);
    if (!writer::is_open()) continue;
    fmt::DeviceRec r{now_ns(), total_b, stacks::intern_string(name), 0};
    writer::append(fmt::REC_DEVICE, uint8_t(d), 0, &r, sizeof r, nullptr, 0, true);
  }
}

int64_t write_state(int device, uint32_t reason) {
  if (!writer::is_open()) return -1;
  std::vector<core::SegmentView> segs = core::snapshot_segments(device);
  int ndev = core::device_count();
  for (auto& s : segs) ndev = std::max(ndev, s.device + 1);
  int64_t first = -1;
  for (int d = (device < 0 ? 0 : device); d < (device < 0 ? ndev : device + 1); d++) {
    std::string body;
    uint32_t nseg = 0;
    for (auto& s : segs) {
      if (s.device != d) continue;
      nseg++;
      fmt::StateSegment ss{s.addr, s.size, s.stream, s.pool0, s.pool1, s.stack, s.flags, 0,
                           uint32_t(s.blocks.size()), 0};
      body.append(reinterpret_cast<const char*>(&ss), sizeof ss);
      for (auto& b : s.blocks) {
        fmt::StateBlock sb{b.addr, b.size, b.requested, b.stack, b.state, {0, 0, 0}};
        body.append(reinterpret_cast<const char*>(&sb), sizeof sb);
      }
    }
    fmt::StateRec sr{now_ns(), g_snapshot_id.fetch_add(1), reason, nseg, 0};
    int64_t off = writer::append(fmt::REC_STATE, uint8_t(d), 0, &sr, sizeof sr, body.data(),
                                 uint32_t(body.size()), true);
    if (first < 0) first = off;
  }
  return first;
}

int64_t take_snapshot(const char* pickle_path, std::string* err) {
  if (g_forked) {
    *err = "snapshot: this process is a fork child of the recording process";
    return -1;
  }
  uint64_t t = now_ns();
  int64_t off = writer::is_open() ? write_state(-1, 0) : 0;
  if (off < 0) off = 0;
  if (pickle_path && *pickle_path) {
    snap::on_snapshot(t);
    std::string bytes = snap::build();
    std::string tmp = std::string(pickle_path) + ".tmp";
    FILE* f = std::fopen(tmp.c_str(), "wb");
    bool ok = f && std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
    if (f && std::fclose(f) != 0) ok = false;
    // Written whole then renamed, so a reader never opens half a pickle.
    if (!ok || std::rename(tmp.c_str(), pickle_path) != 0) {
      *err = std::string("cannot write snapshot pickle ") + pickle_path + ": " + std::strerror(errno) +
             " (check that the folder exists and is writable)";
      std::remove(tmp.c_str());
      return -1;
    }
    mark(pickle_path, fmt::MARK_SNAPSHOT);
  }
  return off;
}

void mark(const std::string& name, uint32_t kind) {
  if (!g_active.load() || g_forked) return;
  uint64_t t = now_ns();
  if (kind == fmt::MARK_BEGIN || kind == fmt::MARK_END) snap::on_annotation(kind == fmt::MARK_BEGIN, name, 0, t);
  if (!writer::is_open()) return;
  fmt::MarkerRec r{t, stacks::intern_string(name), kind};
  writer::append(fmt::REC_MARKER, 0, 0, &r, sizeof r, nullptr, 0, true);
}

int process_rank() { return env_int("RANK", 0); }

std::string default_snapshot_path() {
  std::string base = writer::is_open() ? writer::path() : g_cfg.control_socket;
  size_t slash = base.rfind('/');
  std::string dir = slash == std::string::npos ? "." : base.substr(0, slash);
  return dir + "/snapshot-" + std::to_string(::getpid()) + "-" + std::to_string(g_snapshot_files.fetch_add(1)) +
         ".pickle";
}

void set_last_error(const std::string& msg) { t_error = msg; }
const char* last_error() { return t_error.c_str(); }

}  // namespace gpumem::rec

// ---- C API (gpumem_allocator.h): the recording half ----------------------------------------------
using namespace gpumem;
// The library is built with hidden visibility; only the C API is exported.
#define GPUMEM_REC_API extern "C" __attribute__((visibility("default")))

GPUMEM_REC_API int64_t gpumem_snapshot(const char* pickle_path) {
  std::string err;
  int64_t off = rec::take_snapshot(pickle_path, &err);
  if (off < 0) rec::set_last_error(err);
  return off;
}

GPUMEM_REC_API int gpumem_snapshot_pickle(uint8_t** out, size_t* out_len) {
  if (!out || !out_len) {
    rec::set_last_error("gpumem_snapshot_pickle: out and out_len must not be NULL");
    return -1;
  }
  rec::snap::on_snapshot(rec::now_ns());
  std::string bytes = rec::snap::build();
  auto* p = static_cast<uint8_t*>(std::malloc(bytes.size()));
  if (!p) {
    rec::set_last_error("gpumem_snapshot_pickle: out of host memory for " + std::to_string(bytes.size()) + " bytes");
    return -1;
  }
  std::memcpy(p, bytes.data(), bytes.size());
  *out = p;
  *out_len = bytes.size();
  return 0;
}

GPUMEM_REC_API void gpumem_free_buffer(void* p) { std::free(p); }

GPUMEM_REC_API int gpumem_mark(const char* name, uint32_t kind) {
  if (!name || kind > fmt::MARK_PHASE) {
    rec::set_last_error("gpumem_mark: name must not be NULL and kind must be 0–5 (MarkerKind)");
    return -1;
  }
  rec::mark(name, kind);
  return 0;
}

// Note [Tags] in gpumem_format.h: one record, no allocator lock; the reader resolves the address.
GPUMEM_REC_API int gpumem_tag(uint64_t addr, uint64_t size, uint32_t category, const char* name, int device) {
  if (category < fmt::TAG_PARAMETER || category > fmt::TAG_OPTIMIZER_STATE || device < 0 || device > 255) {
    rec::set_last_error("gpumem_tag: category must be 1 (parameter), 2 (gradient) or 3 (optimizer state) and device 0–255");
    return -1;
  }
  if (!rec::g_active.load() || rec::g_forked || !rec::writer::is_open()) return 0;
  fmt::TagRec r{rec::now_ns(), addr, size, category, name && *name ? rec::stacks::intern_string(name) : 0u};
  rec::writer::append(fmt::REC_TAG, uint8_t(device), 0, &r, sizeof r, nullptr, 0, true);
  return 0;
}

GPUMEM_REC_API int gpumem_notice(const char* text, uint32_t level) {
  if (!text || level > 2) {
    rec::set_last_error("gpumem_notice: text must not be NULL and level must be 0 (info), 1 (warning) or 2 (error)");
    return -1;
  }
  if (rec::writer::is_open()) {
    fmt::NoticeRec r{rec::now_ns(), rec::stacks::intern_string(text), level};
    rec::writer::append(fmt::REC_NOTICE, 0, 0, &r, sizeof r, nullptr, 0, true);
  }
  return 0;
}

GPUMEM_REC_API size_t gpumem_stack_info(char* buf, size_t cap) {
  std::string j = rec::stacks::info_json();
  if (buf && cap) {
    size_t n = std::min(cap - 1, j.size());
    std::memcpy(buf, j.data(), n);
    buf[n] = 0;
  }
  return j.size();
}

GPUMEM_REC_API void gpumem_backward_begin(void) { rec::stacks::backward_begin(rec::recording()); }
GPUMEM_REC_API void gpumem_backward_end(void) { rec::stacks::backward_end(); }

GPUMEM_REC_API void gpumem_shutdown(int exit_code) {
  if (rec::g_forked.load() || rec::g_shut.exchange(true)) return;
  rec::stop_sampler();
  rec::control::stop();
  // Leaks and cache at exit, for the reader's "at exit" view. Only on an explicit shutdown: from the
  // atexit handler the core's state may already be destroyed.
  if (!rec::g_in_atexit.load()) rec::write_state(-1, 2);
  rec::writer::close(exit_code);
  rec::g_active.store(false);
}
