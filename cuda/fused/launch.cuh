// launch.cuh — the one generic launcher of the fused kernels: a persistent grid of exactly `ctas`
// CTAs (the cost model sized it to at most one per SM, and every CTA must be resident at once,
// because CTAs of one rank wait for CTAs of another), with the engine Config's shared memory.
#pragma once

#include <cuda_runtime.h>

#include <atomic>

#include "gemm/params.cuh"

namespace weft::fused {

// ctas == 0: only set the opt-in, which also loads the kernel's module (plans do it at creation).
// Kernel is the __global__ function itself (a template argument, so that the opt-in flag below is
// per kernel: two kernels with the same Config need one opt-in each).
template <class Cfg, auto Kernel, class State>
cudaError_t launch_persistent(const gemm::KernelParams<State>& p, int ctas, cudaStream_t stream) {
  constexpr int kMaxDevices = 64;
  // The shared-memory opt-in is per device and per kernel: set it once.
  static std::atomic<bool> opted_in[kMaxDevices];
  int device = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e != cudaSuccess) return e;
  if (device < 0 || device >= kMaxDevices) return cudaErrorInvalidDevice;
  if (!opted_in[device].load(std::memory_order_relaxed)) {
    e = cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes);
    if (e != cudaSuccess) return e;
    opted_in[device].store(true, std::memory_order_relaxed);
  }
  if (ctas == 0) return cudaSuccess;  // opt-in only: loads the kernel (see preload() in ffi/src/tp/plan.cpp)
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(ctas));
  cfg.blockDim = dim3(Cfg::kThreads);
  cfg.dynamicSmemBytes = Cfg::kSmemBytes;
  cfg.stream = stream;
  return cudaLaunchKernelEx(&cfg, Kernel, p);
}

}  // namespace weft::fused
