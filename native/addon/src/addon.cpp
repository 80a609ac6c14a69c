// N-API surface of the reader: `open(path)` returns a handle whose methods answer the Model queries of
// src/core/base/model/types.ts, each as one JSON string (parsed once on the JS side). Errors are thrown as JS
// Errors whose message says what to do next.
#include <napi.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <system_error>
#include <thread>
#include <vector>

#include "aggregate.h"
#include "capture_decoder.h"
#include "capture_overview.h"
#include "categories.h"
#include "export_pickle.h"
#include "gpumem_format.h"
#include "json.h"
#include "overview.h"
#include "pickle_reader.h"
#include "policy_replay.h"
#include "snapshot_import.h"

namespace gpumem {

namespace {

std::vector<uint8_t> read_range(const std::string& path, uint64_t from, size_t max_bytes, bool& ok) {
  std::vector<uint8_t> buf;
  FILE* f = fopen(path.c_str(), "rb");
  ok = f != nullptr;
  if (!f) return buf;
  if (fseeko(f, (off_t)from, SEEK_SET) == 0) {
    buf.resize(max_bytes);
    size_t got = fread(buf.data(), 1, max_bytes, f);
    buf.resize(got);
  }
  fclose(f);
  return buf;
}

std::vector<uint8_t> read_all(const std::string& path, bool& ok) {
  std::vector<uint8_t> buf;
  FILE* f = fopen(path.c_str(), "rb");
  ok = f != nullptr;
  if (!f) return buf;
  struct stat st {};
  if (fstat(fileno(f), &st) == 0 && st.st_size > 0) {
    buf.resize((size_t)st.st_size);
    buf.resize(fread(buf.data(), 1, buf.size(), f));
  }
  fclose(f);
  return buf;
}

}  // namespace

// Everything an open file consists of. Filled off the JS thread by openAsync (Note [Async open]) or on
// it by `new ModelHandle(path)`; then owned by the handle.
struct Opened {
  std::string path;
  std::unique_ptr<Model> model;
  std::unique_ptr<CaptureDecoder> capture;
  std::vector<uint8_t> buf;  // capture read fallback
  TimeWindow window;         // a pickle's time window only (Note [Range-first open] in range_open.cpp)
  // The capture file being tailed; a budgeted capture is rewritten and renamed over itself (FORMAT.md §5).
  uint64_t ino = 0, dev_no = 0;
  int64_t decode_ns = 0, derive_ns = 0, decode_cpu_ns = 0, derive_cpu_ns = 0;
};

// CPU time of this thread: on a busy machine wall time measures the neighbours, not the reader.
int64_t thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

// Fallback when the file cannot be mapped: chunks that each hold any whole record.
void feed_by_reading(Opened& o, int fd, uint64_t size) {
  constexpr size_t kChunk = gpumem::fmt::kMaxPayload + (16u << 20);
  CaptureDecoder& c = *o.capture;
  while (!c.damaged() && size > c.offset()) {
    size_t want = (size_t)std::min<uint64_t>(kChunk, size - c.offset());
    if (o.buf.size() < want) o.buf.resize(want);
    ssize_t got = pread(fd, o.buf.data(), want, (off_t)c.offset());
    if (got <= 0) break;
    size_t used = c.feed(*o.model, o.buf.data(), (size_t)got);
    if (used == 0 || (size_t)got < want) break;
  }
}

size_t poll_capture(Opened& o) {
  if (!o.capture) return 0;
  CaptureDecoder& c = *o.capture;
  // Note [Poll counts records]: poll answers how many records arrived, not only allocator events. Its callers
  // (the live session, a growing capture's panel) push an update only when it is > 0, and a notice or marker
  // can arrive alone: the leak keeper's notice written after a run's last event was never shown (CI flake of
  // the categories E2E test, 2026-11-26). Device samples and the allocator's stats are left out: they arrive
  // every 200 ms even while the workload is idle, and each would recompute the live views (the categories are a
  // pass over the trace) with nothing new from the allocator. The live session sees a sample by the capture's
  // latest record time instead (fileInfo().lastUs, src/core/views/live/liveRun.ts) and redraws the charts only.
  size_t before = c.records_decoded();
  auto t0 = std::chrono::steady_clock::now();
  int64_t c0 = thread_cpu_ns();
  int fd = open(o.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot read " + o.path + ": " + strerror(errno));
  struct stat st {};
  fstat(fd, &st);
  uint64_t size = st.st_size > 0 ? (uint64_t)st.st_size : 0;
  // Note [Capture budget] (native/allocator/src/compactor.cc): when a budgeted capture reaches its budget, the
  // writer renames a compacted copy over it. A new inode (or a file shorter than what was read) is read again from
  // its start into a fresh model: the compacted copy holds every whole-run figure, so nothing shown goes missing.
  if (o.ino && ((uint64_t)st.st_ino != o.ino || (uint64_t)st.st_dev != o.dev_no || size < c.offset())) {
    o.model = std::make_unique<Model>();
    o.model->format = "gpumem-capture";
    o.capture = std::make_unique<CaptureDecoder>();
    before = 0;
  }
  o.ino = (uint64_t)st.st_ino, o.dev_no = (uint64_t)st.st_dev;
  CaptureDecoder& c2 = *o.capture;
  c2.size_hint(size);
  if (size > c2.offset() && !c2.damaged()) {
    // Note [Mapped reads]: the new bytes are mapped, not copied: decoding reads the page cache
    // directly. A partial record at the end stays unconsumed and is mapped again by the next poll.
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t from = c2.offset() / page * page;
    size_t len = (size_t)(size - from);
    void* p = mmap(nullptr, len, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, (off_t)from);
    if (p != MAP_FAILED) {
      const uint8_t* base = static_cast<const uint8_t*>(p) + (c2.offset() - from);
      c2.feed(*o.model, base, (size_t)(size - c2.offset()));
      munmap(p, len);
    } else {
      feed_by_reading(o, fd, size);
    }
  }
  close(fd);
  auto t1 = std::chrono::steady_clock::now();
  int64_t c1 = thread_cpu_ns();
  o.model->derive();
  auto t2 = std::chrono::steady_clock::now();
  o.decode_cpu_ns += c1 - c0;
  o.derive_cpu_ns += thread_cpu_ns() - c1;
  o.decode_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
  o.derive_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(t2 - t1).count();
  return c2.records_decoded() - before;
}

// Reads a whole pickle: mapped (no copy of a file that may be ~1 GB), read into memory when it cannot be.
void import_pickle_file(Opened& o) {
  int fd = open(o.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot open " + o.path + ": " + strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) == 0 && st.st_size > 0) {
    size_t len = (size_t)st.st_size;
    // Big files are mapped page by page just ahead of the parser, and dropped behind it (Note [Input
    // window] in pickle_reader.cpp): mapping all of a 750 MB pickle at once made it all resident.
    void* p = mmap(nullptr, len, PROT_READ, MAP_PRIVATE | (len < (32u << 20) ? MAP_POPULATE : 0), fd, 0);
    if (p != MAP_FAILED) {
      close(fd);
      struct Unmap {
        void* p;
        size_t n;
        ~Unmap() { munmap(p, n); }
      } unmap{p, len};
      import_snapshot(*o.model, static_cast<const uint8_t*>(p), len, true, o.window);
      return;
    }
  }
  close(fd);
  bool ok = false;
  std::vector<uint8_t> all = read_all(o.path, ok);
  if (!ok) throw std::runtime_error("cannot open " + o.path + ": " + strerror(errno));
  import_snapshot(*o.model, all.data(), all.size(), false, o.window);
}

// Opens o.path (a capture or a pickle) into o. Throws std::exception whose message is for the user.
void open_into(Opened& o) {
  bool ok = false;
  std::vector<uint8_t> head = read_range(o.path, 0, 16, ok);
  if (!ok) throw std::runtime_error("cannot open " + o.path + ": " + strerror(errno));
  if (head.empty())
    throw std::runtime_error(
        o.path + " is empty: not a capture or a snapshot pickle (was the workload killed before it wrote anything?)");
  o.model = std::make_unique<Model>();
  try {
    if (CaptureDecoder::looks_like_capture(head.data(), head.size()) || (head.size() < 6 && head[0] == 'G')) {
      if (!o.window.whole())
        throw std::runtime_error(
            o.path + ": a time window is opened from PyTorch snapshot pickles only; open the capture whole");
      o.capture = std::make_unique<CaptureDecoder>();
      o.model->format = "gpumem-capture";
      poll_capture(o);
    } else if (head[0] == 0x80) {
      auto t0 = std::chrono::steady_clock::now();
      int64_t c0 = thread_cpu_ns();
      import_pickle_file(o);
      o.decode_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
      o.decode_cpu_ns = thread_cpu_ns() - c0;
    } else {
      std::string hex;
      for (size_t k = 0; k < head.size() && k < 4; k++) {
        char b[4];
        snprintf(b, sizeof b, k ? " %02x" : "%02x", head[k]);
        hex += b;
      }
      throw std::runtime_error(o.path +
                               " is neither a GPU Memory Lens capture (.gpumem) nor a PyTorch snapshot pickle " +
                               "(it starts with bytes " + hex +
                               "); open a file written by torch.cuda.memory._dump_snapshot or by a lens run");
    }
  } catch (const PickleError& e) {
    throw std::runtime_error("cannot read " + o.path + ": " + e.what());
  }
}

class Handle : public Napi::ObjectWrap<Handle> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "ModelHandle",
                       {
                           InstanceMethod("format", &Handle::Format),
                           InstanceMethod("header", &Handle::Header),
                           InstanceMethod("devices", &Handle::Devices),
                           InstanceMethod("problems", &Handle::Problems),
                           InstanceMethod("fileInfo", &Handle::FileInfo),
                           InstanceMethod("poll", &Handle::Poll),
                           InstanceMethod("ended", &Handle::Ended),
                           InstanceMethod("endRecord", &Handle::EndRecord),
                           InstanceMethod("timeRange", &Handle::TimeRange),
                           InstanceMethod("current", &Handle::Current),
                           InstanceMethod("timeline", &Handle::Timeline),
                           InstanceMethod("stateAt", &Handle::StateAt),
                           InstanceMethod("lineStats", &Handle::LineStats),
                           InstanceMethod("stack", &Handle::Stack),
                           InstanceMethod("backwardPeak", &Handle::BackwardPeak),
                           InstanceMethod("markers", &Handle::Markers),
                           InstanceMethod("stepTable", &Handle::StepTable),
                           InstanceMethod("categories", &Handle::Categories),
                           InstanceMethod("ooms", &Handle::Ooms),
                           InstanceMethod("userMetadata", &Handle::UserMetadata),
                           InstanceMethod("spans", &Handle::Spans),
                           InstanceMethod("diff", &Handle::Diff),
                           InstanceMethod("summary", &Handle::Summary),
                           InstanceMethod("exportPickle", &Handle::ExportPickle),
                           InstanceMethod("extras", &Handle::Extras),
                           InstanceMethod("whatIf", &Handle::WhatIf),
                           InstanceMethod("replay", &Handle::Replay),
                           InstanceMethod("eventCount", &Handle::EventCount),
                           InstanceMethod("timings", &Handle::Timings),
                           InstanceMethod("close", &Handle::Close),
                           InstanceMethod("queryAsync", &Handle::QueryAsync),
                       });
  }

  // new ModelHandle(path) reads the file on the calling thread; openAsync passes an External holding
  // what its worker read (Note [Async open]).
  Handle(const Napi::CallbackInfo& info) : Napi::ObjectWrap<Handle>(info) {
    Napi::Env env = info.Env();
    if (info.Length() >= 1 && info[0].IsExternal()) {
      Opened* ready = info[0].As<Napi::External<Opened>>().Data();
      o_ = std::move(*ready);
      return;
    }
    if (info.Length() < 1 || !info[0].IsString()) throw Napi::TypeError::New(env, "open(path): path must be a string");
    o_.path = info[0].As<Napi::String>().Utf8Value();
    try {
      open_into(o_);
    } catch (const std::exception& e) {
      throw Napi::Error::New(env, std::string(e.what()));
    }
  }

 private:
  size_t PollCapture() { return poll_capture(o_); }

  // Where opening time went (for test/bench/reader): read+decode vs pairing/series.
  Napi::Value Timings(const Napi::CallbackInfo& info) {
    json::Writer j;
    j.open('{')
        .kv("decodeNs", o_.decode_ns)
        .kv("deriveNs", o_.derive_ns)
        .kv("decodeCpuNs", o_.decode_cpu_ns)
        .kv("deriveCpuNs", o_.derive_cpu_ns)
        .close('}');
    return Str(info.Env(), j.s);
  }

  Model& M(Napi::Env env) {
    if (!o_.model) throw Napi::Error::New(env, "this model was closed");
    // Note [Async queries]: the model belongs to the worker thread until its query is answered.
    if (busy_ > 0) throw Napi::Error::New(env, "this model is answering a query on a worker thread; wait for it");
    return *o_.model;
  }
  static int Dev(const Napi::CallbackInfo& info, size_t i) {
    return info.Length() > i && info[i].IsNumber() ? info[i].As<Napi::Number>().Int32Value() : 0;
  }
  static double Num(const Napi::CallbackInfo& info, size_t i, double fallback) {
    return info.Length() > i && info[i].IsNumber() ? info[i].As<Napi::Number>().DoubleValue() : fallback;
  }
  static Napi::Value Str(Napi::Env env, const std::string& s) { return Napi::String::New(env, s); }

  Napi::Value Format(const Napi::CallbackInfo& info) { return Str(info.Env(), M(info.Env()).format); }
  Napi::Value Header(const Napi::CallbackInfo& info) { return Str(info.Env(), M(info.Env()).header_json); }
  Napi::Value Devices(const Napi::CallbackInfo& info) { return Str(info.Env(), devices_json(M(info.Env()))); }
  Napi::Value FileInfo(const Napi::CallbackInfo& info) { return Str(info.Env(), file_info_json(M(info.Env()))); }
  Napi::Value Problems(const Napi::CallbackInfo& info) {
    Model& m = M(info.Env());
    std::string json = problems_json(m);
    CaptureDecoder* capture_ = o_.capture.get();
    if (capture_ && !capture_->damaged() && capture_->pending_bytes() > 0 && !m.ended) {
      // A record still being written (live) or cut off by a crash: say which, as far as we can tell.
      json::Writer j;
      j.open('{')
          .kvu("offset", capture_->offset())
          .kvs("message", "the capture ends with an incomplete record at byte " + std::to_string(capture_->offset()) +
                              " (" + std::to_string(capture_->pending_bytes()) +
                              " bytes); if the workload is still running it is completed on the next poll, otherwise "
                              "the process died while writing it")
          .kvs("kind", "incomplete")
          .close('}');
      json = json.size() > 2 ? json.substr(0, json.size() - 1) + "," + j.s + "]" : "[" + j.s + "]";
    }
    return Str(info.Env(), json);
  }
  Napi::Value Poll(const Napi::CallbackInfo& info) {
    M(info.Env());
    try {
      return Napi::Number::New(info.Env(), (double)PollCapture());
    } catch (const std::exception& e) {
      throw Napi::Error::New(info.Env(), e.what());
    }
  }
  Napi::Value Ended(const Napi::CallbackInfo& info) { return Napi::Boolean::New(info.Env(), M(info.Env()).ended); }
  // The REC_END's fields as JSON ({"reason","exitCode","message"}), "null" before one was read.
  Napi::Value EndRecord(const Napi::CallbackInfo& info) {
    Model& m = M(info.Env());
    if (!m.ended) return Str(info.Env(), "null");
    json::Writer j;
    j.open('{').kvu("reason", m.end.reason).kv("exitCode", m.end.exit_code).kvs("message", m.end.message).close('}');
    return Str(info.Env(), j.s);
  }
  Napi::Value TimeRange(const Napi::CallbackInfo& info) {
    return Str(info.Env(), time_range_json(M(info.Env()), Dev(info, 0)));
  }
  Napi::Value Current(const Napi::CallbackInfo& info) {
    return Str(info.Env(), current_json(M(info.Env()), Dev(info, 0)));
  }
  Napi::Value Timeline(const Napi::CallbackInfo& info) {
    bool owners = info.Length() > 4 && info[4].IsBoolean() && info[4].As<Napi::Boolean>().Value();
    return Str(info.Env(), timeline_json(M(info.Env()), Dev(info, 0), Num(info, 1, 0), Num(info, 2, 0),
                                         (int)Num(info, 3, 100), owners));
  }
  Napi::Value StateAt(const Napi::CallbackInfo& info) {
    const double events = Num(info, 2, -1);  // optional: exactly this many events (a category moment's "events")
    return Str(info.Env(), state_json(M(info.Env()), Dev(info, 0), Num(info, 1, INFINITY),
                                      std::isfinite(events) && events >= 0 ? (int64_t)events : -1));
  }
  Napi::Value LineStats(const Napi::CallbackInfo& info) {
    // lineStats(device, {backwardOnCaller?}): Note [Backward on the forward line]
    bool on_caller = false;
    if (info.Length() > 1 && info[1].IsObject()) {
      Napi::Value v = info[1].As<Napi::Object>().Get("backwardOnCaller");
      on_caller = v.IsBoolean() && v.As<Napi::Boolean>().Value();
    }
    return Str(info.Env(), line_stats_json(M(info.Env()), Dev(info, 0), on_caller));
  }
  Napi::Value BackwardPeak(const Napi::CallbackInfo& info) {
    return Str(info.Env(), backward_peak_json(M(info.Env()), Dev(info, 0)));
  }
  Napi::Value Stack(const Napi::CallbackInfo& info) {
    return Str(info.Env(), stack_json(M(info.Env()), (uint32_t)Num(info, 0, 0)));
  }
  Napi::Value Markers(const Napi::CallbackInfo& info) {
    return Str(info.Env(), markers_json(M(info.Env()), Dev(info, 0)));
  }
  Napi::Value StepTable(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (info.Length() < 2 || !info[1].IsArray()) throw Napi::TypeError::New(env, "stepTable(device, endsUs: number[])");
    Napi::Array a = info[1].As<Napi::Array>();
    std::vector<double> ends;
    ends.reserve(a.Length());
    for (uint32_t k = 0; k < a.Length(); k++) {
      Napi::Value v = a.Get(k);
      if (!v.IsNumber()) throw Napi::TypeError::New(env, "stepTable: endsUs must hold numbers");
      double t = v.As<Napi::Number>().DoubleValue();
      if (!ends.empty() && t < ends.back()) throw Napi::RangeError::New(env, "stepTable: endsUs must be ascending");
      ends.push_back(t);
    }
    return Str(env, step_table_json(M(env), Dev(info, 0), ends));
  }
  Napi::Value Categories(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (info.Length() < 3 || !info[1].IsArray() || !info[2].IsBoolean())
      throw Napi::TypeError::New(env, "categories(device, timesUs: number[], withLines: boolean)");
    Napi::Array a = info[1].As<Napi::Array>();
    std::vector<double> times;
    times.reserve(a.Length());
    for (uint32_t k = 0; k < a.Length(); k++) {
      Napi::Value v = a.Get(k);
      if (!v.IsNumber()) throw Napi::TypeError::New(env, "categories: timesUs must hold numbers");
      times.push_back(v.As<Napi::Number>().DoubleValue());
    }
    return Str(env, categories_json(M(env), Dev(info, 0), times, info[2].As<Napi::Boolean>().Value()));
  }
  Napi::Value Ooms(const Napi::CallbackInfo& info) { return Str(info.Env(), ooms_json(M(info.Env()))); }
  Napi::Value UserMetadata(const Napi::CallbackInfo& info) {
    return Str(info.Env(), user_metadata_json(M(info.Env())));
  }
  Napi::Value Spans(const Napi::CallbackInfo& info) {
    return Str(info.Env(), spans_json(M(info.Env()), Dev(info, 0), Num(info, 1, -INFINITY), Num(info, 2, INFINITY),
                                      (size_t)Num(info, 3, 1000), (int)Num(info, 4, -1)));
  }
  Napi::Value Diff(const Napi::CallbackInfo& info) {
    Model& a = M(info.Env());
    const Model* b = &a;
    if (info.Length() > 3 && info[3].IsObject()) {
      Handle* other = Napi::ObjectWrap<Handle>::Unwrap(info[3].As<Napi::Object>());
      b = &other->M(info.Env());
    }
    return Str(info.Env(), diff_json(a, Dev(info, 0), Num(info, 1, 0), *b, Num(info, 2, INFINITY)));
  }
  Napi::Value Summary(const Napi::CallbackInfo& info) { return Str(info.Env(), summary_json(M(info.Env()))); }
  // Note [Snapshot extras] (model.h)
  Napi::Value Extras(const Napi::CallbackInfo& info) { return Str(info.Env(), extras_json(M(info.Env()))); }
  Napi::Value ExportPickle(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (info.Length() < 1 || !info[0].IsString()) throw Napi::TypeError::New(env, "exportPickle(outPath, atUs?)");
    std::string out = info[0].As<Napi::String>().Utf8Value();
    std::string bytes = export_pickle(M(env), Num(info, 1, INFINITY));
    std::ofstream f(out, std::ios::binary | std::ios::trunc);
    if (!f) throw Napi::Error::New(env, "cannot write " + out + ": " + strerror(errno));
    f.write(bytes.data(), (std::streamsize)bytes.size());
    if (!f) throw Napi::Error::New(env, "writing " + out + " failed: " + strerror(errno) + " (disk full?)");
    return env.Undefined();
  }
  // Policy arguments: one of the four names (Note [Policies] in native/allocator/src/what_if.cc).
  static core::Policy PolicyArg(Napi::Env env, const Napi::Value& v, const char* where) {
    core::Policy p;
    if (!v.IsString() || !core::parse_policy(v.As<Napi::String>().Utf8Value(), &p))
      throw Napi::TypeError::New(
          env, std::string(where) + ": policy must be 'pytorch', 'pytorch-expandable', 'lens' or 'lens-no-trim'");
    return p;
  }
  static uint64_t BytesArg(Napi::Env env, const Napi::Value& v, const char* what) {
    double d = v.IsNumber() ? v.As<Napi::Number>().DoubleValue() : -1;
    if (!(d >= 0 && d < 9.0e15) || d != std::floor(d))
      throw Napi::TypeError::New(env, std::string(what) + " must be a whole number of bytes");
    return (uint64_t)d;
  }
  // A PYTORCH_CUDA_ALLOC_CONF text for the pytorch policies (Note [Settings of the data] in alloc_conf.h); its
  // errors are the user's to fix, so they say what PyTorch would say.
  static AllocConf ConfArg(Napi::Env env, const Napi::Value& v, const char* where) {
    if (!v.IsString()) throw Napi::TypeError::New(env, std::string(where) + ": allocConf must be a string");
    try {
      return parse_alloc_conf(v.As<Napi::String>().Utf8Value());
    } catch (const std::invalid_argument& e) {
      throw Napi::Error::New(env, std::string(where) + ": " + e.what());
    }
  }
  // whatIf(device, tUs, q?: {policy?, capacityBytes?, requests?, allocConf?}) → JSON (shape in policy_replay.h).
  Napi::Value WhatIf(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    Model& m = M(env);
    if (info.Length() < 2 || !info[0].IsNumber() || !info[1].IsNumber())
      throw Napi::TypeError::New(env, "whatIf(device, tUs, q?): device and tUs must be numbers");
    WhatIfQuery q;
    if (info.Length() > 2 && info[2].IsObject()) {
      Napi::Object o = info[2].As<Napi::Object>();
      Napi::Value p = o.Get("policy"), c = o.Get("capacityBytes"), r = o.Get("requests"), a = o.Get("allocConf");
      if (!p.IsUndefined() && !p.IsNull()) q.have_policy = true, q.policy = PolicyArg(env, p, "whatIf");
      if (!a.IsUndefined() && !a.IsNull()) q.have_conf = true, q.conf = ConfArg(env, a, "whatIf");
      if (!c.IsUndefined() && !c.IsNull()) q.capacity = BytesArg(env, c, "whatIf: capacityBytes");
      if (!r.IsUndefined() && !r.IsNull()) {
        if (!r.IsArray()) throw Napi::TypeError::New(env, "whatIf: requests must be an array of byte counts");
        Napi::Array a = r.As<Napi::Array>();
        for (uint32_t k = 0; k < a.Length(); k++) q.requests.push_back(BytesArg(env, a.Get(k), "whatIf: each request"));
      }
    }
    try {
      return Str(env, what_if_json(m, Dev(info, 0), Num(info, 1, INFINITY), q));
    } catch (const std::exception& e) {
      throw Napi::Error::New(env, e.what());
    }
  }
  // replay(device, policy, capacityBytes?, q?: {allocConf?}) → JSON (shape in policy_replay.h).
  Napi::Value Replay(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    Model& m = M(env);
    if (info.Length() < 2 || !info[0].IsNumber())
      throw Napi::TypeError::New(env, "replay(device, policy, capacityBytes?, q?)");
    core::Policy p = PolicyArg(env, info[1], "replay");
    uint64_t capacity = info.Length() > 2 && !info[2].IsUndefined() && !info[2].IsNull()
                            ? BytesArg(env, info[2], "replay: capacityBytes")
                            : 0;
    bool have_conf = false;
    AllocConf conf;
    if (info.Length() > 3 && info[3].IsObject()) {
      Napi::Value a = info[3].As<Napi::Object>().Get("allocConf");
      if (!a.IsUndefined() && !a.IsNull()) have_conf = true, conf = ConfArg(env, a, "replay");
    }
    try {
      return Str(env, replay_json(replay_policy(m, Dev(info, 0), p, capacity, have_conf ? &conf : nullptr)));
    } catch (const std::exception& e) {
      throw Napi::Error::New(env, e.what());
    }
  }
  Napi::Value EventCount(const Napi::CallbackInfo& info) {
    size_t n = 0;
    for (const auto& [i, d] : M(info.Env()).devices) n += d.count();
    return Napi::Number::New(info.Env(), (double)n);
  }
  Napi::Value Close(const Napi::CallbackInfo& info) {
    if (busy_ > 0) {
      close_pending_ = true;  // freed when the worker's query is answered (Note [Async queries])
      return info.Env().Undefined();
    }
    o_.model.reset();
    o_.capture.reset();
    return info.Env().Undefined();
  }

  // Note [Async queries]: the first answers of a big model (its lines, the whole run's bands, markers, summary) take
  // 20-170 ms each at 13 M events; on the extension host's thread they stall VS Code. queryAsync(kind, ...the sync
  // method's arguments) computes one on a libuv worker and resolves to the same JSON text the sync method returns.
  // While it runs the model is the worker's: every other call on this handle throws (M()), close() waits for it.
  // Callers (NativeModel.prefetch in src/core/base/model/open.ts) run one at a time and await it.
  class QueryWorker : public Napi::AsyncWorker {
   public:
    QueryWorker(Napi::Env env, Handle* h, Napi::Object self, std::function<std::string()> f)
        : Napi::AsyncWorker(env, "gpumemQuery"), deferred_(Napi::Promise::Deferred::New(env)), h_(h), f_(std::move(f)) {
      self_ = Napi::Persistent(self);  // the handle outlives its query
    }
    Napi::Promise Promise() { return deferred_.Promise(); }

   protected:
    void Execute() override {
      try {
        out_ = f_();
      } catch (const std::exception& e) {
        SetError(e.what());
      }
    }
    void done() {
      if (--h_->busy_ == 0 && h_->close_pending_) h_->o_.model.reset(), h_->o_.capture.reset();
    }
    void OnOK() override {
      done();
      deferred_.Resolve(Napi::String::New(Env(), out_));
    }
    void OnError(const Napi::Error& e) override {
      done();
      deferred_.Reject(e.Value());
    }

   private:
    Napi::Promise::Deferred deferred_;
    Handle* h_;
    Napi::ObjectReference self_;
    std::function<std::string()> f_;
    std::string out_;
  };

  Napi::Value QueryAsync(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (info.Length() < 1 || !info[0].IsString()) throw Napi::TypeError::New(env, "queryAsync(kind, ...args)");
    std::string kind = info[0].As<Napi::String>().Utf8Value();
    Model* m = &M(env);
    int dev = Dev(info, 1);
    std::function<std::string()> f;
    if (kind == "lineStats") {
      f = [m, dev] { return line_stats_json(*m, dev); };
    } else if (kind == "markers") {
      f = [m, dev] { return markers_json(*m, dev); };
    } else if (kind == "summary") {
      f = [m] { return summary_json(*m); };
    } else if (kind == "spans") {
      double t0 = Num(info, 2, -INFINITY), t1 = Num(info, 3, INFINITY);
      size_t n = (size_t)Num(info, 4, 1000);
      int owner = (int)Num(info, 5, -1);
      f = [m, dev, t0, t1, n, owner] { return spans_json(*m, dev, t0, t1, n, owner); };
    } else if (kind == "timeline") {
      double t0 = Num(info, 2, 0), t1 = Num(info, 3, 0);
      int buckets = (int)Num(info, 4, 100);
      bool owners = info.Length() > 5 && info[5].IsBoolean() && info[5].As<Napi::Boolean>().Value();
      f = [m, dev, t0, t1, buckets, owners] { return timeline_json(*m, dev, t0, t1, buckets, owners); };
    } else if (kind == "whatIf") {
      // queryAsync("whatIf", device, tUs, ...requestBytes): the summary's verdict probe (Note [First answers in turns]
      // in src/core/views/snapshot/openedCapture.ts: 20-30 ms at 13 M events on the host's thread)
      double t = Num(info, 2, INFINITY);
      WhatIfQuery q;
      for (size_t k = 3; k < info.Length(); k++)
        q.requests.push_back(BytesArg(env, info[k], "queryAsync whatIf: each request"));
      f = [m, dev, t, q] { return what_if_json(*m, dev, t, q); };
    } else {
      throw Napi::TypeError::New(env, "queryAsync: unknown query " + kind);
    }
    auto* w = new QueryWorker(env, this, info.This().As<Napi::Object>(), std::move(f));
    busy_++;
    w->Queue();
    return w->Promise();
  }

  Opened o_;
  int busy_ = 0;
  bool close_pending_ = false;
};

