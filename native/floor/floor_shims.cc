// floor_shims.cc — what a shipped binary uses that glibc 2.28 or libstdc++ 3.4.25 does not have under any version
// (Note [Binary floor] in README.md): defined here, hidden, so the binary carries its own copy and no other
// library can see it. Linked into every shipped binary beside floor.h.
#include <new>

// Weak as well: where the compiler links libstdc++ statically (a GCC built with no shared libstdc++ beside it, as a
// GPU machine's /opt/gcc was), the archive member that defines the same function is pulled in for its neighbours, and
// its strong definition wins instead of colliding with ours.
#define GPUMEM_FLOOR_LOCAL __attribute__((visibility("hidden"), weak))

// libstdc++ 3.4.29 (GCC 11): what `new T[n]` calls when n is too large. libstdc++ 8 threw the same type from
// the inline code; std::bad_array_new_length itself is CXXABI_1.3.8.
namespace std {
GPUMEM_FLOOR_LOCAL void __throw_bad_array_new_length() { throw std::bad_array_new_length(); }
}  // namespace std

extern "C" {
// glibc 2.32: libstdc++'s headers read it to skip atomic reference counts in a process with one thread. 0 says
// "threads may exist", which is always true enough: the counts stay atomic, as libstdc++ 8's were.
GPUMEM_FLOOR_LOCAL char __libc_single_threaded = 0;

// glibc 2.33 made stat, fstat and lstat functions of libc.so.6; before, libc_nonshared.a turned them into calls
// of __xstat, __fxstat and __lxstat, which every glibc since keeps. The same, here. The first argument is the
// struct's layout version: _STAT_VER_LINUX (1) on x86_64, _STAT_VER_KERNEL (0) on aarch64.
struct stat;
struct stat64;
#if defined(__x86_64__)
#define GPUMEM_STAT_VER 1
#define GPUMEM_STAT_FIRST "GLIBC_2.2.5"
#else
#define GPUMEM_STAT_VER 0
#define GPUMEM_STAT_FIRST "GLIBC_2.17"
#endif
int __xstat(int ver, const char* path, struct stat* buf);
int __fxstat(int ver, int fd, struct stat* buf);
int __lxstat(int ver, const char* path, struct stat* buf);
int __fxstat64(int ver, int fd, struct stat64* buf);
__asm__(".symver __xstat,__xstat@" GPUMEM_STAT_FIRST);
__asm__(".symver __fxstat,__fxstat@" GPUMEM_STAT_FIRST);
__asm__(".symver __lxstat,__lxstat@" GPUMEM_STAT_FIRST);
__asm__(".symver __fxstat64,__fxstat64@" GPUMEM_STAT_FIRST);
GPUMEM_FLOOR_LOCAL int stat(const char* path, struct stat* buf) { return __xstat(GPUMEM_STAT_VER, path, buf); }
GPUMEM_FLOOR_LOCAL int fstat(int fd, struct stat* buf) { return __fxstat(GPUMEM_STAT_VER, fd, buf); }
GPUMEM_FLOOR_LOCAL int lstat(const char* path, struct stat* buf) { return __lxstat(GPUMEM_STAT_VER, path, buf); }
GPUMEM_FLOOR_LOCAL int fstat64(int fd, struct stat64* buf) { return __fxstat64(GPUMEM_STAT_VER, fd, buf); }
}
