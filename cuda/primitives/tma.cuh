// tma.cuh — the Tensor Memory Accelerator: 2-D (and 3-D) tile copies between global memory and shared memory,
// described by a CUtensorMap that the host encodes (weft::driver::tensorMapEncodeTiled).
//
// Contract:
//   - Tensor maps are kernel parameters declared `const __grid_constant__`, so their address is a
//     param-space address the copy engine can read. A map may describe peer memory (a pointer from a
//     peer mapping); every copy below then reads or writes that GPU over NVLink.
//   - Coordinates are element indices, innermost dimension first. Boxes that reach past the tensor's
//     bounds are zero-filled on load and clipped on store, so tails need no special code.
//   - Loads complete on an mbarrier in the destination CTA (complete_tx of the box's full byte size,
//     out-of-bounds bytes included). cta::load_2d fills this CTA's shared memory. cluster::
//     load_2d_multicast writes the same box to the same shared-memory offset in every CTA of
//     `cta_mask` and signals each CTA's barrier at the barrier's offset.
//   - Stores and reductions read shared memory asynchronously: the writing threads must order their
//     ordinary shared stores before the copy with cta::fence_proxy_async_shared() and a barrier, and
//     the buffer may be rewritten only after cta::bulk_wait_read<N>() has let the copy finish reading.
//     cta::bulk_wait<N>() waits until the writes themselves are done (issue them from one thread;
//     both wait on that thread's committed groups).
//   - cta::reduce_add_2d adds the box element-wise into global memory (cp.reduce.async.bulk.tensor,
//     the tensor map's dtype: bf16 or f32), atomically per element with respect to other reductions.
#pragma once

#include <cuda.h>

#include <cstdint>

namespace weft {

namespace cta {
__device__ __forceinline__ void prefetch_tensor_map(const CUtensorMap* map);
__device__ __forceinline__ void load_2d(void* smem_dst, const CUtensorMap* map, uint64_t* bar, int32_t c0,
                                        int32_t c1);
// A 3-D map's box at (c0, c1, c2), e.g. one group's [N, K] slice of grouped weights [G, N, K] (c2 = g).
__device__ __forceinline__ void load_3d(void* smem_dst, const CUtensorMap* map, uint64_t* bar, int32_t c0,
                                        int32_t c1, int32_t c2);
__device__ __forceinline__ void store_2d(const CUtensorMap* map, const void* smem_src, int32_t c0, int32_t c1);
__device__ __forceinline__ void reduce_add_2d(const CUtensorMap* map, const void* smem_src, int32_t c0,
                                              int32_t c1);
// Pulls a box of global memory into L2 ahead of a later read (no shared memory, no completion).
__device__ __forceinline__ void prefetch_l2_2d(const CUtensorMap* map, int32_t c0, int32_t c1);
__device__ __forceinline__ void bulk_commit();
template <int Pending>
__device__ __forceinline__ void bulk_wait_read();
template <int Pending>
__device__ __forceinline__ void bulk_wait();
// Ordinary shared-memory stores -> later reads by the async proxy (TMA store, wgmma).
__device__ __forceinline__ void fence_proxy_async_shared();
// Completed async-proxy writes to global -> later generic-proxy accesses (flags, host reads).
__device__ __forceinline__ void fence_proxy_async_global();
}  // namespace cta

namespace cluster {
__device__ __forceinline__ void load_2d_multicast(void* smem_dst, const CUtensorMap* map, uint64_t* bar,
                                                  int32_t c0, int32_t c1, uint16_t cta_mask);
}  // namespace cluster

}  // namespace weft

#include "impl/tma.cuh"
