// floor.h — forced into every translation unit of a shipped binary (`-include native/floor/floor.h`), so that
// the binary asks nothing newer of the C library than glibc 2.28 (Note [Binary floor] in README.md). Two tools:
//  - the libstdc++ features whose inline code calls glibc functions newer than the floor are turned off, so the
//    headers fall back to what libstdc++ 8 (the floor's) did;
//  - the glibc functions that moved into libc.so.6 in 2.32–2.34 (libpthread's and libdl's) are bound to their
//    first version, which every glibc since has kept (`.symver`). What has no older version is defined in
//    floor_shims.cc.
// objdump -T of every shipped binary is checked against the floor (check_floor.py); a new symbol above it
// fails the check by name, and belongs in this file or in floor_shims.cc.
#pragma once

#if !defined(__x86_64__) && !defined(__aarch64__)
#error "native/floor knows the glibc symbol versions of x86_64 and aarch64 only"
#endif

#ifdef __cplusplus
// libstdc++'s configuration macros, read now so that the #undefs below outlast every later #include.
#include <bits/c++config.h>
// std::condition_variable and std::timed_mutex wait on the steady clock with pthread_cond_clockwait and
// pthread_mutex_clocklock (glibc 2.30); without them they wait on the system clock, as libstdc++ 8 did.
#undef _GLIBCXX_USE_PTHREAD_COND_CLOCKWAIT
#undef _GLIBCXX_USE_PTHREAD_MUTEX_CLOCKLOCK
#undef _GLIBCXX_USE_PTHREAD_RWLOCK_CLOCKLOCK
#endif

// A symbol's first version: the one x86_64 had, and GLIBC_2.17 everywhere on aarch64 (its first glibc).
#if defined(__x86_64__)
#define GPUMEM_FLOOR_FIRST(x86_64) x86_64
#else
#define GPUMEM_FLOOR_FIRST(x86_64) "GLIBC_2.17"
#endif
#define GPUMEM_FLOOR_PIN(sym, x86_64) __asm__(".symver " #sym "," #sym "@" GPUMEM_FLOOR_FIRST(x86_64))

// libpthread's, in libc.so.6 since glibc 2.32 (pthread_sigmask, pthread_getattr_np) or 2.34 (the rest).
GPUMEM_FLOOR_PIN(pthread_once, "GLIBC_2.2.5");
GPUMEM_FLOOR_PIN(pthread_sigmask, "GLIBC_2.2.5");
GPUMEM_FLOOR_PIN(pthread_getattr_np, "GLIBC_2.2.5");
GPUMEM_FLOOR_PIN(pthread_attr_getstack, "GLIBC_2.2.5");
GPUMEM_FLOOR_PIN(pthread_setname_np, "GLIBC_2.12");
GPUMEM_FLOOR_PIN(pthread_getname_np, "GLIBC_2.12");
GPUMEM_FLOOR_PIN(pthread_key_create, "GLIBC_2.2.5");
GPUMEM_FLOOR_PIN(pthread_key_delete, "GLIBC_2.2.5");
GPUMEM_FLOOR_PIN(pthread_setspecific, "GLIBC_2.2.5");
GPUMEM_FLOOR_PIN(pthread_getspecific, "GLIBC_2.2.5");
GPUMEM_FLOOR_PIN(pthread_create, "GLIBC_2.2.5");
GPUMEM_FLOOR_PIN(pthread_join, "GLIBC_2.2.5");
GPUMEM_FLOOR_PIN(pthread_detach, "GLIBC_2.2.5");
GPUMEM_FLOOR_PIN(pthread_kill, "GLIBC_2.2.5");
// libdl's, in libc.so.6 since glibc 2.34.
GPUMEM_FLOOR_PIN(dlopen, "GLIBC_2.2.5");
GPUMEM_FLOOR_PIN(dlsym, "GLIBC_2.2.5");
GPUMEM_FLOOR_PIN(dlerror, "GLIBC_2.2.5");
GPUMEM_FLOOR_PIN(dlclose, "GLIBC_2.2.5");
GPUMEM_FLOOR_PIN(dladdr, "GLIBC_2.2.5");
