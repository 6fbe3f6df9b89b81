// launch.cuh — the one generic launcher: opts the kernel into its shared memory (once per device),
// then launches a persistent grid of exactly `ctas` CTAs with programmatic dependent launch (the
// kernel waits for its predecessor first: primitives/grid_dependency.cuh).
#pragma once

#include <cuda_runtime.h>

#include <atomic>

#include "kernel.cuh"

namespace weft::attn {

template <class Cfg, class Policy>
cudaError_t opt_in() {
  constexpr int kMaxDevices = 64;
  static std::atomic<bool> done[kMaxDevices];
  int device = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e != cudaSuccess) return e;
  if (device < 0 || device >= kMaxDevices) return cudaErrorInvalidDevice;
  if (done[device].load(std::memory_order_relaxed)) return cudaSuccess;
  e = cudaFuncSetAttribute(attention_kernel<Cfg, Policy>, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes);
  if (e == cudaSuccess) done[device].store(true, std::memory_order_relaxed);
  return e;
}

template <class Cfg, class Policy>
cudaError_t resident(int* ctas) {
  cudaError_t e = opt_in<Cfg, Policy>();
  if (e != cudaSuccess) return e;
  int device = 0, per_sm = 0, sms = 0;
  if ((e = cudaGetDevice(&device)) != cudaSuccess) return e;
  e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, attention_kernel<Cfg, Policy>, Cfg::kThreads, Cfg::kSmemBytes);
  if (e != cudaSuccess) return e;
  if ((e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device)) != cudaSuccess) return e;
  *ctas = per_sm * sms;
  return *ctas > 0 ? cudaSuccess : cudaErrorInvalidConfiguration;
}

template <class Cfg, class Policy>
cudaError_t launch(const Params<typename Policy::State>& p, int ctas, cudaStream_t stream) {
  cudaError_t e = opt_in<Cfg, Policy>();
  if (e != cudaSuccess) return e;
  if (ctas <= 0) return cudaErrorInvalidConfiguration;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(ctas));
  cfg.blockDim = dim3(Cfg::kThreads);
  cfg.dynamicSmemBytes = Cfg::kSmemBytes;
  cfg.stream = stream;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, attention_kernel<Cfg, Policy>, p);
}

// The instantiated shapes.
using ConfigD128 = Config<128, 128, 128>;
using ConfigD64 = Config<64, 128, 128>;

}  // namespace weft::attn
