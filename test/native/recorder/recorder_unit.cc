// recorder_unit.cc — unit tests of the recorder's parts against a fake core (fake_core.cc), built
// under ASan+UBSan and under TSan (recorder_tests.mk). Ends with "N passed, N failed" (test/native/check.h).
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "../../../native/allocator/include/gpumem_allocator.h"
#include "../../../native/format/gpumem_format.h"
#include "../../../native/format/json.h"
#include "../../../native/format/pickle_emit.h"
#include "../check.h"
#include "address_map.h"
#include "control_commands.h"
#include "control_server.h"
#include "recorder.h"
#include "sequencer.h"
#include "snapshot_pickle.h"
#include "writer.h"

using namespace gpumem;

using t::run;

static std::string tmpdir() {
  char t[] = "/tmp/gpumem-rec-XXXXXX";
  return mkdtemp(t);
}

struct Rec {
  uint8_t type, device;
  std::string payload;
};
static std::vector<Rec> read_records(const std::string& path, std::string* header) {
  std::ifstream f(path, std::ios::binary);
  std::string d((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  fmt::FileHeader fh;
  std::memcpy(&fh, d.data(), sizeof fh);
  *header = d.substr(sizeof fh, fh.json_bytes);
  std::vector<Rec> out;
  size_t pos = sizeof fh + fh.json_bytes;
  while (pos + sizeof(fmt::RecordHeader) <= d.size()) {
    fmt::RecordHeader h;
    std::memcpy(&h, d.data() + pos, sizeof h);
    if (pos + sizeof h + h.payload_bytes > d.size()) break;
    out.push_back(Rec{h.type, h.device, d.substr(pos + sizeof h, h.payload_bytes)});
    pos += sizeof h + h.payload_bytes;
  }
  return out;
}

// Python as the judge of the emitter: the unpickled value's repr must be what we meant.
static std::string python_repr(const std::string& pickle) {
  std::string dir = tmpdir(), path = dir + "/p.pickle";
  std::ofstream(path, std::ios::binary) << pickle;
  std::string cmd = "python3 -c \"import pickle,sys; print(repr(pickle.load(open(sys.argv[1],'rb'))))\" " + path;
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

int main() {
#ifdef __SANITIZE_THREAD__
  t::set_suite("recorder-tsan");
#else
  t::set_suite("recorder");
#endif
  // Note [Flat address map]: random inserts, overwrites, lookups and erases of 512-byte aligned addresses (runs
  // of neighbours collide in the table), against std::map, through several doublings and a shrink to empty.
  run("address_map_matches_a_reference_map", [] {
    gpumem::rec::AddressMap<uint64_t> m;
    std::map<uint64_t, uint64_t> ref;
    uint64_t x = 88172645463325252ull;
    auto rnd = [&] { return x ^= x << 13, x ^= x >> 7, x ^= x << 17; };
    for (int i = 0; i < 200000; i++) {
      const uint64_t key = 0x7f0000000000ull + (rnd() % 20000) * 512;
      const uint64_t op = rnd() % 10;
      if (op < 5) {
        m.put(key, uint64_t(i));
        ref[key] = uint64_t(i);
      } else if (op < 8) {
        CHECK_EQ(m.erase(key), ref.erase(key) == 1);
      } else {
        const uint64_t* v = m.find(key);
        auto it = ref.find(key);
        CHECK_EQ(v != nullptr, it != ref.end());
        if (v && it != ref.end()) CHECK_EQ(*v, it->second);
      }
      CHECK_EQ(m.size(), ref.size());
    }
    for (auto& kv : ref) {
      const uint64_t* v = m.find(kv.first);
      CHECK(v && *v == kv.second);
    }
    for (auto& kv : ref) CHECK(m.erase(kv.first));
    CHECK_EQ(m.size(), size_t(0));
    CHECK(m.find(0x7f0000000000ull) == nullptr);
  });

  run("json_round_trip_and_unicode", [] {
    json::Value v;
    std::string err;
    CHECK(
        json::parse(R"({"a":[1,-2,2.5,true,false,null],"s":"\u00e9\ud83d\ude00\n","big":9007199254740993})", &v, &err));
    CHECK(v.find("big")->as_int() == 9007199254740993LL);  // exact beyond double precision
    CHECK(v.find("s")->as_string() == "\xc3\xa9\xf0\x9f\x98\x80\n");
    CHECK(v.dump() == R"({"a":[1,-2,2.5,true,false,null],"s":"é😀\n","big":9007199254740993})");
  });

  run("json_errors_name_the_offset", [] {
    json::Value v;
    std::string err;
    CHECK(!json::parse("{\"a\":}", &v, &err) && err.find("at byte 5") != std::string::npos);
    CHECK(!json::parse("{\"a\":1} x", &v, &err) && err.find("trailing") != std::string::npos);
    CHECK(!json::parse(std::string(100, '['), &v, &err) && err.find("too deep") != std::string::npos);
    CHECK(!json::parse("\"abc", &v, &err) && err.find("unterminated") != std::string::npos);
  });

  run("pickle_emitter_values_as_python_reads_them", [] {
    fmt::PickleEmitter p;
    p.begin();
    p.begin_list();
    for (int64_t v :
         std::vector<int64_t>{0, 255, 256, 65535, 65536, -1, -129, 2147483647, 2147483648LL, -2147483649LL, INT64_MIN})
      p.integer(v);
    p.uinteger(UINT64_MAX);
    const uint8_t big[] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};  // 2**128
    p.big_integer(big, sizeof big);
    p.float64(-0.5);
    p.str(std::string(300, 'y').substr(0, 3));
    p.str(std::string(256, 'z'));
    p.bytes_value("ab");
    p.begin_tuple();
    p.end_tuple();
    p.begin_dict();
    p.end_dict();
    p.none();
    p.boolean(false);
    p.end_list();
    p.end();
    std::string want =
        "[0, 255, 256, 65535, 65536, -1, -129, 2147483647, 2147483648, -2147483649, "
        "-9223372036854775808, 18446744073709551615, 340282366920938463463374607431768211456, "
        "-0.5, 'yyy', '" +
        std::string(256, 'z') + "', b'ab', (), {}, None, False]";
    CHECK(python_repr(p.bytes()) == want);
  });

  run("no_python_means_no_stack", [] { CHECK(rec::capture_stack() == 0); });

  run("configure_rejects_bad_types_clearly", [] {
    std::string err;
    CHECK(!rec::configure(R"({"stacks": "yes"})", rec::control::handle_line, &err) &&
          err.find("\"stacks\" must be true or false") == 0);
    CHECK(!rec::configure(R"({"sample_interval_ms": -1})", rec::control::handle_line, &err) &&
          err.find("non-negative") != std::string::npos);
    CHECK(!rec::configure(R"({"capture_path": 3})", rec::control::handle_line, &err) &&
          err.find("must be a string") != std::string::npos);
    CHECK(!rec::configure("[]", rec::control::handle_line, &err) && err.find("JSON object") != std::string::npos);
    CHECK(!rec::configure(R"({"capture_path": "/nonexistent-dir/x.gpumem"})", rec::control::handle_line, &err) &&
          err.find("cannot create capture file") != std::string::npos);
  });

  // Everything below shares one capture (one per process, like a workload).
  std::string dir = tmpdir(), path = dir + "/c.gpumem", sock = dir + "/ctl.sock";
  run("configure_opens_the_capture_and_the_socket", [&] {
    std::string err;
    std::string cfg = R"({"capture_path":")" + path + R"(","control_socket":")" + sock +
                      R"(","sample_interval_ms":5,"header":{"who":"unit"}})";
    CHECK(rec::configure(cfg.c_str(), rec::control::handle_line, &err));
    CHECK(rec::recording());
    rec::on_init(1);
  });

  constexpr int kThreads = 8, kPer = 20000;
  std::atomic<bool> emitting{true};
  std::atomic<int> replies{0};
  run("concurrent_emit_and_control_clients", [&] {
    std::vector<std::thread> ts;
    for (int t = 0; t < kThreads; t++)
      ts.emplace_back([t] {
        for (int i = 0; i < kPer; i++) {
          fmt::BlockEvent e{rec::now_ns(), uint64_t(t), uint64_t(i), 0, 0, 0, rec::thread_number()};
          rec::emit(fmt::REC_ALLOC, 0, 0, &e, sizeof e);
          if (i % 5000 == 0) rec::writer::flush();
        }
      });
    std::vector<std::thread> clients;
    for (int c = 0; c < 4; c++)
      clients.emplace_back([&] {
        int fd = socket(AF_UNIX, SOCK_STREAM, 0);
        sockaddr_un a{};
        a.sun_family = AF_UNIX;
        std::strcpy(a.sun_path, sock.c_str());
        if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return;
        std::string got;
        for (int i = 0; i < 50; i++) {
          const char req[] = "{\"cmd\":\"ping\"}\n";
          send(fd, req, sizeof req - 1, MSG_NOSIGNAL);
          char buf[4096];
          while (got.find('\n') == std::string::npos) {
            ssize_t n = recv(fd, buf, sizeof buf, 0);
            if (n <= 0) break;
            got.append(buf, size_t(n));
          }
          size_t nl = got.find('\n');
          if (nl == std::string::npos) break;
          if (got.compare(0, 10, "{\"ok\":true") == 0) replies++;
          got.erase(0, nl + 1);
        }
        close(fd);
      });
    for (auto& t : ts) t.join();
    for (auto& c : clients) c.join();
    emitting = false;
    CHECK(replies == 4 * 50);
  });

  run("control_handle_line_errors_and_id_echo", [] {
    const std::string unknown = rec::control::handle_line(R"({"cmd":"nope","id":7})");
    CHECK(unknown ==
          R"J({"ok":false,"error":"unknown cmd \"nope\" (expected ping, empty_cache, snapshot or mark)","id":7})J");
    const std::string emptied = rec::control::handle_line(R"({"cmd":"empty_cache"})");
    CHECK(emptied == R"({"ok":true,"reserved_before":2097152,"reserved_after":0})");
  });

  run("oom_trace_entry_matches_pytorch", [&] {
    fmt::OomRec o{rec::now_ns(), 3ull << 30, 123456789, 1ull << 30, 2 << 20, 512, 1 << 20, 0, 0, 0, 0};
    rec::emit(fmt::REC_OOM, 0, 0, &o, sizeof o);
    std::string d = tmpdir(), ours = d + "/ours.pickle";
    std::ofstream(ours, std::ios::binary) << rec::snap::build();
    // The fixture's oom entry is the reference for keys and types; the values are the ones we emitted.
    std::string cmd =
        "python3 -c \"import pickle,sys\n"
        "ref=[e for e in pickle.load(open(sys.argv[1],'rb'))['device_traces'][0] if e['action']=='oom'][0]\n"
        "ours=[e for e in pickle.load(open(sys.argv[2],'rb'))['device_traces'][0] if e['action']=='oom'][-1]\n"
        "same={k:type(v) for k,v in ref.items()}=={k:type(v) for k,v in ours.items()}\n"
        "sys.exit(0 if same and ours['device_free']==123456789 and ours['size']==3<<30 else 1)\" " GPUMEM_FIXTURES
        "/mlp-oom.pickle " +
        ours;
    CHECK(std::system(cmd.c_str()) == 0);
  });

  run("file_has_every_record_in_each_threads_order", [&] {
    rec::control::stop();
    rec::shutdown(3);
    std::string header;
    auto recs = read_records(path, &header);
    json::Value h;
    std::string err;
    CHECK(json::parse(header, &h, &err));
    CHECK(h.find("who")->as_string() == "unit");
    CHECK(h.find("pid")->as_int() == getpid());
    std::vector<int64_t> last(kThreads, -1);
    int n = 0, samples = 0, states = 0, devices = 0;
    std::map<uint32_t, std::string> strings;
    std::string device_name;
    for (auto& r : recs) {
      if (r.type == fmt::REC_STRING) {
        fmt::StringRec sr;
        std::memcpy(&sr, r.payload.data(), sizeof sr);
        strings[sr.id] = r.payload.substr(sizeof sr, sr.len);
      }
      if (r.type == fmt::REC_DEVICE_SAMPLE) samples++;
      if (r.type == fmt::REC_STATE) states++;
      if (r.type == fmt::REC_DEVICE) {
        devices++;
        fmt::DeviceRec dr;
        std::memcpy(&dr, r.payload.data(), sizeof dr);
        device_name = strings[dr.name];
        CHECK(dr.total_bytes == 1ull << 30);
      }
      if (r.type != fmt::REC_ALLOC) continue;
      fmt::BlockEvent e;
      std::memcpy(&e, r.payload.data(), sizeof e);
      CHECK(int64_t(e.size) == last[e.addr] + 1);
      last[e.addr] = int64_t(e.size);
      n++;
    }
    CHECK(n == kThreads * kPer);
    CHECK(devices == 1);
    CHECK(device_name == "fake device");  // the backend's identity (core::device_identity), not the recorder's guess
    CHECK(samples > 0);
    CHECK(states == 1);  // the exit state of an explicit shutdown
    CHECK(recs.back().type == fmt::REC_END);
    fmt::EndRec end;
    std::memcpy(&end, recs.back().payload.data(), sizeof end);
    CHECK(end.exit_code == 3);
    CHECK(access(sock.c_str(), F_OK) != 0);  // the socket file is gone
  });

  // Note [Deferred observation]: producers on several threads (PyTorch's allocator lock serializes one device's, not
  // two devices'), a thread that drains whenever it likes (a figures read) and the sequencer's own thread; every
  // event is applied once, each producer's in the order it pushed them, and nothing is queued after stop().
  run("sequencer_applies_each_event_once_in_each_threads_order", [] {
    namespace sq = rec::sequencer;
    static std::vector<std::pair<uint32_t, uint64_t>> applied;  // under the drain lock: apply is never concurrent
    applied.clear();
    CHECK(sq::start([](const sq::Event& e) { applied.emplace_back(e.thread, e.addr); }));
    CHECK(!sq::start([](const sq::Event&) {}));  // already running
    constexpr int kProducers = 3, kPer = 60000;  // 180,000 > kMaxItems: some batch is applied by a producer
    std::atomic<bool> done{false};
    std::thread reader([&] {
      while (!done.load()) sq::drain();
    });
    std::vector<std::thread> producers;
    for (int p = 0; p < kProducers; p++)
      producers.emplace_back([p] {
        for (int i = 0; i < kPer; i++) CHECK(sq::push(sq::Event{0, uint64_t(i), 512, 0, 0, uint32_t(p), p, 0}));
      });
    for (auto& th : producers) th.join();
    done.store(true);
    reader.join();
    sq::stop();
    CHECK(!sq::running());
    CHECK(!sq::push(sq::Event{}));  // the caller applies it itself
    CHECK_EQ(applied.size(), size_t(kProducers * kPer));
    std::vector<int64_t> last(kProducers, -1);
    bool ordered = true;
    for (const auto& a : applied) {
      ordered = ordered && int64_t(a.second) == last[a.first] + 1;
      last[a.first] = int64_t(a.second);
    }
    CHECK(ordered);
    const sq::Counters c = sq::counters();
    CHECK_EQ(c.events, uint64_t(kProducers * kPer));
    CHECK(c.max_depth <= sq::kMaxItems + kProducers);
  });

  // Note [Folded frees]: a FREE_REQUESTED and its FREE_COMPLETED pushed back to back by one thread take one slot, and
  // are applied as two entries in order, each with its own time; an entry or record queued between them, another
  // thread's FREE_COMPLETED, a different block or a FREE_COMPLETED alone are never folded.
  run("sequencer_folds_a_free_pair_and_applies_both_in_order", [] {
    namespace sq = rec::sequencer;
    struct Seen {
      int32_t action;
      uint64_t t, addr;
      uint32_t stack, thread;
    };
    static std::vector<Seen> applied;
    applied.clear();
    CHECK(sq::start([](const sq::Event& e) { applied.push_back({e.action, e.t_ns, e.addr, e.stack, e.thread}); }));
    const uint64_t folded0 = sq::counters().folded;
    auto ev = [](uint64_t t, int32_t action, uint64_t addr, uint32_t thread, uint32_t stack = 0) {
      return sq::Event{t, addr, 512, 9, stack, thread, 0, action};
    };
    constexpr int kPairs = 1000;
    for (int i = 0; i < kPairs; i++) {
      const uint64_t t = 1000 + uint64_t(i) * 10, a = 0x1000 + uint64_t(i) * 512;
      CHECK(sq::push(ev(t, 0, a, 1, 7)));
      CHECK(sq::push(ev(t + 1, sq::kFreeRequested, a, 1)));
      CHECK(sq::push(ev(t + 4, sq::kFreeCompleted, a, 1)));
    }
    sq::drain();
    // The sequencer's thread may drain between the two entries of a pair (every 5 ms): at most a few are not folded.
    const uint64_t folded = sq::counters().folded - folded0;
    CHECK(folded >= uint64_t(kPairs - 10));
    CHECK(folded <= uint64_t(kPairs));
    // Never folded, whenever the thread drains:
    const uint64_t before = sq::counters().folded;
    CHECK(sq::push(ev(50000, sq::kFreeRequested, 0xB000, 1)));
    const uint32_t marker = 3;
    sq::record(0, 0, 0, &marker, sizeof marker);  // a record between the two (no capture open: written nowhere)
    CHECK(sq::push(ev(50002, sq::kFreeCompleted, 0xB000, 1)));
    CHECK(sq::push(ev(50010, sq::kFreeRequested, 0xC000, 1)));
    CHECK(sq::push(ev(50011, sq::kFreeCompleted, 0xC000, 2)));  // another thread's
    CHECK(sq::push(ev(50020, sq::kFreeRequested, 0xD000, 1)));
    CHECK(sq::push(ev(50021, sq::kFreeCompleted, 0xD200, 1)));  // another block
    CHECK(sq::push(ev(50030, sq::kFreeCompleted, 0xE000, 1)));  // alone
    sq::stop();
    CHECK_EQ(sq::counters().folded, before);
    // Every entry applied once, in the order pushed, with its own time, action, block and stack.
    std::vector<Seen> want;
    for (int i = 0; i < kPairs; i++) {
      const uint64_t t = 1000 + uint64_t(i) * 10, a = 0x1000 + uint64_t(i) * 512;
      want.push_back({0, t, a, 7, 1});
      want.push_back({sq::kFreeRequested, t + 1, a, 0, 1});
      want.push_back({sq::kFreeCompleted, t + 4, a, 0, 1});
    }
    want.push_back({sq::kFreeRequested, 50000, 0xB000, 0, 1});
    want.push_back({sq::kFreeCompleted, 50002, 0xB000, 0, 1});
    want.push_back({sq::kFreeRequested, 50010, 0xC000, 0, 1});
    want.push_back({sq::kFreeCompleted, 50011, 0xC000, 0, 2});
    want.push_back({sq::kFreeRequested, 50020, 0xD000, 0, 1});
    want.push_back({sq::kFreeCompleted, 50021, 0xD200, 0, 1});
    want.push_back({sq::kFreeCompleted, 50030, 0xE000, 0, 1});
    CHECK_EQ(applied.size(), want.size());
    bool same = applied.size() == want.size();
    for (size_t i = 0; same && i < want.size(); i++)
      same = applied[i].action == want[i].action && applied[i].t == want[i].t && applied[i].addr == want[i].addr &&
             applied[i].stack == want[i].stack && applied[i].thread == want[i].thread;
    CHECK(same);
  });

  return t::finish();
}
