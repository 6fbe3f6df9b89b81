// device_guard.hpp — makes `device` current for a scope and restores the caller's device after,
// so that a process driving several local ranks never leaks one rank's device into another's call.
#pragma once

#include <cuda_runtime_api.h>

#include "status.hpp"

namespace weft {

int device_count();                  // 0 without driver or GPU
void require_device(int32_t device); // WEFT_E_NO_DEVICE naming the index and the count

class DeviceGuard {
 public:
  explicit DeviceGuard(int32_t device) {
    require_device(device);
    WEFT_CUDA(cudaGetDevice(&previous_));
    if (previous_ != device) WEFT_CUDA(cudaSetDevice(device));
  }
  ~DeviceGuard() {
    int now = -1;
    if (cudaGetDevice(&now) == cudaSuccess && now != previous_) (void)cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
};

// The device that owns a pointer (device memory), or -1 for host memory.
int pointer_device(const void* ptr);

}  // namespace weft
