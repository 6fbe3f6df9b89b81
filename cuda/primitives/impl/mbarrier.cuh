// Implementation of mbarrier.cuh. Read the contract there.
#pragma once

#include "../signal.cuh"

namespace weft {

namespace cta {

__device__ __forceinline__ uint32_t smem_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbarrier_init(uint64_t* bar, uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_address(bar)), "r"(arrivals) : "memory");
}

__device__ __forceinline__ void mbarrier_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}

__device__ __forceinline__ void mbarrier_arrive(uint64_t* bar) { mbarrier_arrive(smem_address(bar)); }

__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_address(bar)), "r"(bytes)
               : "memory");
}

__device__ __forceinline__ bool mbarrier_try_wait(uint32_t bar, uint32_t parity) {
  uint32_t done;
  // try_wait suspends the thread for a hardware-chosen interval before giving up, so a loop over it
  // is not a hot spin.
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n"
      "}\n"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
  return done != 0;
}

__device__ __forceinline__ bool mbarrier_try_wait(uint64_t* bar, uint32_t parity) {
  return mbarrier_try_wait(smem_address(bar), parity);
}

__device__ inline bool mbarrier_wait(uint32_t bar, uint32_t parity) {
  if (mbarrier_try_wait(bar, parity)) return true;
  const uint64_t start = sys::globaltimer_ns();
  for (uint32_t polls = 1;; ++polls) {
    if (mbarrier_try_wait(bar, parity)) return true;
    if ((polls & 1023u) == 0 && sys::globaltimer_ns() - start > kMbarrierTimeoutNs) return false;
  }
}

__device__ inline bool mbarrier_wait(uint64_t* bar, uint32_t parity) { return mbarrier_wait(smem_address(bar), parity); }

}  // namespace cta

namespace cluster {

__device__ __forceinline__ void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

__device__ __forceinline__ void mbarrier_arrive(uint64_t* bar, uint32_t cta_rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(cta::smem_address(bar)), "r"(cta_rank));
  // Default semantics (release at CTA scope), not .release.cluster: a cluster-scope release fence
  // costs the issuing thread microseconds per arrive (it measured 2-3x slower GEMMs), and the only
  // ordering needed is that this thread's completed wgmma reads precede the peer's refill, which
  // the arrive itself provides.
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(remote) : "memory");
}

}  // namespace cluster

}  // namespace weft
