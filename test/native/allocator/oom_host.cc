// oom_host.cc — PyTorch's side of the lens allocator's OOM, in miniature (Note [One C++ runtime] in
// native/floor/README.md). A program linked with the system's libstdc++, as PyTorch is, loads the shipped library
// with dlopen, runs it on the simulated device with a small capacity through the hooks CUDAPluggableAllocator calls,
// and catches what the library throws as std::exception, as the lens OOM glue does (Note [Lens OOM type] in
// native/python/gpumem/_observer_ext.cpp).
//
//   oom_host LIB    one results line per case (suite "oom_host"); exit status non-zero on any failure
#include <dlfcn.h>

#include <exception>
#include <stdexcept>
#include <string>
#include <typeinfo>

#include "../check.h"

namespace {

struct Lib {
  int (*configure)(const char*);
  const char* (*last_error)();
  void (*init)(int);
  void* (*malloc)(size_t, int, void*);
  void (*free)(void*, size_t, int, void*);
  void (*memory_fraction)(double, int);
  uint64_t (*allocated)(int);
};

template <typename F>
void bind(void* h, const char* name, F& f) {
  f = reinterpret_cast<F>(dlsym(h, name));
  if (!f) throw t::Failure(std::string("the library does not export ") + name);
}

constexpr size_t kMiB = size_t(1) << 20;

}  // namespace

int main(int argc, char** argv) {
  t::set_suite("oom_host");
  if (argc != 2) {
    std::fprintf(stderr, "usage: oom_host LIB\n");
    return 2;
  }
  Lib lib{};
  if (!t::run("the library loads into a program linked with the system's libstdc++", [&] {
        void* h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
        if (!h) throw t::Failure(dlerror());
        bind(h, "gpumem_configure", lib.configure);
        bind(h, "gpumem_last_error", lib.last_error);
        bind(h, "gpumem_init", lib.init);
        bind(h, "gpumem_malloc", lib.malloc);
        bind(h, "gpumem_free", lib.free);
        bind(h, "gpumem_memory_fraction", lib.memory_fraction);
        bind(h, "gpumem_allocated", lib.allocated);
        // What GPUMEM_BACKEND=sim and GPUMEM_SIM_CAPACITY=64MiB become in the bootstrap's configuration.
        if (lib.configure("{\"backend\":\"sim\",\"sim_capacity\":67108864,\"segments\":\"fixed\"}") != 0)
          throw t::Failure(std::string("gpumem_configure: ") + lib.last_error());
        lib.init(1);
      }))
    return t::finish();

  t::run("an OOM thrown in the library is caught here as std::exception, with PyTorch's message", [&] {
    void* kept = lib.malloc(40 * kMiB, 0, nullptr);
    CHECK(kept != nullptr);
    std::string what, type;
    bool as_runtime_error = false;
    try {
      lib.malloc(48 * kMiB, 0, nullptr);  // 40 + 48 MiB on a 64 MiB device
    } catch (const std::exception& e) {
      what = e.what();
      type = typeid(e).name();
      as_runtime_error = dynamic_cast<const std::runtime_error*>(&e) != nullptr;
    }
    CHECK(what.rfind("CUDA out of memory. Tried to allocate 48.00 MiB", 0) == 0);
    // The thrown type is the library's own (gpumem::core::OutOfMemory); the host matched its base classes.
    CHECK(type.find("OutOfMemory") != std::string::npos);
    CHECK(as_runtime_error);
    lib.free(kept, 40 * kMiB, 0, nullptr);
  });

  t::run("after the catch the host's exception state is clean, as after any exception of its own", [&] {
    try {
      lib.malloc(100 * kMiB, 0, nullptr);
    } catch (const std::exception&) {}
    CHECK_EQ(std::uncaught_exceptions(), 0);
    CHECK(std::current_exception() == nullptr);
    // The host throws and catches its own exception through the same runtime afterwards.
    bool caught = false;
    try {
      throw std::logic_error("the host's own");
    } catch (const std::logic_error& e) {
      caught = std::string(e.what()) == "the host's own" && std::uncaught_exceptions() == 0;
    }
    CHECK(caught);
  });

  t::run("a failure other than OOM crosses as std::runtime_error with its reason", [&] {
    std::string what;
    try {
      lib.memory_fraction(2.0, 0);
    } catch (const std::runtime_error& e) {
      what = e.what();
    }
    CHECK(what.rfind("gpumem: memory fraction must be within [0, 1], got 2", 0) == 0);
  });

  t::run("the library keeps allocating after its OOMs", [&] {
    void* p = lib.malloc(60 * kMiB, 0, nullptr);
    CHECK(p != nullptr);
    CHECK_EQ(lib.allocated(0), uint64_t(60 * kMiB));
    lib.free(p, 60 * kMiB, 0, nullptr);
    CHECK_EQ(lib.allocated(0), uint64_t(0));
  });
  return t::finish();
}
