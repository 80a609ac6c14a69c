// test_driver_layout.cc — our driver declarations (driver_api.h) against the real cuda.h, where the
// machine has one (the build defines GPUMEM_HAVE_CUDA_H); CI machines without CUDA skip the check.
#include <cstddef>

#include "../check.h"
#include "driver_api.h"

#ifdef GPUMEM_HAVE_CUDA_H
#include <cuda.h>
namespace d = gpumem::drv;
static_assert(sizeof(d::CUmemAllocationProp) == sizeof(CUmemAllocationProp), "CUmemAllocationProp size");
static_assert(offsetof(d::CUmemAllocationProp, location) == offsetof(CUmemAllocationProp, location), "location");
static_assert(offsetof(d::CUmemAllocationProp, win32HandleMetaData) ==
                  offsetof(CUmemAllocationProp, win32HandleMetaData),
              "win32HandleMetaData");
static_assert(offsetof(d::CUmemAllocationProp, allocFlags) == offsetof(CUmemAllocationProp, allocFlags), "flags");
static_assert(sizeof(d::CUmemAccessDesc) == sizeof(CUmemAccessDesc), "CUmemAccessDesc size");
static_assert(d::CU_STREAM_CAPTURE_MODE_RELAXED == CU_STREAM_CAPTURE_MODE_RELAXED, "relaxed mode");
static_assert(d::CU_MEM_ALLOCATION_TYPE_PINNED == CU_MEM_ALLOCATION_TYPE_PINNED, "pinned");
static_assert(d::CU_MEM_LOCATION_TYPE_DEVICE == CU_MEM_LOCATION_TYPE_DEVICE, "device location");
static_assert(d::CU_MEM_ACCESS_FLAGS_PROT_READWRITE == CU_MEM_ACCESS_FLAGS_PROT_READWRITE, "rw");
static_assert(d::CUDA_ERROR_OUT_OF_MEMORY == CUDA_ERROR_OUT_OF_MEMORY, "oom code");
static_assert(d::CUDA_ERROR_NOT_READY == CUDA_ERROR_NOT_READY, "not ready code");
static_assert(d::CU_EVENT_DISABLE_TIMING == CU_EVENT_DISABLE_TIMING, "event flag");
TEST(driver_declarations_match_cuda_h) { CHECK(sizeof(CUmemAllocationProp) == sizeof(d::CUmemAllocationProp)); }
#endif
