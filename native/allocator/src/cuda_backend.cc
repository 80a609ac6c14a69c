// cuda_backend.cc — CudaDriverBackend: the Backend over the CUDA driver API, loaded with dlopen.
#include "cuda_backend.h"

#include <dlfcn.h>

#include <cstring>
#include <mutex>
#include <vector>

#include "driver_api.h"

namespace gpumem::core {
namespace {

using namespace gpumem::drv;

struct Driver {
  void* lib = nullptr;
  cuInit_t Init;
  cuDeviceGetCount_t DeviceGetCount;
  cuDeviceGet_t DeviceGet;
  cuDeviceGetName_t DeviceGetName;
  cuDeviceGetPCIBusId_t DeviceGetPCIBusId;
  cuDeviceTotalMem_t DeviceTotalMem;
  cuDevicePrimaryCtxRetain_t DevicePrimaryCtxRetain;
  cuCtxGetCurrent_t CtxGetCurrent;
  cuCtxSetCurrent_t CtxSetCurrent;
  cuMemGetInfo_t MemGetInfo;
  cuMemAlloc_t MemAlloc;
  cuMemFree_t MemFree;
  cuEventCreate_t EventCreate;
  cuEventRecord_t EventRecord;
  cuEventQuery_t EventQuery;
  cuEventSynchronize_t EventSynchronize;
  cuEventDestroy_t EventDestroy;
  cuStreamSynchronize_t StreamSynchronize;
  cuThreadExchangeStreamCaptureMode_t ThreadExchangeStreamCaptureMode;
  cuGetErrorString_t GetErrorString;
  cuMemAddressReserve_t MemAddressReserve;
  cuMemAddressFree_t MemAddressFree;
  cuMemCreate_t MemCreate;
  cuMemMap_t MemMap;
  cuMemSetAccess_t MemSetAccess;
  cuMemUnmap_t MemUnmap;
  cuMemRelease_t MemRelease;
  cuMemRetainAllocationHandle_t MemRetainAllocationHandle;
  cuMemGetAllocationGranularity_t MemGetAllocationGranularity;

  template <typename F>
  void load(F* fn, const char* symbol) {
    *fn = reinterpret_cast<F>(dlsym(lib, symbol));
    if (!*fn)
      throw BackendError(std::string("libcuda.so.1 lacks ") + symbol +
                         "; the NVIDIA driver is too old for the lens allocator (needs CUDA 11.2+ driver)");
  }
};

class CudaDriverBackend final : public Backend {
 public:
  CudaDriverBackend() {
    d_.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!d_.lib)
      throw BackendError(std::string("cannot load the CUDA driver (libcuda.so.1): ") + dlerror() +
                         "; is an NVIDIA driver installed and visible in this environment?");
    d_.load(&d_.Init, "cuInit");
    d_.load(&d_.DeviceGetCount, "cuDeviceGetCount");
    d_.load(&d_.DeviceGet, "cuDeviceGet");
    d_.load(&d_.DeviceGetName, "cuDeviceGetName");
    d_.load(&d_.DeviceGetPCIBusId, "cuDeviceGetPCIBusId");
    d_.load(&d_.DeviceTotalMem, "cuDeviceTotalMem_v2");
    d_.load(&d_.DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    d_.load(&d_.CtxGetCurrent, "cuCtxGetCurrent");
    d_.load(&d_.CtxSetCurrent, "cuCtxSetCurrent");
    d_.load(&d_.MemGetInfo, "cuMemGetInfo_v2");
    d_.load(&d_.MemAlloc, "cuMemAlloc_v2");
    d_.load(&d_.MemFree, "cuMemFree_v2");
    d_.load(&d_.EventCreate, "cuEventCreate");
    d_.load(&d_.EventRecord, "cuEventRecord");
    d_.load(&d_.EventQuery, "cuEventQuery");
    d_.load(&d_.EventSynchronize, "cuEventSynchronize");
    d_.load(&d_.EventDestroy, "cuEventDestroy_v2");
    d_.load(&d_.StreamSynchronize, "cuStreamSynchronize");
    d_.load(&d_.ThreadExchangeStreamCaptureMode, "cuThreadExchangeStreamCaptureMode");
    d_.load(&d_.GetErrorString, "cuGetErrorString");
    d_.load(&d_.MemAddressReserve, "cuMemAddressReserve");
    d_.load(&d_.MemAddressFree, "cuMemAddressFree");
    d_.load(&d_.MemCreate, "cuMemCreate");
    d_.load(&d_.MemMap, "cuMemMap");
    d_.load(&d_.MemSetAccess, "cuMemSetAccess");
    d_.load(&d_.MemUnmap, "cuMemUnmap");
    d_.load(&d_.MemRelease, "cuMemRelease");
    d_.load(&d_.MemRetainAllocationHandle, "cuMemRetainAllocationHandle");
    d_.load(&d_.MemGetAllocationGranularity, "cuMemGetAllocationGranularity");
    check(d_.Init(0), "cuInit");
    int n = 0;
    check(d_.DeviceGetCount(&n), "cuDeviceGetCount");
    devices_ = std::vector<PerDevice>(n);
  }

