// control_server.cc — see control_server.h.
#include "control_server.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

namespace gpumem::rec::control {
namespace {

struct Client {
  int fd;
  std::string in, out;
  bool skipping = false;  // discarding the rest of an over-long line
};

int g_listen = -1;
int g_wake[2] = {-1, -1};
std::string g_path;
std::thread g_thread;
std::atomic<bool> g_running{false};

Handler g_handler;

void set_nonblocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

// Sends what the socket takes now; false if the client is gone.
bool drain(Client& c) {
  while (!c.out.empty()) {
    ssize_t n = ::send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno == EAGAIN || errno == EWOULDBLOCK;
    }
    c.out.erase(0, size_t(n));
  }
  return true;
}

void reply(Client& c, const std::string& line) {
  c.out += line;
  c.out += '\n';
}

// Consumes complete lines of c.in; false if the client must be dropped.
bool process_input(Client& c) {
  size_t start = 0;
  for (;;) {
    size_t nl = c.in.find('\n', start);
    if (nl == std::string::npos) break;
    if (c.skipping) {
      c.skipping = false;
    } else {
      std::string line = c.in.substr(start, nl - start);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.find_first_not_of(" \t") != std::string::npos) reply(c, g_handler(line));
    }
    start = nl + 1;
  }
  c.in.erase(0, start);
  if (c.in.size() > kMaxLine) {
    if (!c.skipping)
      reply(c, error_reply("request line longer than " + std::to_string(kMaxLine) +
                           " bytes; send one JSON object per line")
                   .dump());
    c.skipping = true;
    c.in.clear();
  }
  return c.out.size() <= kMaxPendingReply;
}

void serve() {
  pthread_setname_np(pthread_self(), "gpumem-control");  // Note [Thread names] in sequencer.cc
  std::vector<Client> clients;
  std::vector<pollfd> fds;
  char buf[16384];
  for (;;) {
    fds.clear();
    fds.push_back({g_wake[0], POLLIN, 0});
    fds.push_back({g_listen, short(clients.size() < kMaxClients ? POLLIN : 0), 0});
    for (auto& c : clients) fds.push_back({c.fd, short(POLLIN | (c.out.empty() ? 0 : POLLOUT)), 0});
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[0].revents) break;  // stop()
    std::vector<bool> drop(clients.size(), false);
    for (size_t i = 0; i < clients.size(); i++) {
      Client& c = clients[i];
      short re = fds[i + 2].revents;
      if (re & (POLLIN | POLLHUP | POLLERR)) {
        ssize_t n = ::recv(c.fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
          drop[i] = true;
          continue;
        }
        if (n > 0) {
          if (c.skipping) {
            // Still inside an over-long line: keep only what follows its newline.
            const char* nl = static_cast<const char*>(std::memchr(buf, '\n', size_t(n)));
            if (nl) {
              c.skipping = false;
              c.in.assign(nl + 1, size_t(buf + n - (nl + 1)));
            }
          } else {
            c.in.append(buf, size_t(n));
          }
          if (!process_input(c)) drop[i] = true;
        }
      }
      if (!drop[i] && !drain(c)) drop[i] = true;
    }
    for (size_t i = clients.size(); i-- > 0;) {
      if (drop[i]) {
        ::close(clients[i].fd);
        clients.erase(clients.begin() + long(i));
      }
    }
    if (fds[1].revents & POLLIN) {
      int fd = ::accept4(g_listen, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd >= 0) clients.push_back(Client{fd, {}, {}, false});
    }
  }
  for (auto& c : clients) ::close(c.fd);
}

}  // namespace

bool start(const std::string& path, Handler handler, std::string* err) {
  if (g_running) {
    *err = "the control server is already running on " + g_path;
    return false;
  }
  sockaddr_un addr{};
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    *err = "control socket path is " + std::to_string(path.size()) + " bytes; a Unix socket path must be 1–" +
           std::to_string(sizeof(addr.sun_path) - 1) + " bytes (use a shorter session folder): " + path;
    return false;
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  addr.sun_family = AF_UNIX;
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      *err = "control socket path exists and is not a socket: " + path;
      return false;
    }
    ::unlink(path.c_str());  // a stale socket from a previous process with the same pid
  }
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *err = std::string("cannot create the control socket: ") + std::strerror(errno);
    return false;
  }
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    *err = "cannot bind the control socket " + path + ": " + std::strerror(errno);
    ::close(fd);
    return false;
  }
  // No one can connect before listen(), so tightening the mode here leaves no window.
  if (::chmod(path.c_str(), 0600) != 0 || ::listen(fd, 16) != 0) {
    *err = "cannot listen on the control socket " + path + ": " + std::strerror(errno);
    ::close(fd);
    ::unlink(path.c_str());
    return false;
  }
  set_nonblocking(fd);
  if (::pipe2(g_wake, O_CLOEXEC) != 0) {
    *err = std::string("cannot create the control server's wake pipe: ") + std::strerror(errno);
    ::close(fd);
    ::unlink(path.c_str());
    return false;
  }
  g_listen = fd;
  g_path = path;
  g_handler = std::move(handler);
  g_running = true;
  g_thread = std::thread(serve);
  return true;
}

bool running() { return g_running; }

void stop() {
  if (!g_running.exchange(false)) return;
  char b = 1;
  if (::write(g_wake[1], &b, 1) < 0) {}
  if (g_thread.joinable()) g_thread.join();
  ::close(g_listen);
  ::close(g_wake[0]);
  ::close(g_wake[1]);
  g_listen = -1;
  ::unlink(g_path.c_str());
}

}  // namespace gpumem::rec::control
