// gather.cuh — what the gathering ladder programs (02, 07) share: the copy kernel that builds A from
// A_src by index (gather-then-GEMM's first half), and the A source that gathers a tile's rows with
// 1-row TMA boxes from the producer's whole warp 0 (02's version 2).
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>

#include <cstdint>

#include "gemm/hooks.cuh"
#include "primitives/tma.cuh"

namespace ladder {

// dst[r, :] = src[index[r], :] for r < m, one CTA per row at a time, 16 bytes per thread per step.
__global__ void gather_rows(const __nv_bfloat16* src, const int32_t* index, __nv_bfloat16* dst, int m, int k) {
  for (int r = blockIdx.x; r < m; r += gridDim.x) {
    const uint4* from = reinterpret_cast<const uint4*>(src + int64_t(index[r]) * k);
    uint4* to = reinterpret_cast<uint4*>(dst + int64_t(r) * k);
    for (int i = threadIdx.x; i < k / 8; i += blockDim.x) to[i] = from[i];
  }
}

// Lane l of the producer's warp 0 loads rows l, l + 32, l + 64, l + 96 of the tile as 1-row boxes
// of P::hooks.rows (A_src [R, K], box {64, 1}) at index[row]; TMA applies the 128-byte swizzle by
// destination address, so the stage ends up as one 128-row box would leave it. The source rows are
// read once per tile (rows past hooks.m repeat the last row: their results are never stored).
template <class C>
struct TmaRowGather {
  static constexpr int kLanes = 32;
  const CUtensorMap* map;
  int32_t source[C::kTileM / 32];

  template <class P>
  __device__ __forceinline__ TmaRowGather(const P& p, const weft::gemm::TileCoord& t) : map(&p.hooks.rows) {
    const int lane = int(threadIdx.x % 32);
#pragma unroll
    for (int j = 0; j < C::kTileM / 32; ++j) source[j] = p.hooks.index[min(t.m0 + lane + 32 * j, p.hooks.m - 1)];
  }
  template <class P>
  static __device__ __forceinline__ uint32_t stage_bytes(const P&) { return uint32_t(C::kABytes); }
  __device__ __forceinline__ void load(uint8_t* dst, uint64_t* full, int32_t k0, uint32_t, int lane) const {
#pragma unroll
    for (int j = 0; j < C::kTileM / 32; ++j) weft::cta::load_2d(dst + (lane + 32 * j) * 128, map, full, k0, source[j]);
  }
};

}  // namespace ladder
