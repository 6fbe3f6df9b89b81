// epilogue.cuh — one consumer warpgroup's 64 rows of a finished tile: O / l rounded to bf16 and
// stored, lse = ln Σ exp(s·scale) written per row.
//
// O goes through shared memory: kBoxes boxes of 64 rows x 128 bytes, 128-byte swizzled (16-byte
// chunk c of row r at chunk c ^ (r % 8), which also spreads a warp's stores over all banks), then
// out by one TMA store per box. TMA clips a box only at the tensor's last row, so a tile whose
// queries end inside this consumer's 64 rows (a sequence's last tile in a packed batch or in a bshd
// batch) is copied out instead, row by row, 16 bytes per thread, up to its last valid query. The
// staging buffer is rewritten only after the leader's previous store has read it (bulk_wait_read).
#pragma once

#include <cmath>

#include "../primitives/fast_math.cuh"
#include "../primitives/tma.cuh"
#include "../primitives/warpgroup.cuh"
#include "../primitives/wgmma_fragment.cuh"
#include "config.cuh"
#include "params.cuh"
#include "softmax.cuh"

namespace weft::attn {

template <class Cfg, class State>
__device__ __forceinline__ void store_tile(const float (&o)[Cfg::kHeadDim / 2], const OnlineSoftmax<Cfg>& sm,
                                           const Params<State>& p, const SharedStorage<Cfg>& s, const QTile& t,
                                           int consumer) {
  const int th = wg::thread();
  const int r0 = (th / 32) * 16 + (th % 32) / 4;  // this thread's rows r0 and r0 + 8 of the 64
  const int32_t first = consumer * 64;            // the consumer's first row within the tile
  const int32_t rows = min(64, t.rows - first);   // valid rows of the 64 (uniform over the group)
  float inv[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float sum = wg::quad_sum(sm.l[h]);
    inv[h] = sum > 0.0f ? 1.0f / sum : 0.0f;
    if (p.problem.lse != nullptr && th % 4 == 0 && r0 + 8 * h < rows) {
      // m is the running max of s·scale·log2(e): ln Σ e^(s·scale) = (m + log2 Σ 2^(s·c − m)) · ln 2.
      const float lse = sum > 0.0f ? (sm.m[h] + fast::log2(sum)) * 0.6931471805599453f : -INFINITY;
      p.problem.lse[t.lse + first + r0 + 8 * h] = lse;
    }
  }
  if (rows <= 0) return;

  const uint32_t barrier = Cfg::kConsumerBarrier + consumer;
  if (th == 0) cta::bulk_wait_read<0>();  // the previous tile's stores have read the staging boxes
  wg::sync(barrier);
  const int swz = r0 % 8;  // (r0 + 8) % 8 is the same
  const int pair = th % 4;
#pragma unroll
  for (int box = 0; box < Cfg::kBoxes; ++box) {
    uint8_t* buf = s.o(consumer, box);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int n8 = box * 8 + j;
      const int offset = ((j ^ swz) * 16) + pair * 4;
      *reinterpret_cast<uint32_t*>(buf + r0 * 128 + offset) = wg::pack_bf16x2(o[4 * n8] * inv[0], o[4 * n8 + 1] * inv[0]);
      *reinterpret_cast<uint32_t*>(buf + (r0 + 8) * 128 + offset) =
          wg::pack_bf16x2(o[4 * n8 + 2] * inv[1], o[4 * n8 + 3] * inv[1]);
    }
  }
  cta::fence_proxy_async_shared();
  wg::sync(barrier);
  const int32_t col0 = t.h * Cfg::kHeadDim;
  if (rows == 64) {
    if (th == 0) {
#pragma unroll
      for (int box = 0; box < Cfg::kBoxes; ++box) cta::store_2d(&p.o, s.o(consumer, box), col0 + 64 * box, t.row + first);
      cta::bulk_commit();
    }
    return;
  }
  // Partial: rows [0, rows) of the 64, D / 8 chunks of 16 bytes each.
  constexpr int kChunks = Cfg::kHeadDim / 8;
  uint8_t* out = static_cast<uint8_t*>(p.problem.o);
  for (int i = th; i < rows * kChunks; i += wg::kThreads) {
    const int r = i / kChunks, c = i % kChunks;
    const uint4 v = *reinterpret_cast<const uint4*>(s.o(consumer, c / 8) + r * 128 + (((c % 8) ^ (r % 8)) * 16));
    const int64_t element = int64_t(t.row + first + r) * p.problem.o_row_stride + col0 + c * 8;
    *reinterpret_cast<uint4*>(out + element * 2) = v;
  }
}

}  // namespace weft::attn
