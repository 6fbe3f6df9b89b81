// Implementation of wgmma_rs.cuh. Read the contract there.
#pragma once

#include "wgmma_rs.inc"

namespace weft::wg {

__device__ __forceinline__ void fence_operand(uint32_t& x) { asm volatile("" : "+r"(x)::"memory"); }

template <int N, bool BNMajor>
__device__ __forceinline__ void mma_async_rs(float (&acc)[N / 2], const uint32_t (&a)[4], uint64_t b_desc) {
  static_assert((N / 2) * kThreads == 64 * N, "accumulator fragment must cover the 64xN tile");
  if constexpr (N == 256) {
    mma_async_rs_n256<BNMajor>(acc, a, b_desc);
  } else if constexpr (N == 128) {
    mma_async_rs_n128<BNMajor>(acc, a, b_desc);
  } else {
    static_assert(N == 64, "wg::mma_async_rs is instantiated for N = 64, 128, 256");
    mma_async_rs_n64<BNMajor>(acc, a, b_desc);
  }
}

}  // namespace weft::wg
