// warpgroup.cuh — the warpgroup scope: four consecutive warps starting at a warp index divisible by
// four, the unit that issues wgmma and that setmaxnreg re-budgets.
//
// Contract:
//   - wg::index() / wg::thread() split threadIdx.x into (warpgroup, thread within it).
//   - wg::release_registers<N>() lowers this warpgroup's register budget to N per thread, and
//     wg::claim_registers<N>() raises it to N (blocking until other warpgroups have released enough);
//     N is a multiple of 8 in [24, 256] and every thread of the warpgroup must execute the call. It takes effect only in a
//     kernel with a register cap at entry (__launch_bounds__(threads, 1)), where each warpgroup role
//     is one branch of a single if/else (ptxas says C7508 when it ignores one).
//   - wg::sync(id) is a named barrier over the 128 threads of one warpgroup. Ids 1..15 are free for
//     callers (0 is __syncthreads); two warpgroups syncing independently must use different ids.
//   - wg::sync_groups<G>(id) is the same over G warpgroups (e.g. a CTA's consumers together): every
//     thread of those G warpgroups must reach it, with an id no single warpgroup uses.
#pragma once

#include <cstdint>

namespace weft::wg {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;

__device__ __forceinline__ int index() { return static_cast<int>(threadIdx.x) / kThreads; }
__device__ __forceinline__ int thread() { return static_cast<int>(threadIdx.x) % kThreads; }

template <int Registers>
__device__ __forceinline__ void release_registers();
template <int Registers>
__device__ __forceinline__ void claim_registers();

__device__ __forceinline__ void sync(uint32_t barrier_id);
template <int Groups>
__device__ __forceinline__ void sync_groups(uint32_t barrier_id);
// wg::sync that also returns whether `value` holds in every thread of the warpgroup.
__device__ __forceinline__ bool all(bool value, uint32_t barrier_id);

}  // namespace weft::wg

#include "impl/warpgroup.cuh"
