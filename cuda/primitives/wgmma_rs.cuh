// wgmma_rs.cuh — Hopper warpgroup matrix multiply with the A operand in registers ("RS": A from
// registers, B from shared memory), bf16 x bf16 -> fp32. The companion of wgmma.cuh (both operands
// in shared memory); descriptors, fences and groups are wgmma.cuh's.
//
// Contract:
//   - wg::mma_async_rs<N, BNMajor>(acc, a, b) computes acc += A(64x16) * B(16xN) for one k16 step,
//     as a warpgroup operation (all 128 threads, the same descriptor). acc is the D fragment of
//     wgmma.cuh; `a` is this thread's A fragment of the k16 step: four 32-bit registers, each two
//     bf16 (low half = the lower column), laid out as wgmma_fragment.cuh describes.
//   - B as in wgmma.cuh: K-major (BNMajor = false) or N-major (BNMajor = true, the transpose bit).
//   - The A registers are read asynchronously, until the wgmma group that holds the instruction
//     completes (wg::wait). The compiler does not know that: after the wait, pass every A register
//     through wg::fence_operand(uint32_t&) before it is written again, so that its value (and so its
//     register) stays live until then. Likewise accumulators (wg::fence_operand(float&)).
#pragma once

#include <cstdint>

#include "wgmma.cuh"

namespace weft::wg {

template <int N, bool BNMajor>
__device__ __forceinline__ void mma_async_rs(float (&acc)[N / 2], const uint32_t (&a)[4], uint64_t b_desc);

__device__ __forceinline__ void fence_operand(uint32_t& x);

}  // namespace weft::wg

#include "impl/wgmma_rs.cuh"
