// named_barrier.cuh — the arrive half of a named barrier (bar.arrive), for handing a token between
// warpgroups: one group arrives without waiting, another waits at the same barrier (wg::sync_groups
// of warpgroup.cuh, with the same thread count).
//
// Contract:
//   - wg::arrive_groups<G>(id): every thread of the calling warpgroup arrives at barrier `id` whose
//     phase completes after G * 128 threads arrived (arrivals and syncs together); it does not wait.
//     Use ids the caller owns (see warpgroup.cuh: 1..15, never 0).
//   - A token ring of warpgroups: warpgroup i waits with sync_groups<2>(base + i) and, after its
//     turn, passes the token with arrive_groups<2>(base + (i + 1) % n); the first holder arrives at
//     its own barrier once at the start. Each barrier then sees exactly one arriving and one
//     waiting warpgroup per phase, in turn order.
#pragma once

#include <cstdint>

#include "warpgroup.cuh"

namespace weft::wg {

template <int Groups>
__device__ __forceinline__ void arrive_groups(uint32_t barrier_id) {
  asm volatile("bar.arrive %0, %1;" ::"r"(barrier_id), "n"(Groups * kThreads) : "memory");
}

}  // namespace weft::wg
