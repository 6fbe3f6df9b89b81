// launch.cuh — the one generic launcher: opts the kernel into its shared memory (once per device),
// then launches a persistent grid of exactly `ctas` CTAs with programmatic dependent launch (the
// kernel waits for its predecessor first: primitives/grid_dependency.cuh).
#pragma once

#include <cuda_runtime.h>

#include "../primitives/persistent_launch.cuh"
#include "attention.h"
#include "kernel.cuh"

namespace weft::attn {

template <class Cfg, class Policy>
cudaError_t opt_in() {
  return opt_in_shared_memory<attention_kernel<Cfg, Policy>>(Cfg::kSmemBytes);
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
  return launch_persistent_grid<attention_kernel<Cfg, Policy>>(p, ctas, Cfg::kThreads, Cfg::kSmemBytes, stream);
}

// A config's shape as the host side sees it (attention.h).
template <class Cfg>
TileShape shape_of() {
  return {Cfg::kBlockM, Cfg::kBlockN, Cfg::kStages, Cfg::kThreads, Cfg::kSmemBytes};
}

// The instantiated shapes (bench/DECISIONS.md, "Attention tiles are 128 x 128 at D 128 and 128 x 192
// at D 64", and "Attention at D 128 takes 160 keys per block"). More keys per block than 128 means
// fewer blocks and fewer per-block fixed costs (barrier waits, row maxima, rescales). At D 128 both
// kernels take 160 (K and V rings of 2 x 40 KiB leave 226 of the 227 KiB; a key block need not
// align with the ring's 128-token chunks: KvWalk masks a segment's last block). At D 64 the one-GPU
// kernel takes 192, its consumers at 224 registers and its producer at the 56 they leave with no
// spills (config.cuh); the ring kernel at D 64 keeps 128 x 128 (192 there is not measured).
using ConfigD128 = Config<128, 128, 160>;
using ConfigD64 = Config<64, 128, 192, 224>;
using RingConfigD64 = Config<64, 128, 128>;

}  // namespace weft::attn
