// backend.h — where device memory, streams' events and capture state come from. One interface, two
// one-job implementations: CudaDriverBackend (libcuda.so.1 via dlopen) and SimBackend (tests, replay).
//
// Every call names the device; the backend makes that device's context current for the call itself
// (a free may arrive on a thread whose current device differs). Calls are made under the device lock.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "constants.h"

namespace gpumem::core {

// Who a device is, for the capture's REC_DEVICE and for matching it in NVML: the driver's name and PCI
// bus id ("" when unknown).
struct DeviceIdentity {
  std::string name;
  std::string pci_bus_id;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  virtual int device_count() = 0;
  // The driver's view of the whole device (includes other processes and the CUDA context).
  virtual bool mem_get_info(int device, uint64_t* free_b, uint64_t* total_b) = 0;
  // The device's memory size, without creating a context (the allocator is built before PyTorch
  // initialises CUDA, and a context on every visible GPU would cost each DDP rank memory on all).
  virtual uint64_t total_memory(int device) = 0;
  // The device's name and PCI bus id, without creating a context; unlike the calls below, not made
  // under the device lock (it reads nothing the allocator changes). Empty when unknown.
  virtual DeviceIdentity identity(int device) { return {}; }

  // ---- Fixed segments (cuMemAlloc/cuMemFree). `capturing`: a graph capture is underway on this
  // device, so the driver call must run in relaxed capture mode (Note [Interaction with CUDA graph
  // capture] in PyTorch's allocator). Returns false when out of memory; throws on other errors.
  virtual bool malloc(int device, size_t size, bool capturing, uint64_t* addr) = 0;
  virtual void free(int device, uint64_t addr) = 0;

  // ---- Events (record_stream deferral). Never called while a capture is underway.
  virtual Event record_event(int device, Stream stream) = 0;
  virtual bool query_event(int device, Event event) = 0;  // true once the event completed
  virtual void synchronize_event(int device, Event event) = 0;
  virtual void destroy_event(int device, Event event) = 0;

  // Waits until all work queued on `stream` finished. Unmapping pages needs it: unlike cuMemFree,
  // cuMemUnmap does not wait for kernels still using the memory (PyTorch's unmapHandles does the same).
  virtual void synchronize_stream(int device, Stream stream) = 0;

  // ---- Expandable segments (virtual memory management). Pages are mapped one by one so that each
  // can be unmapped on its own (cuMemUnmap must cover exactly what one cuMemMap mapped).
  virtual bool reserve_address(int device, size_t size, size_t alignment, uint64_t* addr) = 0;
  virtual bool map_page(int device, uint64_t addr, size_t size, bool capturing) = 0;  // false = OOM
  virtual void unmap_page(int device, uint64_t addr, size_t size) = 0;
  // Maps the physical memory already mapped at `from` at `to` as well (Note [Page moves]); `from`
  // stays mapped until unmap_page, which may follow only once an event recorded on `stream` after
  // this call has completed (the driver needs no stream; the simulated device checks the rule).
  // Takes no new memory. False when the driver refuses (then nothing changed).
  virtual bool remap_page(int device, uint64_t from, uint64_t to, size_t size, Stream stream) = 0;
  virtual void free_address(int device, uint64_t addr, size_t size) = 0;
};

// Thrown for driver failures that are not "out of memory" (a broken context, a bad argument).
struct BackendError : std::exception {
  explicit BackendError(std::string m) : msg(std::move(m)) {}
  const char* what() const noexcept override { return msg.c_str(); }
  std::string msg;
};

}  // namespace gpumem::core
