// control_commands.cc — what each control request does (see control_commands.h).
#include "control_commands.h"

#include <unistd.h>

#include "allocator_api.h"
#include "control_server.h"
#include "observer.h"
#include "recorder.h"

namespace gpumem::rec::control {

json::Value handle(const json::Value& req) {
  if (!req.is_object()) return error_reply("a request must be a JSON object like {\"cmd\":\"ping\"}");
  const json::Value* cmd = req.find("cmd");
  if (!cmd || !cmd->is_string()) return error_reply("missing \"cmd\" (one of ping, empty_cache, snapshot, mark)");
  const std::string& c = cmd->as_string();
  json::Value r = json::Value::object();
  if (c == "ping") {
    r.set("ok", true);
    r.set("pid", int64_t(::getpid()));
    r.set("rank", int64_t(process_rank()));
    json::Value devs = json::Value::array();
    const bool obs = observer::active();
    const int ndev = obs ? observer::device_count() : core::device_count();
    for (int d = 0; d < ndev; d++) {
      core::Figures f = obs ? observer::figures(d) : core::figures(d);
      json::Value dv = json::Value::object();
      dv.set("index", d);
      dv.set("allocated", f.allocated);
      dv.set("reserved", f.reserved);
      devs.push(std::move(dv));
    }
    r.set("devices", std::move(devs));
  } else if (c == "empty_cache") {
    uint64_t before = 0, after = 0;
    if (observer::active()) {
      // PyTorch's allocator: torch.cuda.empty_cache() in the workload (Note [Observer]).
      if (!observer::host().empty_cache || observer::host().empty_cache(&before, &after) != 0)
        return error_reply("empty_cache: the workload could not run torch.cuda.empty_cache()");
    } else {
      core::empty_cache(-1, &before, &after, 1);
    }
    r.set("ok", true);
    r.set("reserved_before", before);
    r.set("reserved_after", after);
  } else if (c == "snapshot") {
    const json::Value* p = req.find("path");
    if (p && !p->is_string()) return error_reply("\"path\" must be a string (an absolute .pickle path)");
    std::string path = p ? p->as_string() : default_snapshot_path();
    std::string err;
    int64_t off = take_snapshot(path.c_str(), &err);
    if (off < 0) return error_reply(err);
    r.set("ok", true);
    r.set("pickle", path);
    r.set("offset", off);
  } else if (c == "mark") {
    const json::Value* n = req.find("name");
    if (!n || !n->is_string()) return error_reply("\"mark\" needs a string \"name\"");
    mark(n->as_string(), 0);
    r.set("ok", true);
  } else {
    return error_reply("unknown cmd \"" + c + "\" (expected ping, empty_cache, snapshot or mark)");
  }
  return r;
}

std::string handle_line(const std::string& line) {
  json::Value req;
  std::string err;
  json::Value r;
  if (!json::parse(line, &req, &err)) {
    r = error_reply("malformed JSON: " + err);
  } else {
    r = handle(req);
  }
  if (req.is_object()) {
    if (const json::Value* id = req.find("id")) r.set("id", *id);
  }
  return r.dump();
}

}  // namespace gpumem::rec::control