// Note [Async open]: openAsync(path) reads and models the file on a libuv worker thread, so the
// extension host's event loop keeps running (VS Code stays responsive and the panel paints its frame
// while a 10 M-event pickle is read); the promise resolves to a ModelHandle like `new ModelHandle(path)`
// gives, or rejects with the same message. The model is only touched by the worker until resolution,
// then only by the JS thread.
class OpenWorker : public Napi::AsyncWorker {
 public:
  OpenWorker(Napi::Env env, std::string path, bool background = false, TimeWindow window = {})
      : Napi::AsyncWorker(env, "gpumemOpen"), deferred_(Napi::Promise::Deferred::New(env)), background_(background) {
    o_.path = std::move(path);
    o_.window = window;
  }
  Napi::Promise Promise() { return deferred_.Promise(); }

 protected:
  void Execute() override {
    if (background_) {
      // The first view (Note [First view] in overview.cpp): after the overview is painted, the full open yields the CPU
      // to the page that shows it (on 2 cores the open otherwise slows the webview's load and first paint): it runs on
      // a thread of its own at a lower priority (nice +10, inherited by its helper threads), never on a libuv pool
      // thread, whose priority could not be raised again. The pool thread waits without using CPU.
      try {
        std::thread t([this] {
          setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 10);
          run();
        });
        t.join();
        return;
      } catch (const std::system_error&) {
        // no thread to be had: read here, at the usual priority
      }
    }
    run();
  }
  void run() {
    try {
      open_into(o_);
    } catch (const std::exception& e) {
      error_ = e.what();
    } catch (...) {
      error_ = "cannot read " + o_.path + ": unexpected failure in the reader";
    }
    if (!error_.empty()) SetError(error_);
  }
  void OnOK() override {
    Napi::Env env = Env();
    try {
      Napi::FunctionReference* ctor = env.GetInstanceData<Napi::FunctionReference>();
      Napi::Object h = ctor->New({Napi::External<Opened>::New(env, &o_)});
      deferred_.Resolve(h);
    } catch (const Napi::Error& e) {
      deferred_.Reject(e.Value());
    }
  }
  void OnError(const Napi::Error& e) override { deferred_.Reject(e.Value()); }

 private:
  Napi::Promise::Deferred deferred_;
  Opened o_;
  bool background_ = false;
  std::string error_;
};

