// control_server.h — the workload's control channel: a Unix domain socket served by one dedicated
// thread with newline-delimited JSON requests and replies (protocol: native/python/README.md
// "Control protocol"). The thread never takes the GIL, so it answers while Python is busy. This file is
// the transport only; what a request does is the handler's (control_commands.h).
//
// Note [Control robustness]: whatever arrives on the socket, the workload must not die: sends use
// MSG_NOSIGNAL (no SIGPIPE), sockets are non-blocking, a request line is capped (kMaxLine; longer
// ones get an error reply and are skipped up to the next newline), at most kMaxClients are served at
// once, and a client that does not read its replies is dropped once kMaxPendingReply bytes pile up.
#pragma once
#include <functional>
#include <string>

#include "../../format/json.h"

namespace gpumem::rec::control {

constexpr size_t kMaxLine = 64 * 1024;
constexpr size_t kMaxClients = 32;
constexpr size_t kMaxPendingReply = 4 << 20;

// One request line (without its newline) → one reply line; called on the server thread.
using Handler = std::function<std::string(const std::string& line)>;

// Binds `path` (mode 0600; a stale socket file there is replaced) and starts the server thread, which
// answers each request line with `handler`.
bool start(const std::string& path, Handler handler, std::string* err);
void stop();  // closes the socket, removes the file, joins the thread
bool running();

// The protocol's error reply: {"ok":false,"error":msg}.
inline json::Value error_reply(const std::string& msg) {
  json::Value r = json::Value::object();
  r.set("ok", false);
  r.set("error", msg);
  return r;
}

}  // namespace gpumem::rec::control
