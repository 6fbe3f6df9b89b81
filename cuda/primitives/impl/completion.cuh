// Implementation of completion.cuh. Read the contract there.
#pragma once

#include "../signal.cuh"

namespace weft::cta {

__device__ inline void finish(const Completion& c) {
  __syncthreads();
  if (threadIdx.x == 0 && c.done != nullptr) {
    // Make this CTA's stores visible system-wide before counting it as arrived.
    __threadfence_system();
    const uint32_t total = gridDim.x * gridDim.y * gridDim.z;
    if (atomicAdd(c.arrivals, 1u) == total - 1) {
      // Last CTA: every other CTA fenced before its atomicAdd, so all grid stores are visible.
      const uint32_t failed = atomicExch(&c.arrivals[1], 0u);
      c.arrivals[0] = 0;
      __threadfence_system();
      sys::signal_store(c.done, failed ? (c.seq | kFailedBit) : c.seq);
    }
  }
}

__device__ inline void fail(const Completion& c, int32_t code, uint32_t stage) {
  if (c.done == nullptr) return;
  // The first failure's reason wins. finish()'s fence orders this store before the flagged seq.
  if (atomicExch(&c.arrivals[1], 1u) == 0u) c.done[1] = (uint64_t(stage) << 32) | uint32_t(code);
}

}  // namespace weft::cta