// The first view of a file as JSON (Note [First view] in overview.cpp; a capture's from its index, Note [Capture first
// view]); with index_only, a capture's index or an error (never a pass over a file: Note [Rank row from the index]).
std::string overview_of_file(const std::string& path, int buckets, bool index_only,
                             const OverviewWindow* window = nullptr) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot open " + path + ": " + strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || st.st_size <= 0) {
    close(fd);
    throw std::runtime_error("cannot read " + path);
  }
  size_t len = (size_t)st.st_size;
  // Read once, front to back: populated just ahead of the scan and dropped behind it (Note [Overview
  // window] in overview.cpp), so the file never becomes resident at once.
  auto t0 = std::chrono::steady_clock::now();
  void* p = mmap(nullptr, len, PROT_READ, MAP_PRIVATE, fd, 0);
  if (const char* tm = getenv("GPUMEM_READER_TIMINGS"); tm && *tm == '1')
    fprintf(stderr, "gpumem overview: map %.1f ms\n",
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  close(fd);
  if (p == MAP_FAILED) throw std::runtime_error("cannot map " + path + ": " + strerror(errno));
  struct Unmap {
    void* p;
    size_t n;
    ~Unmap() { munmap(p, n); }
  } unmap{p, len};
  const auto* bytes = static_cast<const uint8_t*>(p);
  // A capture's first view comes from its index (Note [Capture first view] in capture_overview.cpp).
  if (len >= sizeof fmt::kMagic && memcmp(bytes, fmt::kMagic, sizeof fmt::kMagic) == 0)
    return capture_overview_json(bytes, len, buckets, index_only, window);
  if (index_only) throw std::runtime_error(path + " is not a capture: it has no index");
  return pickle_overview_json(bytes, len, buckets, true);
}

