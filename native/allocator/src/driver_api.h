// driver_api.h — the slice of the CUDA driver API the allocator calls, declared here so that building
// needs no CUDA headers and the .so links nothing from CUDA (libcuda.so.1 is dlopen'ed at run time).
// Layouts and values are copied from cuda.h (CUDA 12/13; stable ABI); test_driver_layout.cc checks
// them against cuda.h where one is installed.
#pragma once
#include <cstddef>

namespace gpumem::drv {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUmemGenericAllocationHandle = unsigned long long;
struct CUctx_st;
struct CUstream_st;
struct CUevent_st;
using CUcontext = CUctx_st*;
using CUstream = CUstream_st*;
using CUevent = CUevent_st*;

constexpr CUresult CUDA_SUCCESS = 0;
constexpr CUresult CUDA_ERROR_OUT_OF_MEMORY = 2;
constexpr CUresult CUDA_ERROR_NOT_READY = 600;

constexpr unsigned CU_EVENT_DISABLE_TIMING = 0x2;
constexpr int CU_STREAM_CAPTURE_MODE_RELAXED = 2;
constexpr int CU_MEM_ALLOCATION_TYPE_PINNED = 0x1;
constexpr int CU_MEM_HANDLE_TYPE_NONE = 0x0;
constexpr int CU_MEM_LOCATION_TYPE_DEVICE = 0x1;
constexpr int CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 0x3;
constexpr int CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0x0;

struct CUmemLocation {
  int type;  // CUmemLocationType
  int id;
};
struct CUmemAllocationProp {
  int type;                  // CUmemAllocationType
  int requestedHandleTypes;  // CUmemAllocationHandleType
  CUmemLocation location;
  void* win32HandleMetaData;
  struct {
    unsigned char compressionType;
    unsigned char gpuDirectRDMACapable;
    unsigned short usage;
    unsigned char reserved[4];
  } allocFlags;
};
struct CUmemAccessDesc {
  CUmemLocation location;
  int flags;  // CUmemAccess_flags
};

// Function pointer types, named after the exported (versioned) symbols.
using cuInit_t = CUresult (*)(unsigned);
using cuDeviceGetCount_t = CUresult (*)(int*);
using cuDeviceGet_t = CUresult (*)(CUdevice*, int);
using cuDeviceGetName_t = CUresult (*)(char*, int, CUdevice);
using cuDeviceGetPCIBusId_t = CUresult (*)(char*, int, CUdevice);
using cuDeviceTotalMem_t = CUresult (*)(size_t*, CUdevice);
using cuDevicePrimaryCtxRetain_t = CUresult (*)(CUcontext*, CUdevice);
using cuCtxGetCurrent_t = CUresult (*)(CUcontext*);
using cuCtxSetCurrent_t = CUresult (*)(CUcontext);
using cuMemGetInfo_t = CUresult (*)(size_t*, size_t*);
using cuMemAlloc_t = CUresult (*)(CUdeviceptr*, size_t);
using cuMemFree_t = CUresult (*)(CUdeviceptr);
using cuEventCreate_t = CUresult (*)(CUevent*, unsigned);
using cuEventRecord_t = CUresult (*)(CUevent, CUstream);
using cuEventQuery_t = CUresult (*)(CUevent);
using cuEventSynchronize_t = CUresult (*)(CUevent);
using cuEventDestroy_t = CUresult (*)(CUevent);
using cuStreamSynchronize_t = CUresult (*)(CUstream);
using cuThreadExchangeStreamCaptureMode_t = CUresult (*)(int*);
using cuGetErrorString_t = CUresult (*)(CUresult, const char**);
using cuMemAddressReserve_t = CUresult (*)(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long);
using cuMemAddressFree_t = CUresult (*)(CUdeviceptr, size_t);
using cuMemCreate_t = CUresult (*)(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*,
                                   unsigned long long);
using cuMemMap_t = CUresult (*)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
using cuMemSetAccess_t = CUresult (*)(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t);
using cuMemUnmap_t = CUresult (*)(CUdeviceptr, size_t);
using cuMemRelease_t = CUresult (*)(CUmemGenericAllocationHandle);
using cuMemRetainAllocationHandle_t = CUresult (*)(CUmemGenericAllocationHandle*, void*);
using cuMemGetAllocationGranularity_t = CUresult (*)(size_t*, const CUmemAllocationProp*, int);

}  // namespace gpumem::drv
