// runtime.cpp — library identity, ABI layout and device enumeration.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

#include "device_guard.hpp"
#include "driver.hpp"
#include "status.hpp"
#include "topology.hpp"
#include "weft.h"

#ifndef WEFT_VERSION_STRING
#define WEFT_VERSION_STRING "0.0.0"
#endif

namespace weft {

int device_count() {
  // Cached: the answer cannot change within a process, and cudaGetDeviceCount on a machine
  // without a driver costs a failed driver load each time.
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      (void)cudaGetLastError();
      n = 0;
    }
    return n;
  }();
  return count;
}

void require_device(int32_t device) {
  int n = device_count();
  if (device < 0 || device >= n)
    WEFT_FAIL(WEFT_E_NO_DEVICE, "device %d is out of range: this machine has %d GPU%s", device, n,
              n == 1 ? "" : "s");
}

int pointer_device(const void* ptr) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return attr.type == cudaMemoryTypeDevice ? attr.device : -1;
}

}  // namespace weft

using namespace weft;

extern "C" {

WEFT_API int weft_abi_version(int32_t* out_version) {
  return guard([&] {
    WEFT_REQUIRE(out_version, "out_version must not be NULL");
    *out_version = WEFT_ABI_VERSION;
  });
}

WEFT_API int weft_version(const char** out_version, int32_t* out_runtime, int32_t* out_driver) {
  return guard([&] {
    if (out_version) *out_version = WEFT_VERSION_STRING;
    if (out_runtime) {
      int v = 0;
      (void)cudaRuntimeGetVersion(&v);
      *out_runtime = v;
    }
    if (out_driver) {
      int v = 0;
      if (cudaDriverGetVersion(&v) != cudaSuccess) v = 0;
      (void)cudaGetLastError();
      *out_driver = v;
    }
  });
}

WEFT_API int weft_device_count(int32_t* out_count) {
  return guard([&] {
    WEFT_REQUIRE(out_count, "out_count must not be NULL");
    *out_count = device_count();
  });
}

WEFT_API int weft_device_props(int32_t device, WeftDeviceProps* out) {
  return guard([&] {
    WEFT_REQUIRE(out, "out must not be NULL");
    WEFT_REQUIRE(out->size >= sizeof(WeftDeviceProps),
                 "out->size is %u but WeftDeviceProps needs %zu bytes (ABI mismatch)", out->size,
                 sizeof(WeftDeviceProps));
    require_device(device);
    cudaDeviceProp p{};
    WEFT_CUDA(cudaGetDeviceProperties(&p, device));
    std::snprintf(out->name, sizeof out->name, "%s", p.name);
    WEFT_CUDA(cudaDeviceGetPCIBusId(out->pci_bus_id, sizeof out->pci_bus_id, device));
    out->version = 1;
    out->total_memory = p.totalGlobalMem;
    {
      DeviceGuard g(device);
      size_t free_b = 0, total_b = 0;
      WEFT_CUDA(cudaMemGetInfo(&free_b, &total_b));
      out->free_memory = free_b;
    }
    out->sm_count = p.multiProcessorCount;
    out->cc_major = p.major;
    out->cc_minor = p.minor;
    out->l2_bytes = p.l2CacheSize;
    out->smem_per_block_optin = static_cast<int32_t>(p.sharedMemPerBlockOptin);
    int v = 0;
    WEFT_CUDA(cudaDeviceGetAttribute(&v, cudaDevAttrClockRate, device));
    out->clock_khz = v;
    WEFT_CUDA(cudaDeviceGetAttribute(&v, cudaDevAttrMemoryClockRate, device));
    out->memory_clock_khz = v;
    out->memory_bus_width = p.memoryBusWidth;
  });
}

WEFT_API int weft_peer_matrix(int32_t n, int32_t* out) {
  return guard([&] {
    WEFT_REQUIRE(out, "out must not be NULL");
    WEFT_REQUIRE(n == device_count(), "n is %d but this machine has %d GPUs", n, device_count());
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) {
        int can = 0;
        if (i != j) WEFT_CUDA(cudaDeviceCanAccessPeer(&can, i, j));
        out[i * n + j] = can ? 1 + nvlink_count(i, j) : 0;
      }
  });
}

WEFT_API int weft_peer_enable(int32_t device, int32_t peer) {
  return guard([&] { enable_peer_access(device, peer); });
}

WEFT_API int weft_device_synchronize(int32_t device) {
  return guard([&] {
    DeviceGuard g(device);
    WEFT_CUDA(cudaDeviceSynchronize());
  });
}

}  // extern "C"