// Note [First view] (overview.cpp): overviewAsync(path, buckets[, indexOnly]) reads a pickle's allocated/reserved
// overview on a libuv worker and resolves to its JSON text (or rejects: the caller waits for the full open).
// A capture's comes from its index, or a tree-less pass when it has none (Note [Capture first view]).
class OverviewWorker : public Napi::AsyncWorker {
 public:
  OverviewWorker(Napi::Env env, std::string path, int buckets, bool index_only, std::optional<OverviewWindow> window)
      : Napi::AsyncWorker(env, "gpumemOverview"),
        deferred_(Napi::Promise::Deferred::New(env)),
        path_(std::move(path)),
        buckets_(buckets),
        index_only_(index_only),
        window_(window) {}
  Napi::Promise Promise() { return deferred_.Promise(); }

 protected:
  void Execute() override {
    try {
      json_ = overview_of_file(path_, buckets_, index_only_, window_ ? &*window_ : nullptr);
    } catch (const std::exception& e) {
      SetError(e.what());
    } catch (...) {
      SetError("overview of " + path_ + ": unexpected failure");
    }
  }
  void OnOK() override { deferred_.Resolve(Napi::String::New(Env(), json_)); }
  void OnError(const Napi::Error& e) override { deferred_.Reject(e.Value()); }

