// wgmma.cuh — Hopper warpgroup matrix multiply (wgmma.mma_async), bf16 x bf16 -> fp32, with both
// operands in shared memory, described by 64-bit matrix descriptors.
//
// Contract:
//   - Every function here is a warpgroup operation: all 128 threads of one warpgroup (warpgroup.cuh)
//     call it together, with the same descriptors.
//   - wg::mma_async<N, BNMajor>(acc, a, b) computes acc += A(64x16) * B(16xN) for one k16 step. acc is this thread's N/2 fp32 accumulators in the wgmma D-fragment layout: for
//     n8 = 0..N/8-1, acc[4*n8 + 2*h + j] holds row 16*warp + lane/4 + 8*h, column 8*n8 + 2*(lane%4) + j
//     of the 64xN tile. (Zero acc with ordinary stores before the batch's wg::fence(); a run-time
//     scale-d predicate instead makes ptxas serialize the wgmma pipeline, warning C7514.)
//   - A is K-major (rows of K contiguous). B is K-major (BNMajor = false: B stored [N][K]) or N-major
//     (BNMajor = true: B stored [K][N], the transpose bit of 16-bit wgmma).
//   - Descriptors: wg::smem_desc_sw128(ptr, lbo, sbo) for tiles written by TMA with 128-byte swizzle
//     into 1024-byte-aligned shared memory.
//       K-major tile (rows of 64 bf16 = 128 B): lbo unused (pass 0), sbo = 1024 (8 rows); one k16
//       step is +32 B of start address.
//       N-major tile made of boxes of 64 N x 64 K (8 KiB each): lbo = 8192 (next 64 N), sbo = 1024
//       (next 8 K rows); one k16 step is +2048 B.
//     wg::desc_advance(desc, bytes) moves the start address.
//   - Ordering: wg::fence() before the first mma_async of a batch (orders earlier register and
//     shared-memory writes before the tensor cores read them); wg::commit() closes a batch into a
//     group; wg::wait<N>() blocks until at most N groups are pending, after which their shared-memory
//     operands may be overwritten and their accumulators read. wg::fence_operand(x) keeps the compiler
//     from moving accesses to an accumulator across these points.
#pragma once

#include <cstdint>

#include "warpgroup.cuh"

namespace weft::wg {

__device__ __forceinline__ uint64_t smem_desc_sw128(const void* smem, uint32_t lbo_bytes, uint32_t sbo_bytes);
__device__ __forceinline__ uint64_t smem_desc_sw128(uint32_t smem_address, uint32_t lbo_bytes, uint32_t sbo_bytes);
__device__ __forceinline__ uint64_t desc_advance(uint64_t desc, uint32_t bytes);

__device__ __forceinline__ void fence();
__device__ __forceinline__ void commit();
template <int Pending>
__device__ __forceinline__ void wait();
__device__ __forceinline__ void fence_operand(float& x);

template <int N, bool BNMajor>
__device__ __forceinline__ void mma_async(float (&acc)[N / 2], uint64_t a_desc, uint64_t b_desc);

}  // namespace weft::wg

#include "impl/wgmma.cuh"