  const char* name() const override { return "cuda"; }
  int device_count() override { return int(devices_.size()); }

  bool mem_get_info(int device, uint64_t* free_b, uint64_t* total_b) override {
    Guard g(this, device);
    size_t f = 0, t = 0;
    if (d_.MemGetInfo(&f, &t) != CUDA_SUCCESS) return false;
    *free_b = f;
    *total_b = t;
    return true;
  }

  uint64_t total_memory(int device) override {
    if (device < 0 || device >= int(devices_.size())) return 0;
    CUdevice dev = 0;
    size_t total = 0;
    check(d_.DeviceGet(&dev, device), "cuDeviceGet");
    check(d_.DeviceTotalMem(&total, dev), "cuDeviceTotalMem");
    return total;
  }

  DeviceIdentity identity(int device) override {
    DeviceIdentity id;
    CUdevice dev = 0;
    if (device < 0 || device >= int(devices_.size()) || d_.DeviceGet(&dev, device) != CUDA_SUCCESS) return id;
    char buf[256] = {0};
    if (d_.DeviceGetName(buf, sizeof buf - 1, dev) == CUDA_SUCCESS) id.name = buf;
    char bus[64] = {0};
    if (d_.DeviceGetPCIBusId(bus, sizeof bus - 1, dev) == CUDA_SUCCESS) id.pci_bus_id = bus;
    return id;
  }

  bool malloc(int device, size_t size, bool capturing, uint64_t* addr) override {
    Guard g(this, device);
    Relaxed r(this, capturing);
    CUdeviceptr p = 0;
    CUresult rc = d_.MemAlloc(&p, size);
    if (rc == CUDA_ERROR_OUT_OF_MEMORY) return false;
    check(rc, "cuMemAlloc");
    *addr = p;
    return true;
  }

  void free(int device, uint64_t addr) override {
    Guard g(this, device);
    check(d_.MemFree(CUdeviceptr(addr)), "cuMemFree");
  }

