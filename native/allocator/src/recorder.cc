// recorder.cc — configuration, the capture header, the core's event sink, state records, markers and
// the recording's start and end (recorder.h). Device samples: device_sampler.*; fork and exit:
// process_hooks.*; the control socket: control_server.* (transport) and control_commands.* (commands);
// the C API: c_api.cc.
#include "recorder.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <vector>

#include "../../format/gpumem_format.h"
#include "../../format/json.h"
#include "allocator_api.h"
#include "backward_links.h"
#include "device_sampler.h"
#include "module_marks.h"
#include "process_hooks.h"
#include "self_time.h"
#include "sequencer.h"
#include "settings.h"
#include "snapshot_pickle.h"
#include "stack_capture.h"
#include "version.h"
#include "writer.h"

namespace gpumem::rec {
namespace {

struct Config {
  std::string capture_path;
  std::string control_socket;
  uint32_t sample_interval_ms = uint32_t(settings::kSampleIntervalMsDefault);
};

std::mutex g_cfg_mu;  // configure, on_init, shutdown
Config g_cfg;
std::atomic<bool> g_forked{false};  // this process is a fork child of the recording process
std::atomic<bool> g_shut{false};
std::atomic<uint32_t> g_snapshot_id{0};
std::atomic<uint32_t> g_snapshot_files{0};
int g_announced = 0;             // devices announced with REC_DEVICE (under g_cfg_mu)
std::vector<std::string> g_pci;  // per device: PCI bus id, for NVML (empty if unknown)
Sources g_sources;               // Note [Recorder sources]; set once, before the capture opens
std::atomic<bool> g_sources_set{false};

void sample_after_oom(int device);

// The recorder as the core's sink. Its wants_events() flag is the recorder's "active": events are
// wanted while a capture is open or the snapshot ring is on.
class RecorderSink final : public core::EventSink {
 public:
  void emit(uint8_t type, uint8_t device, uint16_t flags, const void* payload, uint32_t bytes) override {
    rec::emit(type, device, flags, payload, bytes);
  }
  void after_oom(int device) override {
    write_state(device, 1);
    sample_after_oom(device);
  }
  void set_active(bool on) { set_wants_events(on); }
};
RecorderSink& recorder_sink() {
  static RecorderSink* s = new RecorderSink;  // never destroyed: frees may come from atexit handlers
  return *s;
}
bool active() { return recorder_sink().wants_events(); }

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
  h.set("allocator_version", kVersion);
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
  // Clock anchors (FORMAT.md "Header JSON", Note [Clock anchors] in the reader): one spelling, written here only.
  h.set("mono_anchor_ns", mono);
  h.set("wall_anchor_ns", wall);
  if (const json::Value* b = cfg.find("backend")) h.set("backend", *b);
  if (const json::Value* s = cfg.find("segments")) h.set("segments", *s);
  h.set("stacks", stacks::enabled());
  if (const json::Value* u = cfg.find("user_roots")) h.set("user_roots", *u);
  if (const json::Value* b = cfg.find("budget_bytes")) h.set("budget_bytes", *b);  // FORMAT.md §5
  // The caller's own facts (real argv of the script, torch/Python/driver versions) win over ours.
  if (const json::Value* extra = cfg.find("header"))
    for (auto& m : extra->members()) h.set(m.first, m.second);
  return h;
}

// ---- the sampler's pass ---------------------------------------------------------------------------
// Device samples and stats of every announced device; after lost events, a full state (a reader's
// replay is wrong until it sees one).
void sample_pass() {
  static uint64_t resynced_lost = 0;  // the sampler thread's own
  on_init(core::device_count());      // in case the core never called on_init
  int n;
  std::vector<std::string> pci;
  {
    std::lock_guard<std::mutex> cl(g_cfg_mu);
    n = g_announced;
    pci = g_pci;
  }
  for (int d = 0; d < n; d++) {
    fmt::DeviceSampleRec s = sampler::sample_device(d, pci[size_t(d)]);
    if (s.total) writer::append(fmt::REC_DEVICE_SAMPLE, uint8_t(d), 0, &s, sizeof s);
    if (g_sources_set.load() && g_sources.refresh) g_sources.refresh(d);
    core::Figures f = g_sources_set.load() ? g_sources.figures(d) : core::figures(d);
    fmt::StatsRec st{now_ns(),         f.allocated,     f.reserved, f.active,           f.requested,
                     f.peak_allocated, f.peak_reserved, f.num_ooms, f.num_alloc_retries};
    writer::append(fmt::REC_STATS, uint8_t(d), 0, &st, sizeof st);
  }
  uint64_t lost = writer::lost_total();
  if (lost != resynced_lost) {
    write_state(-1, 3);
    resynced_lost = lost;
  }
}

// Note [Settled samples] in device_sampler.cc: the moment after a failed growth gets a sample of its own,
// taken once the growth is undone (the OOM's caller has released the device lock), when sampling is on.
void sample_after_oom(int device) {
  std::string pci;
  {
    std::lock_guard<std::mutex> cl(g_cfg_mu);
    if (g_cfg.sample_interval_ms == 0 || !writer::is_open() || device < 0 || device >= g_announced) return;
    pci = g_pci[size_t(device)];
  }
  fmt::DeviceSampleRec s = sampler::sample_device(device, pci);
  if (s.total) writer::append(fmt::REC_DEVICE_SAMPLE, uint8_t(device), 0, &s, sizeof s);
}

// ---- process lifetime ---------------------------------------------------------------------------
void in_fork_child() {
  // The child has none of our threads and must not touch the parent's capture or socket.
  g_forked.store(true);
  recorder_sink().set_active(false);
  sequencer::forget_after_fork();
  writer::forget_after_fork();
}

std::atomic<bool> g_in_atexit{false};
std::atomic<bool> g_last_pass{false};  // Note [Last figures] (shutdown)
void at_exit() {
  g_in_atexit.store(true);
  shutdown(-1);
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
bool recording() { return active(); }

uint32_t capture_stack() {
  if (!active()) return 0;
  if (!modules::wanted()) {
    self_time::Scope timed(self_time::kStack);
    const uint32_t id = stacks::capture();
    links::on_stack(id, 0);  // Note [Backward on the forward line]: the nodes this op made are filed here
    return id;
  }
  stacks::ModuleChain chain;  // Note [Module paths from frames] in module_marks.h
  uint32_t id;
  {
    self_time::Scope timed(self_time::kStack);
    id = stacks::capture(&chain);
  }
  self_time::Scope timed(self_time::kModules);
  links::on_stack(id, modules::on_allocation(chain));
  return id;
}

core::EventSink& sink() { return recorder_sink(); }

void emit(uint8_t type, uint8_t device, uint16_t flags, const void* payload, uint32_t bytes) {
  if (!active()) return;
  self_time::Scope timed(self_time::kEmit);
  writer::append(type, device, flags, payload, bytes);
  snap::on_event(type, device, payload, bytes);
}

void emit2(uint8_t type, uint8_t device, uint16_t flags, const void* a, uint32_t an, const void* b, uint32_t bn) {
  if (!active()) return;
  self_time::Scope timed(self_time::kEmit);
  writer::append(type, device, flags, a, an, b, bn);
  snap::on_event(type, device, a, an);
}

bool configure(const char* text, const control::Handler& commands, std::string* err) {
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
  uint64_t sample = c.sample_interval_ms, trace_entries = 100000, limit = 64ull << 20, flush_ms = 50, budget = 0;
  std::string segments;  // absent (PyTorch's allocator observed): the snapshot's settings say not expandable
  bool stacks_on = settings::kStacksDefault;
  // The recording settings by the one table (settings.h); the rest are this library's own keys.
  if (!get_string(cfg, "capture_path", &c.capture_path, err) ||
      !get_string(cfg, "control_socket", &c.control_socket, err) ||
      !settings::read(cfg, settings::kSegments, &segments, err) ||
      !settings::read(cfg, settings::kStacks, &stacks_on, err) ||
      !settings::read(cfg, settings::kSampleIntervalMs, &sample, err) ||
      !settings::read(cfg, settings::kBudgetBytes, &budget, err) ||
      !get_uint(cfg, "trace_entries", &trace_entries, err) || !get_uint(cfg, "buffer_limit_bytes", &limit, err) ||
      !get_uint(cfg, "flush_interval_ms", &flush_ms, err))
    return false;
  const json::Value* st = cfg.find(settings::kStacks.json);
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
  if (st) stacks::set_enabled(stacks_on);

  static const uint64_t mono = now_ns(), wall = clock::wall_ns();  // one anchor pair per process
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
    wo.budget_bytes = budget;
    if (!writer::open(c.capture_path, build_header(cfg, mono, wall).dump(), wo, err)) return false;
    stacks::emit_all_interned();  // anything interned before the file existed
  }
  g_cfg = c;
  recorder_sink().set_active(writer::is_open() || trace_entries > 0);
  process::install_hooks(in_fork_child, at_exit);

  if (!c.control_socket.empty() && !control::running() && !control::start(c.control_socket, commands, err))
    return false;
  if (writer::is_open() && c.sample_interval_ms > 0) sampler::start(c.sample_interval_ms, sample_pass);
  return true;
}

void on_init(int device_count) {
  std::lock_guard<std::mutex> lk(g_cfg_mu);
  if (device_count > 256) device_count = 256;  // RecordHeader.device is one byte
  while (g_announced < device_count) {
    int d = g_announced++;
    core::DeviceIdentity id = core::device_identity(d);
    std::string name = id.name.empty() ? "CUDA device " + std::to_string(d) : id.name;
    g_pci.push_back(id.pci_bus_id);
    uint64_t free_b = 0, total_b = 0;
    core::device_memory(d, &free_b, &total_b);
    if (!writer::is_open()) continue;
    const uint32_t pci = id.pci_bus_id.empty() ? 0 : stacks::intern_string(id.pci_bus_id);
    fmt::DeviceRec r{now_ns(), total_b, stacks::intern_string(name), pci};
    writer::append(fmt::REC_DEVICE, uint8_t(d), 0, &r, sizeof r, nullptr, 0, true);
  }
}

void set_sources(const Sources& s) {
  g_sources = s;
  g_sources_set.store(s.figures != nullptr);
}

void announce_device(int device, const std::string& name, uint64_t total_bytes, const std::string& pci_bus_id) {
  std::lock_guard<std::mutex> lk(g_cfg_mu);
  if (device < 0 || device >= 256 || device < g_announced) return;
  while (g_announced <= device) {
    int d = g_announced++;
    g_pci.push_back(d == device ? pci_bus_id : std::string());
    if (!writer::is_open() || d != device) continue;
    const uint32_t pci = pci_bus_id.empty() ? 0 : stacks::intern_string(pci_bus_id);
    fmt::DeviceRec r{now_ns(), total_bytes,
                     stacks::intern_string(name.empty() ? "CUDA device " + std::to_string(d) : name), pci};
    writer::append(fmt::REC_DEVICE, uint8_t(d), 0, &r, sizeof r, nullptr, 0, true);
  }
}

int64_t write_state(int device, uint32_t reason) {
  if (!writer::is_open()) return -1;
  // Observer mode (Note [Recorder sources]): the state is PyTorch's own, written by the host.
  if (g_sources_set.load()) return g_sources.state ? g_sources.state(device, reason, "") : -1;
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
      fmt::StateSegment ss{s.addr, s.size, s.stream, s.pool0, s.pool1, s.stack, s.flags, 0, uint32_t(s.blocks.size()),
                           0};
      body.append(reinterpret_cast<const char*>(&ss), sizeof ss);
      for (auto& b : s.blocks) {
        fmt::StateBlock sb{b.addr, b.size, b.requested, b.stack, b.state, {0, 0, 0}};
        body.append(reinterpret_cast<const char*>(&sb), sizeof sb);
      }
    }
    fmt::StateRec sr{now_ns(), g_snapshot_id.fetch_add(1), reason, nseg, 0};
    int64_t off =
        writer::append(fmt::REC_STATE, uint8_t(d), 0, &sr, sizeof sr, body.data(), uint32_t(body.size()), true);
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
  if (g_sources_set.load() && g_sources.state) {
    // PyTorch's own pickle (_dump_snapshot) and state records, from the workload (Note [Recorder sources]).
    int64_t off = g_sources.state(-1, 0, pickle_path ? pickle_path : "");
    if (off < 0 && pickle_path && *pickle_path) {
      *err = std::string("snapshot: the workload could not write ") + pickle_path;
      return -1;
    }
    if (pickle_path && *pickle_path) mark(pickle_path, fmt::MARK_SNAPSHOT);
    return off < 0 ? 0 : off;
  }
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
  if (!active() || g_forked) return;
  uint64_t t = now_ns();
  if (kind == fmt::MARK_BEGIN || kind == fmt::MARK_END) snap::on_annotation(kind == fmt::MARK_BEGIN, name, 0, t);
  if (!writer::is_open()) return;
  fmt::MarkerRec r{t, stacks::intern_string(name), kind};
  sequencer::record(fmt::REC_MARKER, 0, 0, &r, sizeof r);
}

