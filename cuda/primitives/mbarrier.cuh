// mbarrier.cuh — shared-memory transaction barriers (PTX mbarrier) for producer/consumer rings.
//
// Contract:
//   - A barrier is one 8-byte-aligned uint64_t in shared memory, initialised once by one thread with
//     cta::mbarrier_init(bar, arrivals), followed by cluster::fence_mbarrier_init() and a CTA (or
//     cluster) barrier before any other thread or CTA touches it.
//   - A phase completes when `arrivals` arrivals have been made AND every byte announced with
//     arrive_expect_tx has landed (TMA loads signal bytes with complete_tx). Phases alternate parity
//     0, 1, 0, ...; a waiter tracks the parity it expects and flips it each time its ring wraps.
//     Waiting for parity p on a fresh barrier blocks for p = 0 and passes at once for p = 1, so a
//     producer that waits on "slot free" with the flipped parity passes its first lap unblocked.
//   - Every wait is bounded: cta::mbarrier_wait() returns false after kMbarrierTimeoutNs (measured
//     with %globaltimer), and the caller reports the failure and carries on, so the grid drains.
//   - cluster::mbarrier_arrive(bar, rank) arrives on the barrier at the same shared-memory offset in
//     CTA `rank` of the cluster. It orders this thread's prior accesses like a CTA-scope release: use
//     it to hand back ring slots whose reads (wgmma) have completed, not to publish data to the peer.
#pragma once

#include <cstdint>

namespace weft {

// Longer than any hook's signal wait (signal.cuh, 10 s by default), so a producer parked in a hook
// times out and reports before its consumers do.
constexpr uint64_t kMbarrierTimeoutNs = 30ull * 1000 * 1000 * 1000;

namespace cta {
__device__ __forceinline__ uint32_t smem_address(const void* p);
__device__ __forceinline__ void mbarrier_init(uint64_t* bar, uint32_t arrivals);
__device__ __forceinline__ void mbarrier_arrive(uint64_t* bar);
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t bytes);
__device__ __forceinline__ bool mbarrier_try_wait(uint64_t* bar, uint32_t parity);
__device__ inline bool mbarrier_wait(uint64_t* bar, uint32_t parity);
// The same on a barrier's shared-window address (smem_address(bar)), for loops that form it once.
__device__ __forceinline__ void mbarrier_arrive(uint32_t bar);
__device__ __forceinline__ bool mbarrier_try_wait(uint32_t bar, uint32_t parity);
__device__ inline bool mbarrier_wait(uint32_t bar, uint32_t parity);
}  // namespace cta

namespace cluster {
__device__ __forceinline__ void fence_mbarrier_init();
__device__ __forceinline__ void mbarrier_arrive(uint64_t* bar, uint32_t cta_rank);
}  // namespace cluster

// Stage index and parity of a ring of `Stages` slots, advanced once per slot.
template <int Stages>
struct RingPosition {
  uint32_t stage = 0;
  uint32_t parity = 0;
  __device__ __forceinline__ void advance() {
    if (++stage == Stages) {
      stage = 0;
      parity ^= 1u;
    }
  }
};

}  // namespace weft

#include "impl/mbarrier.cuh"
