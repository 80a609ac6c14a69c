// C++ unit tests of the reader core (no Node): pickle opcodes and limits, capture decoding across
// feed boundaries, and replay of address ranges. The end-to-end checks against Python live in
// test/unit/reader*.test.mjs; these pin the pieces the fuzzers hammer.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "../../../test/native/check.h"
#include "aggregate.h"
#include "capture_decoder.h"
#include "dump.h"
#include "exercise.h"
#include "gpumem_format.h"
#include "json.h"
#include "pickle_reader.h"
#include "policy_replay.h"
#include "replay.h"
#include "snapshot_import.h"
#include "torch_snapshot.h"

using namespace gpumem;

using t::run;

static std::vector<uint8_t> bytes(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }

static std::string pickle_error(const std::string& data) {
  try {
    auto b = bytes(data);
    PickleTree t(b.data(), b.size());
  } catch (const PickleError& e) {
    return e.what();
  }
  return "";
}

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--dump") == 0) return dump_files(argc - 2, argv + 2);  // tests/dump.h
  t::set_suite("reader");
  run("integers of every width, including u64 beyond 2^63 and negative LONG1", [] {
    // [K 5, M 0x1234, J -2, LONG1(9 bytes) 2^64-1, LONG1(1) -1, I"42"]
    std::string p = std::string("\x80\x02]q\x00(K\x05M\x34\x12J\xfe\xff\xff\xff", 16) +
                    std::string("\x8a\x09\xff\xff\xff\xff\xff\xff\xff\xff\x00", 11) + std::string("\x8a\x01\xff", 3) +
                    "I42\ne.";
    auto b = bytes(p);
    PickleTree t(b.data(), b.size());
    const auto& items = t.items(t.root());
    CHECK(items.size() == 6);
    CHECK(t.as_int(items[0]) == 5);
    CHECK(t.as_int(items[1]) == 0x1234);
    CHECK(t.as_int(items[2]) == -2);
    CHECK(t.at(items[3]).type == PType::UInt && t.as_u64(items[3]) == UINT64_MAX);
    CHECK(t.as_int(items[4]) == -1);
    CHECK(t.as_int(items[5]) == 42);
  });
  run("memo: BINPUT/BINGET share one container, later APPENDs are visible through both", [] {
    // d = {'a': l, 'b': l} with l = [1] memoised as 0, filled after the BINGET
    std::string p = std::string(
        "\x80\x02}(X\x01\x00\x00\x00"
        "a]q\x00X\x01\x00\x00\x00"
        "bh\x00uh\x00K\x01"
        "a0.",
        30);
    auto b = bytes(p);
    PickleTree t(b.data(), b.size());
    uint32_t a = t.get(t.root(), "a"), bb = t.get(t.root(), "b");
    CHECK(a == bb);
    CHECK(t.items(a).size() == 1 && t.as_int(t.items(a)[0]) == 1);
  });
  run("item arena: lists grown alternately keep their own items in order", [] {
    // A = [], B = []; A.append(1); B.append(2); A += [3, 4]; B += [5, 6, 7]; A.append(300); d = {}; d['k'] = A
    // → (A, B, d): each growth of one list lands after the other's items in the arena (Note [Item arena]).
    static const char raw[] =
        "\x80\x02]q\x00]q\x01"
        "h\x00K\x01"
        "a0"
        "h\x01K\x02"
        "a0"
        "h\x00(K\x03K\x04"
        "e0"
        "h\x01(K\x05K\x06K\x07"
        "e0"
        "h\x00M\x2c\x01"
        "a0"
        "}q\x02"
        "X\x01\x00\x00\x00"
        "kh\x00"
        "s"
        "\x87.";
    std::string p(raw, sizeof raw - 1);
    auto b = bytes(p);
    PickleTree t(b.data(), b.size());
    const auto& top = t.items(t.root());
    CHECK(top.size() == 3);
    auto ints = [&](uint32_t n) {
      std::vector<int64_t> v;
      for (uint32_t x : t.items(n)) v.push_back(t.as_int(x));
      return v;
    };
    CHECK((ints(top[0]) == std::vector<int64_t>{1, 3, 4, 300}));
    CHECK((ints(top[1]) == std::vector<int64_t>{2, 5, 6, 7}));
    CHECK(t.get(top[2], "k") == top[0]);
    // Small integers are shared nodes: equal values, one node.
    CHECK(t.items(top[0])[0] != t.items(top[1])[0] && t.as_int(t.items(top[0])[0]) == 1);
  });
  run("floats, tuples, booleans, None and raw-unicode-escape text", [] {
    // [1.5, (True, False, None), 'A\u00e9'] — BINFLOAT is big-endian; UNICODE is protocol-0 text
    std::string p =
        std::string("\x80\x02](G\x3f\xf8\x00\x00\x00\x00\x00\x00", 13) + "\x88\x89N\x87" + "VA\\u00e9\n" + "e.";
    auto b = bytes(p);
    PickleTree t(b.data(), b.size());
    const auto& items = t.items(t.root());
    CHECK(items.size() == 3);
    CHECK(t.as_number(items[0]) == 1.5);
    CHECK(t.at(items[1]).type == PType::Tuple && t.items(items[1]).size() == 3);
    CHECK(t.at(t.items(items[1])[0]).flag && !t.at(t.items(items[1])[1]).flag);
    CHECK(t.at(t.items(items[1])[2]).type == PType::None);
    CHECK(t.str(items[2]) == "A\xc3\xa9");  // é as UTF-8
  });
  run("code opcodes are refused with name, operands and offset", [] {
    std::string e = pickle_error(
        "\x80\x02"
        "cos\nsystem\n"
        "X\x02\x00\x00\x00lsR.");
    CHECK(e.find("opcode GLOBAL 'os system' at byte 2") != std::string::npos);
    e = pickle_error(std::string("\x80\x04\x8c\x05posix\x8c\x06system\x93.", 19));
    CHECK(e.find("opcode STACK_GLOBAL 'posix system' at byte 17") != std::string::npos);
    e = pickle_error(std::string("\x80\x02}b.", 5));
    CHECK(e.find("opcode BUILD at byte 3") != std::string::npos);
  });
  run("truncation, bad memo keys, unknown opcodes and newer protocols are clean errors", [] {
    CHECK(pickle_error(std::string("\x80\x02X\x10\x00\x00\x00"
                                   "abc",
                                   10))
              .find("truncated at byte 10") != std::string::npos);
    CHECK(pickle_error(std::string("\x80\x02]", 3)).find("without a STOP") != std::string::npos);
    CHECK(pickle_error(std::string("\x80\x02h\x07.", 5)).find("memo key 7 not found") != std::string::npos);
    CHECK(pickle_error(std::string("\x80\x02]r\xff\xff\xff\x7f.", 9)).find("out of range") != std::string::npos);
    CHECK(pickle_error(std::string("\x80\x02\xff.", 4)).find("unknown opcode 0xff at byte 2") != std::string::npos);
    CHECK(pickle_error(std::string("\x80\x06N.", 4)).find("protocol 6") != std::string::npos);
    CHECK(pickle_error(std::string("\x80\x02"
                                   "a.",
                                   4))
              .find("stack underflow") != std::string::npos);
  });
  run("capture: header and records split at any byte decode the same", [] {
    namespace f = gpumem::fmt;
    std::string json = "{\"mono_anchor_ns\": 1000, \"wall_anchor_ns\": 5000000}";
    std::vector<uint8_t> file(sizeof(f::FileHeader));
    f::FileHeader fh{};
    memcpy(fh.magic, f::kMagic, 8);
    fh.major = 1;
    fh.json_bytes = (uint32_t)json.size();
    memcpy(file.data(), &fh, sizeof fh);
    file.insert(file.end(), json.begin(), json.end());
    auto rec = [&](uint8_t type, const void* payload, uint32_t n) {
      f::RecordHeader h{type, 0, f::kPoolLarge, n};
      const uint8_t* hp = reinterpret_cast<const uint8_t*>(&h);
      file.insert(file.end(), hp, hp + sizeof h);
      const uint8_t* p = static_cast<const uint8_t*>(payload);
      file.insert(file.end(), p, p + n);
    };
    f::SegmentEvent seg{2000, 1 << 20, 20 << 20, 0, 0, 0, 0, 0};
    rec(f::REC_SEGMENT_ALLOC, &seg, sizeof seg);
    for (uint64_t k = 0; k < 3; k++) {
      f::BlockEvent e{3000 + k * 1000, (1 << 20) + k * 4096, 4096, 4000, 0, 0, 0};
      rec(f::REC_ALLOC, &e, sizeof e);
    }
    f::BlockEvent fr{9000, 1 << 20, 4096, 4000, 0, 0, 0};
    rec(f::REC_FREE_REQUESTED, &fr, sizeof fr);
    for (size_t split = 0; split <= file.size(); split++) {
      Model m;
      CaptureDecoder d;
      size_t used = d.feed(m, file.data(), split);
      std::vector<uint8_t> rest(file.begin() + used, file.end());
      d.feed(m, rest.data(), rest.size());
      m.derive();
      CHECK(!d.damaged() && d.pending_bytes() == 0);
      const DeviceData& dev = m.devices.at(0);
      CHECK(dev.count() == 5);
      CHECK(dev.t[1] == 5000 + 2);  // (5000000 + (3000 − 1000)) ns → 5002 µs
      CHECK(dev.allocated.back() == 2 * 4096 && dev.peak_allocated == 3 * 4096 && dev.reserved.back() == (20 << 20));
      CHECK(dev.waste[1] == 96);  // requested 4000 of a 4096-byte block
    }
  });
  run("capture: REC_END of minor 2 gives reason and message; a 16-byte one (minor 1) reads as reason 0", [] {
    namespace f = gpumem::fmt;
    auto file_with_end = [](uint32_t end_bytes) {
      std::string json = "{}";
      std::vector<uint8_t> file(sizeof(f::FileHeader));
      f::FileHeader fh{};
      memcpy(fh.magic, f::kMagic, 8);
      fh.major = 1;
      fh.minor = end_bytes == sizeof(f::EndRec) ? 2 : 1;
      fh.json_bytes = (uint32_t)json.size();
      memcpy(file.data(), &fh, sizeof fh);
      file.insert(file.end(), json.begin(), json.end());
      auto rec = [&](uint8_t type, const void* payload, uint32_t n) {
        f::RecordHeader h{type, 0, 0, n};
        const uint8_t* hp = reinterpret_cast<const uint8_t*>(&h);
        file.insert(file.end(), hp, hp + sizeof h);
        const uint8_t* p = static_cast<const uint8_t*>(payload);
        file.insert(file.end(), p, p + n);
      };
      const std::string text = "capture stopped at /s/c.gpumem: No space left on device (4096 bytes written)";
      std::vector<uint8_t> str(sizeof(f::StringRec) + text.size());
      f::StringRec sr{7, (uint32_t)text.size()};
      memcpy(str.data(), &sr, sizeof sr);
      memcpy(str.data() + sizeof sr, text.data(), text.size());
      rec(f::REC_STRING, str.data(), (uint32_t)str.size());
      f::EndRec er{1000, -1, 1, 7, 0};
      rec(f::REC_END, &er, end_bytes);  // 16 bytes: the old layout, whose 4th word was padding
      return file;
    };
    auto now = file_with_end(sizeof(f::EndRec));
    Model m;
    CaptureDecoder d;
    d.feed(m, now.data(), now.size());
    CHECK(!d.damaged() && m.ended && m.end.reason == 1 && m.end.exit_code == -1);
    CHECK(m.end.message == "capture stopped at /s/c.gpumem: No space left on device (4096 bytes written)");
    auto old = file_with_end(16);
    Model o;
    CaptureDecoder od;
    od.feed(o, old.data(), old.size());
    CHECK(!od.damaged() && o.ended && o.end.exit_code == -1 && o.end.message.empty());
    CHECK(o.end.reason == 0);  // the old pad word is never read as a reason
  });

  run("replay: removing a range from the middle of a segment keeps both ends", [] {
    AllocState s;
    s.add_range(0x1000, RangeInfo{0x3000, 0, 0, POOL_LARGE, true, 0, 0});
    s.remove_range(0x2000, 0x1000);
    CHECK(s.ranges.size() == 2);
    CHECK(s.ranges.at(0x1000).size == 0x1000 && s.ranges.at(0x3000).size == 0x1000);
    s.add_range(0x2000, RangeInfo{0x1000, 0, 0, POOL_LARGE, true, 0, 0});
    auto segs = s.materialize(0);
    CHECK(segs.size() == 1 && segs[0].addr == 0x1000 && segs[0].size == 0x3000);  // adjacent expandable runs merge
    CHECK(segs[0].blocks.size() == 1 && segs[0].blocks[0].state == ST_INACTIVE);
  });
  run("every query answers on an empty snapshot and on a model with only segments", [] {
    std::string p = std::string("\x80\x02}X\x08\x00\x00\x00segments]s.", 19);
    auto b = bytes(p);
    Model m;
    import_snapshot(m, b.data(), b.size());
    exercise_model(m);
    CHECK(summary_json(m) == "{\"format\":\"pytorch-pickle\",\"devices\":[],\"top_lines\":[]}");
  });
  run("the snapshots under the sanitizers: host memory, unknown keys, untraced blocks, pools, metadata", [] {
    // Run from native/addon (make test); test/unit/snapshot-extras.test.mjs checks every figure against Python.
    auto load = [](const char* name, Model& m) {
      std::ifstream in(std::string("../../test/fixtures/pytorch-snapshots/") + name, std::ios::binary);
      CHECK(in.good());
      std::vector<uint8_t> b((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      import_snapshot(m, b.data(), b.size());
      return b;
    };
    {
      Model m;
      auto b = load("mlp-host-segments.pickle", m);
      CHECK(m.has_host && m.host.final_segments.size() == 4 && m.host.count() == 10);
      CHECK(m.host.peak_allocated == int64_t(8) << 20);  // 1 + 4 + 2 + 1 MiB pinned before one is freed
      CHECK(m.devices.size() == 1 &&
            m.devices.begin()->second.count() == 29);  // the host's events are not the device's
      CHECK(m.unknown_keys.empty());
      CHECK(extras_json(m).find("\"host\":{\"events\":10,") != std::string::npos);
    }
    {
      Model m;
      auto b = load("mlp-user-metadata.pickle", m);
      CHECK(m.unknown_keys.size() == 3 && !m.has_host && !m.allocator_settings_json.empty());
      bool top = false;
      for (const auto& u : m.unknown_keys)
        top |= u.where == "snapshot" && u.key == "future_snapshot_key" &&
               u.raw.find("bytes(9): 00016770756d656dff") != std::string::npos;
      CHECK(top);
      size_t metadata_markers = 0;
      for (const auto& mk : m.devices.begin()->second.markers) metadata_markers += mk.kind == 8;
      CHECK(metadata_markers >= 5);  // step=1 … (the figures: snapshot-extras.test.mjs)
    }
    {
      Model m;
      auto b = load("mlp-pools.pickle", m);
      const DeviceData& d = m.devices.begin()->second;
      size_t untraced = 0, pooled = 0;
      for (const auto& s : d.final_segments) {
        pooled += s.pool == POOL_PRIVATE;
        for (const auto& bl : s.blocks) untraced += bl.untraced;
      }
      CHECK(pooled == 7 && untraced > 0);
      // The marks survive a replay to the trace's start (the blocks were there before it).
      size_t at_start = 0;
      for (const auto& s : state_after(d, 0))
        for (const auto& bl : s.blocks) at_start += bl.untraced;
      CHECK(at_start == untraced);
    }
  });
  run("what-if and policy replay on the real pickle and capture fixtures (under the sanitizers)", [] {
    // Run from native/addon (make test); the node tests check the figures, this checks memory safety.
    for (const char* f :
         {"../../test/fixtures/pytorch-snapshots/mlp-expandable.pickle",
          "../../test/fixtures/pytorch-snapshots/mlp-record-stream-pending.pickle",
          "../../test/fixtures/pytorch-snapshots/mlp-oom.pickle", "../../test/fixtures/h200-e2e-train.capture"}) {
      std::ifstream in(f, std::ios::binary);
      CHECK(in.good());
      std::vector<uint8_t> b((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      Model m;
      if (CaptureDecoder::looks_like_capture(b.data(), b.size())) {
        CaptureDecoder d;
        d.feed(m, b.data(), b.size());
      } else {
        import_snapshot(m, b.data(), b.size());
      }
      m.derive();
      for (core::Policy p :
           {core::Policy::kPytorch, core::Policy::kPytorchExpandable, core::Policy::kLens, core::Policy::kLensNoTrim}) {
        PolicyReplayResult r = replay_policy(m, 0, p, 0);
        CHECK(r.peak_reserved >= r.peak_allocated && r.peak_allocated > 0 && !r.have_oom);
        CHECK(replay_json(r) == replay_json(replay_policy(m, 0, p, 0)));  // deterministic
        WhatIfQuery q;
        q.have_policy = true, q.policy = p, q.requests = {512, 3ull << 20, 1ull << 30};
        std::string w = what_if_json(m, 0, INFINITY, q);
        CHECK(w.find("\"policy\":\"" + std::string(core::policy_name(p)) + "\"") != std::string::npos);
      }
      exercise_model(m);
    }
  });

  // ---- Note [User frames]: the one rule against the one table (native/format/user_frames_cases.json) ----
  {
    std::ifstream in("../format/user_frames_cases.json");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    json::Value table;
    std::string err;
    bool parsed = json::parse(text, &table, &err) && table.find("cases") && table.find("internalDirs");
    run("user frames: the table of cases parses", [&] {
      if (!parsed) throw t::Failure("native/format/user_frames_cases.json: " + err);
      CHECK(table.find("cases")->items().size() >= 20);
    });
    std::vector<std::string> internal;
    if (parsed)
      for (const auto& d : table.find("internalDirs")->items()) internal.push_back(d.as_string());
    if (parsed)
      for (const auto& c : table.find("cases")->items()) {
        std::string path = c.find("path")->as_string(), why = c.find("why")->as_string();
        bool user = c.find("user")->as_bool();
        run("user frames: '" + path + "' is " + (user ? "user code" : "not user code") + " (" + why + ")", [&] {
          CHECK_EQ(is_user_path(path, internal), user);
          // The same answer through a model whose capture header names the internal dir.
          Model m;
          m.non_user_dirs = internal;
          uint32_t id = m.intern(path);
          CHECK_EQ(m.is_user_file(id), user);
        });
      }
  }

  // ---- Note [One JSON codec]: the reader of bad input names what and where, and never crashes ----
  run("json: bad input gets an error naming what was expected and the byte", [] {
    struct Bad {
      std::string text, says;
    };
    const Bad bad[] = {
        {"", "unexpected end of JSON at byte 0"},
        {"{", "expected a string key at byte 1"},
        {"{\"a\"", "expected ':' at byte 4"},
        {"{\"a\":1", "expected ',' or '}' at byte 6"},
        {"{\"a\":1,}", "expected a string key at byte 7"},
        {"[1,2", "expected ',' or ']' at byte 4"},
        {"[1,]", "unexpected character at byte 3"},
        {"tru", "invalid literal at byte 0"},
        {"nul", "invalid literal at byte 0"},
        {"-", "bad number at byte 1"},
        {"1.2.3", "bad number at byte 5"},
        {"\"abc", "unterminated string at byte 4"},
        {"\"a\\q\"", "bad escape in string at byte 4"},
        {"\"\\u12zz\"", "bad hex digit in \\u escape at byte 6"},
        {"\"\\u12", "truncated \\u escape at byte 3"},
        {"\"\\ud800\\u0041\"", "unpaired surrogate in \\u escape at byte 13"},
        {std::string("\"a\nb\""), "control character in string at byte 3"},
        {"{} {}", "unexpected trailing characters at byte 3"},
        {"@", "unexpected character at byte 0"},
        {std::string(66, '[') + std::string(66, ']'), "nesting too deep at byte 65"},
    };
    json::Value deepest;
    CHECK(json::parse(std::string(65, '[') + std::string(65, ']'), &deepest, nullptr));  // 64 levels below the top
    std::string wrong;
    for (const Bad& b : bad) {
      json::Value v;
      std::string err;
      bool ok = json::parse(b.text, &v, &err);
      if (ok || err != b.says)
        wrong +=
            "\n    json::parse(" + b.text + "): got " + (ok ? "success" : "'" + err + "'") + ", want '" + b.says + "'";
    }
    if (!wrong.empty()) throw t::Failure(wrong);
  });
  run("json: every prefix of a valid document fails cleanly, the whole parses to the same dump", [] {
    const std::string doc =
        R"({"a":[1,-2,2.5e3,true,false,null],"s":"\u00e9\ud83d\ude00\n","big":9007199254740993,"o":{}})";
    json::Value whole;
    std::string err;
    CHECK(json::parse(doc, &whole, &err));
    CHECK_EQ(whole.find("big")->as_int(), int64_t(9007199254740993LL));
    CHECK_EQ(whole.find("s")->as_string(), std::string("\xc3\xa9\xf0\x9f\x98\x80\n"));
    for (size_t n = 0; n < doc.size(); n++) {
      json::Value v;
      std::string e;
      CHECK(!json::parse(doc.substr(0, n), &v, &e));
      CHECK(e.find(" at byte ") != std::string::npos);
    }
    json::Value again;
    CHECK(json::parse(whole.dump(), &again, &err));
    CHECK_EQ(again.dump(), whole.dump());
  });
  run("json: the streaming writer and the value writer agree, and write null for Infinity and NaN", [] {
    json::Writer j;
    j.open('{').kvs("q", "a\"b\\c\x01").kv("i", -3).kvu("u", UINT64_C(18446744073709551615)).kvd("d", 0.5);
    j.kvd("inf", INFINITY).kvd("nan", NAN).kvb("b", true).key("l").open('[').item().num(1).item().num(2).close(']');
    j.close('}');
    CHECK_EQ(
        j.s,
        std::string(
            R"({"q":"a\"b\\c\u0001","i":-3,"u":18446744073709551615,"d":0.5,"inf":null,"nan":null,"b":true,"l":[1,2]})"));
    json::Value v = json::Value::object();
    v.set("q", "a\"b\\c\x01");
    v.set("d", 0.5);
    v.set("inf", double(INFINITY));
    CHECK_EQ(v.dump(), std::string(R"({"q":"a\"b\\c\u0001","d":0.5,"inf":null})"));
  });

  // ---- Note [One snapshot schema]: our writers' keys are PyTorch 2.11's, read from a real pickle ----
  run("snapshot schema: segment, block, trace-entry and settings keys match a real PyTorch 2.11 pickle", [] {
    std::ifstream in("../../test/fixtures/pytorch-snapshots/mlp-expandable.pickle", std::ios::binary);
    CHECK(in.good());
    std::vector<uint8_t> b((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    PickleTree real(b.data(), b.size());
    auto keys_of = [](const PickleTree& t, uint32_t dict) {
      std::vector<std::string> k;
      const auto& kv = t.items(dict);
      for (size_t i = 0; i + 1 < kv.size(); i += 2) k.push_back(std::string(t.str(kv[i])));
      return k;
    };
    // Our emitters on their own, re-read by the same reader.
    fmt::PickleEmitter p;
    p.begin();
    p.begin_list();
    fmt::torch::begin_segment(p, {});
    p.begin_list();
    fmt::torch::emit_frame(p, "f", "/x.py", 1);
    p.end_list();
    fmt::torch::begin_blocks(p);
    fmt::torch::begin_block(p, 0, 0, 0, fmt::BLOCK_ACTIVE_ALLOCATED);
    p.begin_list();
    p.end_list();
    fmt::torch::end_block(p);
    fmt::torch::end_segment(p);
    fmt::torch::begin_trace_entry(p, fmt::torch::Action::alloc, 0, 0, 0, 0);
    p.begin_list();
    p.end_list();
    fmt::torch::end_trace_entry(p);
    fmt::torch::emit_allocator_settings(p, "", false);
    p.end_list();
    p.end();
    std::vector<uint8_t> ob(p.bytes().begin(), p.bytes().end());
    PickleTree ours(ob.data(), ob.size());
    const auto& o = ours.items(ours.root());
    CHECK_EQ(o.size(), size_t(3));
    uint32_t real_seg = real.items(real.get(real.root(), fmt::torch::kSegments))[0];
    CHECK(keys_of(ours, o[0]) == keys_of(real, real_seg));
    CHECK(keys_of(ours, ours.items(ours.get(o[0], "blocks"))[0]) ==
          keys_of(real, real.items(real.get(real_seg, "blocks"))[0]));
    uint32_t real_alloc = UINT32_MAX;
    for (uint32_t e : real.items(real.items(real.get(real.root(), fmt::torch::kDeviceTraces))[0]))
      if (real.str(real.get(e, "action")) == "alloc") {
        real_alloc = e;
        break;
      }
    CHECK(real_alloc != UINT32_MAX);
    CHECK(keys_of(ours, o[1]) == keys_of(real, real_alloc));
    CHECK(!real.items(real.get(real_alloc, fmt::torch::kFrames)).empty());
    CHECK(keys_of(ours, ours.items(ours.get(o[0], fmt::torch::kFrames))[0]) ==
          keys_of(real, real.items(real.get(real_alloc, fmt::torch::kFrames))[0]));
    CHECK(keys_of(ours, o[2]) == keys_of(real, real.get(real.root(), fmt::torch::kAllocatorSettings)));
    std::vector<std::string> top = keys_of(real, real.root());
    CHECK((top == std::vector<std::string>{fmt::torch::kSegments, fmt::torch::kDeviceTraces,
                                           fmt::torch::kAllocatorSettings, fmt::torch::kExternalAnnotations}));
  });
  // ---- Note [Policy replay] and Note [Releases of the run]: private pools kept apart, the run's releases replayed
  // ---- Event streams written by hand, as the PyTorch-allocator mode records them (addresses are the run's).
  constexpr uint64_t MiB = 1ull << 20;
  auto pytorch_model = [](const char* header) {
    Model m;
    m.format = "gpumem-capture";
    m.header_json = header;
    m.device(0).start_empty = true;
    return m;
  };
  const char* kPytorchHeader =
      R"({"allocator_mode":"pytorch","pytorch_allocator_backend":"native","pytorch_allocator_settings":)"
      R"({"version":1,"settings":{"expandable_segments":false,"max_split_size":-1}}})";
  run("policy replay: a private pool's allocations stay in its own segments until the run releases it", [&] {
    Model m = pytorch_model(kPytorchHeader);
    DeviceData& d = m.device(0);
    const uint64_t A = 0x7f0000000000, B = A + 0x10000000, C = A + 0x20000000;
    int64_t t = 1;
    d.push_event(t++, ACT_SEGMENT_ALLOC, A, 20 * MiB, 0, 0, 0, POOL_PRIVATE);  // a MemPool's segment
    d.segment_pools[uint32_t(d.count() - 1)] = {0, 1};
    d.push_event(t++, ACT_ALLOC, A, 8 * MiB, 8 * MiB, 0, 0, POOL_LARGE);
    d.push_event(t++, ACT_FREE_REQUESTED, A, 8 * MiB, 8 * MiB, 0, 0, POOL_LARGE);
    d.push_event(t++, ACT_FREE_COMPLETED, A, 8 * MiB, 8 * MiB, 0, 0, POOL_LARGE);
    d.push_event(t++, ACT_SEGMENT_ALLOC, B, 20 * MiB, 0, 0, 0, POOL_LARGE);  // the default pool cannot use the pool's
    d.push_event(t++, ACT_ALLOC, B, 8 * MiB, 8 * MiB, 0, 0, POOL_LARGE);
    d.push_event(t++, ACT_SEGMENT_FREE, A, 20 * MiB, 0, 0, 0, POOL_PRIVATE);  // the pool released, its memory freed
    d.segment_pools[uint32_t(d.count() - 1)] = {0, 1};
    d.push_event(t++, ACT_SEGMENT_ALLOC, C, 16 * MiB, 0, 0, 0, POOL_LARGE);
    d.push_event(t++, ACT_ALLOC, C, 16 * MiB, 16 * MiB, 0, 0, POOL_LARGE);
    m.derive();
    CHECK_EQ(d.reserved.back(), int64_t(36 * MiB));
    PolicyReplayResult r = replay_policy(m, 0, core::Policy::kPytorch, 0);
    CHECK(r.modelled);
    CHECK_EQ(r.peak_reserved, uint64_t(40 * MiB));  // as the run: A and B, then B and C
    CHECK_EQ(r.run_releases, uint64_t(0));          // the pool's release empties that pool alone
    CHECK_EQ(std::string(r.settings_source), std::string("capture-header"));
  });
  run("policy replay: segments PyTorch freed outside any empty_cache() record are the run's releases", [&] {
    auto stream = [](Model& m) {
      DeviceData& d = m.device(0);
      const uint64_t X = 0x7f0000000000, Y = X + 0x10000000;
      d.push_event(1, ACT_SEGMENT_ALLOC, X, 20 * MiB, 0, 0, 0, POOL_LARGE);
      d.push_event(2, ACT_ALLOC, X, 8 * MiB, 8 * MiB, 0, 0, POOL_LARGE);
      d.push_event(3, ACT_FREE_REQUESTED, X, 8 * MiB, 8 * MiB, 0, 0, POOL_LARGE);
      d.push_event(4, ACT_FREE_COMPLETED, X, 8 * MiB, 8 * MiB, 0, 0, POOL_LARGE);
      d.push_event(5, ACT_SEGMENT_FREE, X, 20 * MiB, 0, 0, 0, POOL_LARGE);  // cuDNN's emptyCache(), from C++
      d.push_event(6, ACT_SEGMENT_ALLOC, Y, 24 * MiB, 0, 0, 0, POOL_LARGE);
      d.push_event(7, ACT_ALLOC, Y, 24 * MiB, 24 * MiB, 0, 0, POOL_LARGE);
      m.derive();
    };
    Model py = pytorch_model(kPytorchHeader);
    stream(py);
    PolicyReplayResult r = replay_policy(py, 0, core::Policy::kPytorch, 0);
    CHECK_EQ(r.peak_reserved, uint64_t(24 * MiB));
    CHECK_EQ(r.run_releases, uint64_t(1));
    CHECK_EQ(replay_policy(py, 0, core::Policy::kLens, 0).peak_reserved, uint64_t(40 * MiB));  // every policy: 20 + 20
    // The lens allocator records each empty_cache() it runs, and trims on its own: its segment events are its policy's.
    Model lens = pytorch_model(R"({"allocator_mode":"lens","segments":"fixed"})");
    stream(lens);
    r = replay_policy(lens, 0, core::Policy::kPytorch, 0);
    CHECK_EQ(r.peak_reserved, uint64_t(44 * MiB));
    CHECK_EQ(r.run_releases, uint64_t(0));
  });
  run("policy replay: a setting not modelled gives no figure, for the pytorch policies only", [&] {
    Model m = pytorch_model(
        R"({"allocator_mode":"pytorch","pytorch_allocator_settings":{"version":1,"settings":)"
        R"({"PYTORCH_CUDA_ALLOC_CONF":"garbage_collection_threshold:0.6","garbage_collection_threshold":0.6}}})");
    m.device(0).push_event(1, ACT_SEGMENT_ALLOC, 0x7f0000000000, 20 * MiB, 0, 0, 0, POOL_LARGE);
    m.device(0).push_event(2, ACT_ALLOC, 0x7f0000000000, 8 * MiB, 8 * MiB, 0, 0, POOL_LARGE);
    m.derive();
    PolicyReplayResult r = replay_policy(m, 0, core::Policy::kPytorch, 0);
    CHECK(!r.modelled);
    CHECK_EQ(r.peak_reserved, uint64_t(0));
    CHECK_EQ(r.not_modelled.size(), size_t(1));
    CHECK(replay_json(r).find("\"peakReservedBytes\":null") != std::string::npos);
    CHECK(replay_policy(m, 0, core::Policy::kLens, 0).modelled);  // PyTorch's settings are not the lens's
    AllocConf given = parse_alloc_conf("max_split_size_mb:64");   // a what-if with settings that are modelled
    r = replay_policy(m, 0, core::Policy::kPytorch, 0, &given);
    CHECK(r.modelled);
    CHECK_EQ(r.peak_reserved, uint64_t(20 * MiB));
    CHECK_EQ(r.conf, std::string("max_split_size_mb:64"));
  });

  // ---- Note [Settings of the data] (alloc_conf.h): PYTORCH_CUDA_ALLOC_CONF as PyTorch 2.11 reads it ----
  run("alloc conf: PyTorch 2.11's grammar, what is modelled, what is not, and what PyTorch refuses", [] {
    AllocConf c = parse_alloc_conf(" max_split_size_mb:64 , roundup_power2_divisions:4,expandable_segments:True");
    CHECK_EQ(c.pytorch.max_split_size, uint64_t(64) << 20);
    CHECK_EQ(c.pytorch.roundup_power2_divisions[0], uint32_t(4));
    CHECK_EQ(c.pytorch.roundup_power2_divisions[15], uint32_t(4));
    CHECK_EQ(c.expandable, 1);
    CHECK(c.not_modelled.empty());
    CHECK_EQ(conf_text(c.pytorch), std::string("max_split_size_mb:64,roundup_power2_divisions:4"));
    // The bracket form: the first value fills the intervals below it, '>' those after the last one named.
    c = parse_alloc_conf("roundup_power2_divisions:[64:8,256:2,>:1]");
    const uint32_t want[16] = {8, 8, 8, 8, 8, 8, 8, 0, 2, 1, 1, 1, 1, 1, 1, 1};
    for (size_t k = 0; k < 16; k++) CHECK_EQ(c.pytorch.roundup_power2_divisions[k], want[k]);
    c = parse_alloc_conf("max_non_split_rounding_mb:128,release_lock_on_cudamalloc:True,pinned_num_register_threads:8");
    CHECK_EQ(c.pytorch.max_non_split_rounding, uint64_t(128) << 20);
    CHECK(c.not_modelled.empty());  // locking and pinned host memory do not change device memory
    c = parse_alloc_conf(
        "garbage_collection_threshold:0.6,backend:cudaMallocAsync,per_process_memory_fraction:0.5,mystery:[1:2]");
    CHECK_EQ(c.not_modelled.size(), size_t(4));
    CHECK_EQ(c.not_modelled[0], std::string("garbage_collection_threshold:0.6 (garbage collection of cached blocks)"));
    CHECK(c.not_modelled[3].rfind("mystery", 0) == 0);
    CHECK_EQ(c.backend, std::string("cudaMallocAsync"));
    CHECK(parse_alloc_conf("").not_modelled.empty());
    auto refused = [](const char* text, const char* why) {
      try {
        parse_alloc_conf(text);
      } catch (const std::invalid_argument& e) {
        CHECK(std::string(e.what()).find(why) != std::string::npos);
        return;
      }
      CHECK(!"PyTorch refuses it");
    };
    refused("max_split_size_mb:10", "at least 20");
    refused("roundup_power2_divisions:3", "power of 2");
    refused("roundup_power2_divisions:[256:3]", "power of 2 or 0");
    refused("garbage_collection_threshold:1.5", "between 0 and 1");
    refused("expandable_segments:maybe", "True or False");
    refused("backend:other", "native or cudaMallocAsync");
    refused("max_split_size_mb", "expected ':'");
  });

  run("alloc conf: PyTorch 2.11's allocator_settings object, typed fields over the text", [] {
    // What torch.cuda.memory._snapshot()["allocator_settings"] gave on an H200 (conformance fixture alloc_conf-auto).
    json::Value v;
    CHECK(json::parse(
        R"({"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:64,roundup_power2_divisions:4", "max_split_size": 67108864,
            "garbage_collection_threshold": 0.0, "expandable_segments": false, "pinned_num_register_threads": 1,
            "release_lock_on_cudamalloc": false, "pinned_use_cuda_host_register": false,
            "graph_capture_record_stream_reuse": false, "roundup_power2_divisions": {"1": 4, "2": 4, "4": 4, "8": 4,
            "16": 4, "32": 4, "64": 4, "128": 4, "256": 4, "512": 4, "1024": 4, "2048": 4, "4096": 2, "8192": 4,
            "16384": 4, "32768": 4}})",
        &v, nullptr));
    AllocConf c = alloc_conf_from_settings(v);
    CHECK_EQ(c.pytorch.max_split_size, uint64_t(64) << 20);
    CHECK_EQ(c.pytorch.roundup_power2_divisions[12], uint32_t(2));  // the dict, not the text, for each interval
    CHECK_EQ(c.expandable, 0);
    CHECK(c.not_modelled.empty());
    CHECK(json::parse(R"({"PYTORCH_CUDA_ALLOC_CONF": "garbage_collection_threshold:0.6", "max_split_size": -1,
                          "garbage_collection_threshold": 0.6, "expandable_segments": false})",
                      &v, nullptr));
    c = alloc_conf_from_settings(v);
    CHECK_EQ(c.pytorch.max_split_size, core::kNoMaxSplit);
    CHECK_EQ(c.not_modelled.size(), size_t(1));
    CHECK(c.not_modelled[0].rfind("garbage_collection_threshold:0.6", 0) == 0);
  });
  return t::finish();
}
