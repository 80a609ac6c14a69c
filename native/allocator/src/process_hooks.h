// process_hooks.h — what must happen when the process forks or exits. Registered once per process;
// the callbacks are the recorder's (it decides what a fork child and an exit mean for a capture).
#pragma once

namespace gpumem::process {

// `in_fork_child` runs in the child right after fork() (one thread, no locks may be taken);
// `at_exit` runs from atexit(). Only the first call registers; later calls do nothing.
void install_hooks(void (*in_fork_child)(), void (*at_exit)());

}  // namespace gpumem::process
