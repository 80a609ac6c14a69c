// test_api.cc — the C API façade over the simulated backend: configuration, hooks, stats JSON, OOM
// through gpumem_malloc (with the state record written after the lock is released).
#include <dlfcn.h>

#include <functional>

#include "../../../native/allocator/include/gpumem_allocator.h"
#include "../../../native/format/json.h"
#include "allocator.h"
#include "cuda_backend.h"
#include "fixture.h"

using namespace gpumem::core;
using namespace t;

static gpumem::json::Value stats_of(int device) {
  size_t need = gpumem_stats_json(device, nullptr, 0);
  std::string buf(need + 1, '\0');
  CHECK_EQ(gpumem_stats_json(device, &buf[0], buf.size()), need);
  buf.resize(need);
  gpumem::json::Value v;
  std::string err;
  CHECK(gpumem::json::Parser::parse(buf, &v, &err));
  return v;
}

static int64_t key(const gpumem::json::Value& v, const char* k) {
  const gpumem::json::Value* x = v.find(k);
  if (!x) throw t::Failure(std::string("missing key ") + k);
  return x->as_int();
}

// One test drives the process-wide façade (it can be configured only once per process).
TEST(c_api_over_the_simulated_backend) {
  // The library attached the recorder when it was loaded; this test watches the records itself.
  CHECK(set_event_sink(fake::sink()));
  CHECK_EQ(gpumem_configure("{\"backend\": \"gpu\"}"), -1);
  // The settings table's sentence (Note [Settings table] in src/core/base/settings/table.ts).
  CHECK(std::string(gpumem_last_error()).find("\"backend\" must be 'cuda' or 'sim', got 'gpu'") != std::string::npos);
  CHECK_EQ(gpumem_configure("{not json"), -1);
  CHECK_EQ(gpumem_configure("{\"backend\":\"sim\",\"sim_capacity\":104857600,\"sim_devices\":2,"
                            "\"segments\":\"fixed\"}"),
           0);
  gpumem_init(2);
  CHECK(!set_event_sink(gpumem::core::null_sink()));  // the devices keep the sink they were built with
  CHECK_EQ(device_identity(1).name, std::string("simulated device"));
  CHECK_EQ(device_identity(1).pci_bus_id, std::string());
  CHECK_EQ(device_identity(2).name, std::string());  // no such device
  CHECK_EQ(device_count(), 2);
  CHECK_EQ(gpumem_configure("{\"segments\":\"expandable\"}"), -1);  // too late: allocator exists
  CHECK(std::string(gpumem_last_error()).find("before the first allocation") != std::string::npos);

  void* p = gpumem_malloc(1000, 0, nullptr);
  void* q = gpumem_malloc(12 << 20, 1, reinterpret_cast<void*>(7));
  void* z = gpumem_malloc(0, 0, nullptr);  // Note [Zero-byte tensors]: nothing, as under PyTorch's allocator
  CHECK(p && q && !z);
  gpumem_free(z, 0, 0, nullptr);
  CHECK_EQ(std::string(gpumem_last_error()).find("not allocated"), std::string::npos);
  z = gpumem_malloc(512, 0, nullptr);
  CHECK_EQ(gpumem_allocated(0), uint64_t(1024 + 512));
  CHECK_EQ(gpumem_reserved(1), uint64_t(12 << 20));
  CHECK_EQ(gpumem_reserved(-1), uint64_t((2 << 20) + (12 << 20)));

  auto v = stats_of(0);
  CHECK_EQ(v.members().size(), size_t(122 + 2));  // PyTorch 2.11's keys + num_trim_syncs, num_page_moves
  CHECK_EQ(key(v, "num_page_moves"), int64_t(0));
  for (size_t i = 1; i < v.members().size(); i++) CHECK(v.members()[i - 1].first < v.members()[i].first);
  CHECK_EQ(key(v, "allocated_bytes.all.current"), int64_t(1536));
  CHECK_EQ(key(v, "requested_bytes.small_pool.current"), int64_t(1000 + 512));
  CHECK_EQ(key(v, "reserved_bytes.small_pool.current"), int64_t(2 << 20));
  CHECK_EQ(key(v, "allocation.all.current"), int64_t(2));
  CHECK_EQ(key(v, "max_split_size"), int64_t(-1));
  CHECK_EQ(key(stats_of(1), "segment.large_pool.current"), int64_t(1));

  // A free naming the wrong device still finds the pointer.
  gpumem_free(q, 12 << 20, 0, nullptr);
  CHECK_EQ(gpumem_allocated(1), uint64_t(0));
  gpumem_free(reinterpret_cast<void*>(0x1234), 1, 0, nullptr);
  CHECK(std::string(gpumem_last_error()).find("not allocated by the lens allocator") != std::string::npos);

  // record_stream through the façade defers reuse until the cache is emptied (which synchronizes).
  gpumem_record_stream(p, reinterpret_cast<void*>(9));
  gpumem_free(p, 1000, 0, nullptr);
  auto v2 = stats_of(0);
  CHECK_EQ(key(v2, "active_bytes.all.current"), int64_t(1536));
  CHECK_EQ(key(v2, "allocated_bytes.all.current"), int64_t(512));

  size_t base_size = 0;
  CHECK_EQ(gpumem_base_alloc(z, &base_size), reinterpret_cast<void*>(SimBackend::base(0)));
  CHECK_EQ(base_size, size_t(2 << 20));

  gpumem_free(z, 0, 0, nullptr);
  uint64_t before = 0, after = 0;
  CHECK_EQ(gpumem_empty_cache(-1, &before, &after, 1), 0);
  CHECK_EQ(before, uint64_t((2 << 20) + (12 << 20)));
  CHECK_EQ(after, uint64_t(0));

  // OOM through the façade: the message, then the state record written without the device lock.
  gpumem_memory_fraction(0.5, 0);
  int states = fake::state_writes();
  void* keep = gpumem_malloc(30 << 20, 0, nullptr);
  std::string msg;
  try {
    gpumem_malloc(30 << 20, 0, nullptr);
  } catch (const std::runtime_error& e) {
    msg = e.what();
  }
  CHECK(msg.rfind("CUDA out of memory. Tried to allocate 30.00 MiB.", 0) == 0);
  CHECK_EQ(fake::state_writes(), states + 1);
  CHECK_EQ(fake::last_state_segments(), size_t(1));
  CHECK_EQ(key(stats_of(0), "num_ooms"), int64_t(1));
  gpumem_reset_accumulated_stats(0);
  CHECK_EQ(key(stats_of(0), "num_ooms"), int64_t(0));
  gpumem_free(keep, 0, 0, nullptr);
  gpumem_reset();
  CHECK_EQ(gpumem_reserved(-1), uint64_t(0));

  // Graph pool hooks with PyTorch's C++ parameter types.
  gpumem_begin_allocate_to_pool(1, {3, 0}, [](CUstream_st* s) { return s == reinterpret_cast<CUstream_st*>(4); });
  void* g = gpumem_malloc(4096, 1, reinterpret_cast<void*>(4));
  gpumem_end_allocate_to_pool(1, {3, 0});
  auto segs = snapshot_segments(1);
  CHECK_EQ(segs.size(), size_t(1));
  CHECK_EQ(segs[0].pool0, uint64_t(3));
  gpumem_free(g, 4096, 1, reinterpret_cast<void*>(4));
  gpumem_release_pool(1, {3, 0});
  gpumem_reset();
  CHECK(snapshot_segments(-1).empty());
  Figures f = figures(-1);
  CHECK_EQ(f.peak_reserved, uint64_t(30 << 20) + uint64_t(12 << 20));  // device 0 peaked at 30, device 1 at 12
  CHECK_EQ(std::string(gpumem_version()), std::string("0.1.0"));

  try {
    gpumem_malloc(1, 5, nullptr);
    CHECK(false);
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()).find("device 5 does not exist (2 visible)") != std::string::npos);
  }
}

TEST(cuda_backend_explains_a_missing_driver) {
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h) {  // a machine with a driver: the backend must come up instead
    dlclose(h);
    CHECK(make_cuda_backend()->device_count() >= 0);
    return;
  }
  try {
    make_cuda_backend();
    CHECK(false);
  } catch (const BackendError& e) {
    CHECK(std::string(e.what()).find("cannot load the CUDA driver (libcuda.so.1)") != std::string::npos);
  }
}
