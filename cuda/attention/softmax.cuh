// softmax.cuh — the online softmax of one consumer warpgroup's 64 query rows, on the S
// accumulators in registers (wgmma_fragment.cuh: each thread holds two rows, g and g + 8 of its
// warp's 16, and BlockN / 4 columns of each; a quad holds a row).
//
// Per key block: mask (only blocks KvWalk marked: keys past their segment, or causally invisible),
// row max (thread-local over BlockN / 4 values, then two shuffles), then p = 2^(s·c − m) with
// c = scale·log2(e) folded into one FFMA before the MUFU ex2, and the running sums. The sums stay
// per thread (each thread's share of its rows) until the epilogue adds the quad together.
//
// State per row: m (running max of s·c, so the exponent is one FFMA), l (partial sum), rescale =
// 2^(m_old − m_new), by which the caller multiplies O before adding this block's P·V. A row that has
// seen only masked keys keeps m = −inf; its exponents use 0 instead, so every p and every rescale is
// 0, never NaN (−inf − −inf).
#pragma once

#include <cmath>

#include "../primitives/fast_math.cuh"
#include "../primitives/wgmma_fragment.cuh"
#include "params.cuh"

namespace weft::attn {

template <class Cfg>
struct OnlineSoftmax {
  static constexpr int kN = Cfg::kBlockN;
  float m[2];
  float l[2];
  float rescale[2];

  __device__ __forceinline__ void reset() {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      m[h] = -INFINITY;
      l[h] = 0.0f;
      rescale[h] = 1.0f;
    }
  }

  // row_pos: causal position of this thread's first row (query i of the tile: QTile::pos + i); its
  // second row is 8 further.
  __device__ __forceinline__ void step(float (&s)[kN / 2], const KvBlock& b, int32_t row_pos, bool causal,
                                       float scale_log2) {
    if (b.masked) {  // uniform over the warpgroup
      // Column c of the block is visible to row h when c < limit[h]; this thread's columns are
      // 8 n8 + 2 (lane % 4) + j, so compare 8 n8 + j with limit[h] - 2 (lane % 4).
      const int32_t col0 = 2 * (wg::thread() % 4);
      int32_t limit[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        limit[h] = (causal ? min(b.valid, row_pos + 8 * h - b.pos + 1) : b.valid) - col0;
      }
#pragma unroll
      for (int n8 = 0; n8 < kN / 8; ++n8) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
#pragma unroll
          for (int j = 0; j < 2; ++j) {
            float& x = s[4 * n8 + 2 * h + j];
            x = 8 * n8 + j < limit[h] ? x : -INFINITY;
          }
        }
      }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float mx = s[2 * h];
#pragma unroll
      for (int n8 = 0; n8 < kN / 8; ++n8) {
        mx = fmaxf(mx, fmaxf(s[4 * n8 + 2 * h], s[4 * n8 + 2 * h + 1]));
      }
      mx = wg::quad_max(mx);
      const float m_new = fmaxf(m[h], mx * scale_log2);
      const float m_use = m_new == -INFINITY ? 0.0f : m_new;
      rescale[h] = fast::exp2(m[h] - m_use);
      m[h] = m_new;
      float sum = 0.0f;
#pragma unroll
      for (int n8 = 0; n8 < kN / 8; ++n8) {
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          float& x = s[4 * n8 + 2 * h + j];
          x = fast::exp2(fmaf(x, scale_log2, -m_use));
          sum += x;
        }
      }
      l[h] = l[h] * rescale[h] + sum;
    }
  }

  // O's rows scaled by rescale (O is a D fragment m64nD: same rows as S).
  template <int D>
  __device__ __forceinline__ void rescale_o(float (&o)[D / 2]) const {
#pragma unroll
    for (int n8 = 0; n8 < D / 8; ++n8) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        o[4 * n8 + 2 * h] *= rescale[h];
        o[4 * n8 + 2 * h + 1] *= rescale[h];
      }
    }
  }
};

}  // namespace weft::attn
