// launch.cuh — the one generic launcher: reads Config, sizes a persistent grid from what fits on
// the device right now (SM count and co-resident clusters, queried at run time and cached per
// device), and launches gemm_kernel<Cfg, Hooks>.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>

#include "kernel.cuh"

namespace weft::gemm {

// How many clusters of this kernel can be resident at once on `device` (cached; first call sets the
// shared-memory opt-in, which is per device).
template <class Cfg, class Hooks>
cudaError_t resident_clusters(int device, int* out) {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> cached[kMaxDevices];  // 0 = not yet known
  if (device < 0 || device >= kMaxDevices) return cudaErrorInvalidDevice;
  if (int c = cached[device].load(std::memory_order_relaxed); c > 0) {
    *out = c;
    return cudaSuccess;
  }
  auto kernel = gemm_kernel<Cfg, Hooks>;
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes);
  if (e != cudaSuccess) return e;
  int clusters = 0;
  if constexpr (Cfg::kClusterSize > 1) {
    cudaLaunchConfig_t cfg{};
    cudaLaunchAttribute attr{};
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = Cfg::kClusterSize;
    attr.val.clusterDim.y = 1;
    attr.val.clusterDim.z = 1;
    cfg.gridDim = dim3(Cfg::kClusterSize);
    cfg.blockDim = dim3(Cfg::kThreads);
    cfg.dynamicSmemBytes = Cfg::kSmemBytes;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    e = cudaOccupancyMaxActiveClusters(&clusters, kernel, &cfg);
    if (e != cudaSuccess) return e;
  } else {
    int per_sm = 0, sms = 0;
    e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, Cfg::kThreads, Cfg::kSmemBytes);
    if (e != cudaSuccess) return e;
    e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    if (e != cudaSuccess) return e;
    clusters = per_sm * sms;
  }
  if (clusters <= 0) return cudaErrorInvalidConfiguration;
  cached[device].store(clusters, std::memory_order_relaxed);
  *out = clusters;
  return cudaSuccess;
}

// The persistent grid, in CTAs: one cluster per unit of work, at most what is co-resident, at most
// max_ctas.
template <class Cfg, class Hooks>
cudaError_t grid_ctas(const Problem& problem, int32_t max_ctas, int* ctas) {
  int device = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e != cudaSuccess) return e;
  int resident = 0;
  e = resident_clusters<Cfg, Hooks>(device, &resident);
  if (e != cudaSuccess) return e;
  const int64_t units_m = (int64_t(problem.m) + Cfg::kTileM * Cfg::kClusterM - 1) / (Cfg::kTileM * Cfg::kClusterM);
  const int64_t units_n = (int64_t(problem.n) + Cfg::kTileN * Cfg::kClusterN - 1) / (Cfg::kTileN * Cfg::kClusterN);
  int64_t clusters = std::min<int64_t>(units_m * units_n, resident);
  clusters = std::min<int64_t>(clusters, std::max<int64_t>(1, max_ctas / Cfg::kClusterSize));
  clusters = std::max<int64_t>(clusters, 1);
  *ctas = static_cast<int>(clusters * Cfg::kClusterSize);
  return cudaSuccess;
}

// Every persistent kernel of ours is launched with this attribute: it may start while the previous
// kernel on the stream finishes (primitives/grid_dependency.cuh; the kernels wait for it first).
inline cudaLaunchAttribute programmatic_launch() {
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  return attr;
}

template <class Cfg, class Hooks>
cudaError_t launch(const KernelParams<typename Hooks::State>& p, int32_t max_ctas, cudaStream_t stream) {
  int ctas = 0;
  cudaError_t e = grid_ctas<Cfg, Hooks>(p.problem, max_ctas, &ctas);
  if (e != cudaSuccess) return e;

  cudaLaunchConfig_t cfg{};
  cudaLaunchAttribute attrs[2] = {programmatic_launch(), {}};
  attrs[1].id = cudaLaunchAttributeClusterDimension;
  attrs[1].val.clusterDim.x = Cfg::kClusterSize;
  attrs[1].val.clusterDim.y = 1;
  attrs[1].val.clusterDim.z = 1;
  cfg.gridDim = dim3(static_cast<unsigned>(ctas));
  cfg.blockDim = dim3(Cfg::kThreads);
  cfg.dynamicSmemBytes = Cfg::kSmemBytes;
  cfg.stream = stream;
  cfg.attrs = attrs;
  cfg.numAttrs = Cfg::kClusterSize > 1 ? 2 : 1;
  return cudaLaunchKernelEx(&cfg, gemm_kernel<Cfg, Hooks>, p);
}

}  // namespace weft::gemm