int process_rank() { return env_int("RANK", 0); }

std::string default_snapshot_path() {
  std::string base = writer::is_open() ? writer::path() : g_cfg.control_socket;
  size_t slash = base.rfind('/');
  std::string dir = slash == std::string::npos ? "." : base.substr(0, slash);
  return dir + "/snapshot-" + std::to_string(::getpid()) + "-" + std::to_string(g_snapshot_files.fetch_add(1)) +
         ".pickle";
}

void notice(const std::string& text, uint32_t level) {
  if (!writer::is_open()) return;
  fmt::NoticeRec r{now_ns(), stacks::intern_long_string(text), level};  // Note [Long notices]
  sequencer::record(fmt::REC_NOTICE, 0, 0, &r, sizeof r);
}

// Note [Tags] in gpumem_format.h: one record, no allocator lock; the reader resolves the address.
void tag(uint64_t addr, uint64_t size, uint32_t category, const char* name, int device) {
  if (!active() || g_forked || !writer::is_open()) return;
  fmt::TagRec r{now_ns(), addr, size, category, name && *name ? stacks::intern_string(name) : 0u};
  sequencer::record(fmt::REC_TAG, uint8_t(device), 0, &r, sizeof r);
}

// Note [User metadata] in gpumem_format.h: one record per change of a thread's label, pinned (never dropped: a lost
// change would relabel every later event of the thread). `written` is what the file says this thread's label is.
bool user_metadata(const std::string& text) {
  thread_local std::string written;
  if (!active() || g_forked) return false;
  const uint32_t thread = thread_number();
  snap::on_user_metadata(thread, text);
  if (text == written || !writer::is_open()) return false;
  fmt::UserMetadataRec r{now_ns(), text.empty() ? 0u : stacks::intern_string(text), thread};
  sequencer::record(fmt::REC_USER_METADATA, 0, 0, &r, sizeof r);  // pinned: never dropped
  written = text;
  return true;
}

