// Implementation of wgmma_rs.cuh. Read the contract there.
#pragma once

#include "wgmma_rs.inc"

namespace weft::wg {

__device__ __forceinline__ void fence_operand(uint32_t& x) { asm volatile("" : "+r"(x)::"memory"); }

template <int N, bool BNMajor>
__device__ __forceinline__ void mma_async_rs(float (&acc)[N / 2], const uint32_t (&a)[4], uint64_t b_desc) {
  static_assert((N / 2) * kThreads == 64 * N, "accumulator fragment must cover the 64xN tile");
  static_assert(N == 64 || N == 128 || N == 256, "wg::mma_async_rs is instantiated for N = 64, 128, 256");
  wgmma_rs<BNMajor>(acc, a, b_desc);  // the m64nNk16 overload: its accumulator holds N/2 floats
}

}  // namespace weft::wg
