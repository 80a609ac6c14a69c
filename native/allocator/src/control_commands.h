// control_commands.h — the control channel's commands (ping, empty_cache, snapshot, mark): one request
// → one reply, for the server thread (control_server.h) and for in-process use and tests. They read the
// allocator through allocator_api.h and record through recorder.h; the transport knows none of them.
#pragma once
#include <string>

#include "../../format/json.h"

namespace gpumem::rec::control {

json::Value handle(const json::Value& request);
// A request line → its reply line (a malformed line gets an error reply; "id" is echoed).
std::string handle_line(const std::string& line);

}  // namespace gpumem::rec::control