  Event record_event(int device, Stream stream) override {
    Guard g(this, device);
    CUevent e = nullptr;
    {
      // Events are reused (like PyTorch's EventPool): creating one per cross-stream free costs a
      // driver call each time. The pool is per device because an event belongs to its context.
      std::lock_guard<std::mutex> lock(pool_mu_);
      auto& pool = devices_[device].free_events;
      if (!pool.empty()) {
        e = pool.back();
        pool.pop_back();
      }
    }
    if (!e) check(d_.EventCreate(&e, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
    check(d_.EventRecord(e, reinterpret_cast<CUstream>(stream)), "cuEventRecord");
    return reinterpret_cast<Event>(e);
  }
  bool query_event(int device, Event event) override {
    Guard g(this, device);
    CUresult rc = d_.EventQuery(reinterpret_cast<CUevent>(event));
    if (rc == CUDA_ERROR_NOT_READY) return false;
    check(rc, "cuEventQuery");
    return true;
  }
  void synchronize_event(int device, Event event) override {
    Guard g(this, device);
    check(d_.EventSynchronize(reinterpret_cast<CUevent>(event)), "cuEventSynchronize");
  }
  void destroy_event(int device, Event event) override {
    std::lock_guard<std::mutex> lock(pool_mu_);
    devices_.at(device).free_events.push_back(reinterpret_cast<CUevent>(event));
  }
  void synchronize_stream(int device, Stream stream) override {
    Guard g(this, device);
    check(d_.StreamSynchronize(reinterpret_cast<CUstream>(stream)), "cuStreamSynchronize");
  }

  bool reserve_address(int device, size_t size, size_t alignment, uint64_t* addr) override {
    Guard g(this, device);
    CUmemAllocationProp prop = page_prop(device);
    size_t gran = 0;
    check(d_.MemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
          "cuMemGetAllocationGranularity");
    if (gran == 0 || kSmallPage % gran != 0)
      throw BackendError("expandable segments need a 2 MiB-compatible page granularity; the driver reports " +
                         std::to_string(gran) + " bytes; use segments=fixed");
    CUdeviceptr p = 0;
    CUresult rc = d_.MemAddressReserve(&p, size, alignment, 0, 0);
    if (rc == CUDA_ERROR_OUT_OF_MEMORY) return false;
    check(rc, "cuMemAddressReserve");
    *addr = p;
    return true;
  }

  bool map_page(int device, uint64_t addr, size_t size, bool capturing) override {
    Guard g(this, device);
    Relaxed r(this, capturing);
    CUmemAllocationProp prop = page_prop(device);
    CUmemGenericAllocationHandle h = 0;
    CUresult rc = d_.MemCreate(&h, size, &prop, 0);
    if (rc == CUDA_ERROR_OUT_OF_MEMORY) return false;
    check(rc, "cuMemCreate");
    return map_handle(device, addr, size, h);
  }
  void unmap_page(int device, uint64_t addr, size_t size) override {
    Guard g(this, device);
    check(d_.MemUnmap(CUdeviceptr(addr), size), "cuMemUnmap");
  }
  bool remap_page(int device, uint64_t from, uint64_t to, size_t size, Stream) override {
    Guard g(this, device);
    CUmemGenericAllocationHandle h = 0;
    check(d_.MemRetainAllocationHandle(&h, reinterpret_cast<void*>(from)), "cuMemRetainAllocationHandle");
    return map_handle(device, to, size, h);
  }
  void free_address(int device, uint64_t addr, size_t size) override {
    Guard g(this, device);
    check(d_.MemAddressFree(CUdeviceptr(addr), size), "cuMemAddressFree");
  }

 private:
  // Maps handle `h` at `addr` read-write for `device` and releases the handle: the mapping (and any
  // other mapping of the same memory, Note [Page moves]) keeps the physical memory alive, so
  // cuMemUnmap alone gives it back and no per-page handle table is needed. False when out of memory.
  bool map_handle(int device, uint64_t addr, size_t size, CUmemGenericAllocationHandle h) {
    CUresult rc = d_.MemMap(CUdeviceptr(addr), size, 0, h, 0);
    d_.MemRelease(h);
    if (rc == CUDA_ERROR_OUT_OF_MEMORY) return false;
    check(rc, "cuMemMap");
    CUmemAccessDesc access{};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = device;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    rc = d_.MemSetAccess(CUdeviceptr(addr), size, &access, 1);
    if (rc != CUDA_SUCCESS) {
      d_.MemUnmap(CUdeviceptr(addr), size);
      if (rc == CUDA_ERROR_OUT_OF_MEMORY) return false;
      check(rc, "cuMemSetAccess");
    }
    return true;
  }

  struct PerDevice {
    std::once_flag once;
    CUcontext ctx = nullptr;
    std::vector<CUevent> free_events;  // completed events ready for reuse (pool_mu_)
  };

  // Makes `device`'s primary context (the one the CUDA runtime and PyTorch use) current for the
  // scope and restores the caller's afterwards: frees may arrive on threads bound to another device.
  struct Guard {
    Guard(CudaDriverBackend* b, int device) : b_(b) {
      if (device < 0 || device >= int(b->devices_.size()))
        throw BackendError("device " + std::to_string(device) + " does not exist (the driver sees " +
                           std::to_string(b->devices_.size()) + ")");
      CUcontext want = b->context(device);
      b->check(b->d_.CtxGetCurrent(&prev_), "cuCtxGetCurrent");
      if (prev_ != want) {
        b->check(b->d_.CtxSetCurrent(want), "cuCtxSetCurrent");
        switched_ = true;
      }
    }
    ~Guard() {
      if (switched_) b_->d_.CtxSetCurrent(prev_);
    }
    CudaDriverBackend* b_;
    CUcontext prev_ = nullptr;
    bool switched_ = false;
  };

  // Driver allocations while a graph capture is underway must run in relaxed capture mode, or the
  // driver invalidates the capture (PyTorch: Note [Interaction with CUDA graph capture]).
  struct Relaxed {
    Relaxed(CudaDriverBackend* b, bool on) : b_(b), on_(on) {
      if (on_) {
        mode_ = CU_STREAM_CAPTURE_MODE_RELAXED;
        b->check(b->d_.ThreadExchangeStreamCaptureMode(&mode_), "cuThreadExchangeStreamCaptureMode");
      }
    }
    ~Relaxed() {
      if (on_) b_->d_.ThreadExchangeStreamCaptureMode(&mode_);
    }
    CudaDriverBackend* b_;
    bool on_;
    int mode_ = 0;
  };

  CUcontext context(int device) {
    PerDevice& pd = devices_[device];
    std::call_once(pd.once, [&] {
      CUdevice dev = 0;
      check(d_.DeviceGet(&dev, device), "cuDeviceGet");
      check(d_.DevicePrimaryCtxRetain(&pd.ctx, dev), "cuDevicePrimaryCtxRetain");
    });
    return pd.ctx;
  }

  CUmemAllocationProp page_prop(int device) const {
    CUmemAllocationProp prop;
    std::memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    return prop;
  }

  void check(CUresult rc, const char* what) const {
    if (rc == CUDA_SUCCESS) return;
    const char* s = nullptr;
    if (d_.GetErrorString) d_.GetErrorString(rc, &s);
    throw BackendError(std::string(what) + " failed: " + (s ? s : "unknown error") + " (CUresult " +
                       std::to_string(rc) + ")");
  }

  Driver d_;
  std::vector<PerDevice> devices_;
  std::mutex pool_mu_;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend() { return std::make_unique<CudaDriverBackend>(); }

}  // namespace gpumem::core