void sample_at_close() { g_last_pass.store(true, std::memory_order_relaxed); }

void shutdown(int exit_code) {
  if (g_forked.load() || g_shut.exchange(true)) return;
  sampler::stop();
  control::stop();
  // Leaks and cache at exit, for the reader's "at exit" view. Only on an explicit shutdown: from the
  // atexit handler the core's state may already be destroyed.
  if (!g_in_atexit.load()) {
    // Note [Last figures]: where PyTorch's stats carry the figures (figures only, after the recorded steps: the host
    // set them, sample_at_close), one more sampler pass, on this thread, now that the sampler's own has stopped. The
    // host read PyTorch's figures once more just before (the figures reader as it is cleared, Note [Figures on the
    // sampler's thread] in observer.h; the poll's last read), so the end the reader shows (Note [Figures at the end]
    // in native/addon/src/aggregate.cpp) is the run's, not the last periodic sample's: on an H200 a cudaMallocAsync
    // run's last sample came 4 ms before its last step ended, with 640 MiB reserved where PyTorch said 704 MiB at
    // the end (test/fixtures/conformance/figures_async-auto). Where the events make the figures the capture already
    // ends with them (the last event, the state at exit): no pass is added.
    bool sampling;
    {
      std::lock_guard<std::mutex> cl(g_cfg_mu);
      sampling = g_cfg.sample_interval_ms > 0;
    }
    if (g_last_pass.load() && sampling && writer::is_open()) sample_pass();
    write_state(-1, 2);
  }
  sequencer::stop();  // every queued trace entry and record before the end (Note [Deferred observation])
  writer::close(exit_code);
  recorder_sink().set_active(false);
}

}  // namespace gpumem::rec
