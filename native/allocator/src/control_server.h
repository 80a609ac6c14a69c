// control_server.h — the workload's control channel: a Unix domain socket served by one dedicated
// thread with newline-delimited JSON requests and replies (protocol: native/python/README.md
// "Control protocol"). The thread never takes the GIL, so it answers while Python is busy.
//
// Note [Control robustness]: whatever arrives on the socket, the workload must not die: sends use
// MSG_NOSIGNAL (no SIGPIPE), sockets are non-blocking, a request line is capped (kMaxLine; longer
// ones get an error reply and are skipped up to the next newline), at most kMaxClients are served at
// once, and a client that does not read its replies is dropped once kMaxPendingReply bytes pile up.
#pragma once
#include <string>

#include "json.h"

namespace gpumem::rec::control {

constexpr size_t kMaxLine = 64 * 1024;
constexpr size_t kMaxClients = 32;
constexpr size_t kMaxPendingReply = 4 << 20;

// Binds `path` (mode 0600; a stale socket file there is replaced) and starts the server thread.
bool start(const std::string& path, std::string* err);
void stop();  // closes the socket, removes the file, joins the thread
bool running();

// One request → one reply (exposed for tests and for in-process use).
json::Value handle(const json::Value& request);
std::string handle_line(const std::string& line);

}  // namespace gpumem::rec::control
