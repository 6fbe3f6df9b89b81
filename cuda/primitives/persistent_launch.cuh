// persistent_launch.cuh — host side: how every persistent kernel of ours is launched (the fused TP
// kernels, MoE's, attention's): the kernel opted into its dynamic shared memory once per device, then
// a grid of exactly `ctas` CTAs with programmatic dependent launch (the kernel may start while its
// predecessor on the stream finishes, and waits for it first: grid_dependency.cuh).
#pragma once

#include <cuda_runtime.h>

#include <atomic>

namespace weft {

// The opt-in is per device and per kernel (Kernel is the __global__ function itself, a template
// argument, so that two kernels with the same shared memory get one flag each); it also loads the
// kernel's module, which plans do at creation.
template <auto Kernel>
cudaError_t opt_in_shared_memory(int bytes) {
  constexpr int kMaxDevices = 64;
  static std::atomic<bool> opted_in[kMaxDevices];
  int device = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e != cudaSuccess) return e;
  if (device < 0 || device >= kMaxDevices) return cudaErrorInvalidDevice;
  if (opted_in[device].load(std::memory_order_relaxed)) return cudaSuccess;
  e = cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (e == cudaSuccess) opted_in[device].store(true, std::memory_order_relaxed);
  return e;
}

// Launches Kernel(p) on `ctas` CTAs of `threads` threads and `smem_bytes` of dynamic shared memory
// (already opted into), as a programmatic dependent launch.
template <auto Kernel, class Params>
cudaError_t launch_persistent_grid(const Params& p, int ctas, int threads, int smem_bytes, cudaStream_t stream) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(ctas));
  cfg.blockDim = dim3(static_cast<unsigned>(threads));
  cfg.dynamicSmemBytes = static_cast<size_t>(smem_bytes);
  cfg.stream = stream;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, Kernel, p);
}

}  // namespace weft
