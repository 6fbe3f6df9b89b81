// Implementation of wgmma.cuh. Read the contract there.
#pragma once

#include "wgmma_mma.inc"

namespace weft::wg {

__device__ __forceinline__ uint64_t smem_desc_sw128(uint32_t addr, uint32_t lbo_bytes, uint32_t sbo_bytes) {
  // Fields are byte quantities >> 4 in 14 bits: start [0,14), LBO [16,30), SBO [32,46); base offset
  // [49,52) is 0 because tiles start on 1024-byte boundaries; [62,64) = 1 selects 128-byte swizzle.
  return uint64_t((addr & 0x3FFFF) >> 4) | (uint64_t((lbo_bytes & 0x3FFFF) >> 4) << 16) |
         (uint64_t((sbo_bytes & 0x3FFFF) >> 4) << 32) | (1ull << 62);
}

__device__ __forceinline__ uint64_t smem_desc_sw128(const void* smem, uint32_t lbo_bytes, uint32_t sbo_bytes) {
  return smem_desc_sw128(static_cast<uint32_t>(__cvta_generic_to_shared(smem)), lbo_bytes, sbo_bytes);
}

__device__ __forceinline__ uint64_t desc_advance(uint64_t desc, uint32_t bytes) {
  // Shared addresses stay below 256 KiB, so the 14-bit start field never carries into LBO.
  return desc + (bytes >> 4);
}

__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }

template <int Pending>
__device__ __forceinline__ void wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(Pending) : "memory");
}

__device__ __forceinline__ void fence_operand(float& x) { asm volatile("" : "+f"(x)::"memory"); }

template <int N, bool BNMajor>
__device__ __forceinline__ void mma_async(float (&acc)[N / 2], uint64_t a_desc, uint64_t b_desc) {
  // 64 x N fp32 outputs over the 128 threads of the warpgroup: N/2 per thread.
  static_assert((N / 2) * kThreads == 64 * N, "accumulator fragment must cover the 64xN tile");
  static_assert(N == 64 || N == 128 || N == 160 || N == 192 || N == 256,
                "wg::mma_async is instantiated for N = 64, 128, 160, 192, 256");
  wgmma_ss<BNMajor>(acc, a_desc, b_desc);  // the m64nNk16 overload: its accumulator holds N/2 floats
}

}  // namespace weft::wg
