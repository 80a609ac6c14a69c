// process_hooks.cc — pthread_atfork and atexit, registered once (process_hooks.h).
#include "process_hooks.h"

#include <pthread.h>

#include <cstdlib>
#include <mutex>

namespace gpumem::process {

void install_hooks(void (*in_fork_child)(), void (*at_exit)()) {
  static std::once_flag once;
  std::call_once(once, [&] {
    pthread_atfork(nullptr, nullptr, in_fork_child);
    std::atexit(at_exit);
  });
}

}  // namespace gpumem::process
