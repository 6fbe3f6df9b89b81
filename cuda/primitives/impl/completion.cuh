// Implementation of completion.cuh. Read the contract there.
#pragma once

#include "../signal.cuh"

namespace weft::cta {

__device__ inline void finish(const Completion& c) {
  __syncthreads();
  if (threadIdx.x == 0 && c.done != nullptr) {
    // The arrival releases this CTA's stores (every thread's, ordered by the barrier above) at GPU
    // scope and acquires those of the CTAs that arrived before; the last CTA then publishes with
    // one st.release.sys, which is cumulative: everything it acquired becomes visible to the system
    // before `done`. One system-scope fence per grid instead of one per CTA and a second in the
    // last: 1.2 us less at the end of every kernel (bench/repro/finish-cost.cu;
    // bench/DECISIONS.md, "The last CTA publishes with one st.release.sys after GPU-scope arrivals").
    const uint32_t total = gridDim.x * gridDim.y * gridDim.z;
    uint32_t arrived;
    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(arrived) : "l"(c.arrivals) : "memory");
    if (arrived == total - 1) {
      const uint32_t failed = atomicExch(&c.arrivals[1], 0u);
      c.arrivals[0] = 0;
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