 private:
  Napi::Promise::Deferred deferred_;
  std::string path_, json_;
  int buckets_;
  bool index_only_;
  std::optional<OverviewWindow> window_;
};

}  // namespace gpumem

static Napi::Object Init(Napi::Env env, Napi::Object exports) {
  Napi::Function ctor = gpumem::Handle::Define(env);
  env.SetInstanceData<Napi::FunctionReference>(new Napi::FunctionReference(Napi::Persistent(ctor)));
  exports.Set("ModelHandle", ctor);
  exports.Set("openAsync", Napi::Function::New(env, [](const Napi::CallbackInfo& info) -> Napi::Value {
                Napi::Env env = info.Env();
                if (info.Length() < 1 || !info[0].IsString())
                  throw Napi::TypeError::New(env, "openAsync(path): path must be a string");
                // openAsync(path, background): background lowers the reading thread's priority (Note [First view]).
                bool background = info.Length() > 1 && info[1].IsBoolean() && info[1].As<Napi::Boolean>().Value();
                // openAsync(path, background, fromUs, toUs): only that time window of a pickle (Note [Range-first
                // open] in range_open.cpp).
                gpumem::TimeWindow window;
                if (info.Length() > 3 && info[2].IsNumber() && info[3].IsNumber()) {
                  window.from_us = info[2].As<Napi::Number>().Int64Value();
                  window.to_us = info[3].As<Napi::Number>().Int64Value();
                }
                auto* w = new gpumem::OpenWorker(env, info[0].As<Napi::String>().Utf8Value(), background, window);
                Napi::Promise p = w->Promise();
                w->Queue();
                return p;
              }));
  exports.Set("overviewAsync", Napi::Function::New(env, [](const Napi::CallbackInfo& info) -> Napi::Value {
                Napi::Env env = info.Env();
                if (info.Length() < 2 || !info[0].IsString() || !info[1].IsNumber())
                  throw Napi::TypeError::New(env, "overviewAsync(path, buckets): a string and a number");
                const bool index_only = info.Length() > 2 && info[2].IsBoolean() && info[2].As<Napi::Boolean>().Value();
                // overviewAsync(path, buckets, indexOnly, t0Us, t1Us): a capture's buckets over that window.
                std::optional<gpumem::OverviewWindow> window;
                if (info.Length() > 4 && info[3].IsNumber() && info[4].IsNumber())
                  window = gpumem::OverviewWindow{info[3].As<Napi::Number>().DoubleValue(),
                                                  info[4].As<Napi::Number>().DoubleValue()};
                auto* w = new gpumem::OverviewWorker(env, info[0].As<Napi::String>().Utf8Value(),
                                                     info[1].As<Napi::Number>().Int32Value(), index_only, window);
                Napi::Promise p = w->Promise();
                w->Queue();
                return p;
              }));
  // captureIndex(path, buckets): a capture's first view from its index alone, on the calling thread (the index is a
  // few KiB at the file's end: the CLI's rank table reads it this way, Note [Rank row from the index]); throws when
  // the file is not a capture with an index.
  exports.Set("captureIndex", Napi::Function::New(env, [](const Napi::CallbackInfo& info) -> Napi::Value {
                Napi::Env env = info.Env();
                if (info.Length() < 2 || !info[0].IsString() || !info[1].IsNumber())
                  throw Napi::TypeError::New(env, "captureIndex(path, buckets): a string and a number");
                try {
                  return Napi::String::New(env,
                                           gpumem::overview_of_file(info[0].As<Napi::String>().Utf8Value(),
                                                                    info[1].As<Napi::Number>().Int32Value(), true));
                } catch (const std::exception& e) {
                  throw Napi::Error::New(env, e.what());
                }
              }));
  return exports;
}

NODE_API_MODULE(gpumem_addon, Init)
