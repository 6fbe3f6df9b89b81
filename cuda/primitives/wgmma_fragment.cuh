// wgmma_fragment.cuh — which matrix element each thread of a warpgroup holds in wgmma's register
// fragments, and the conversions between them that need no data movement.
//
// Layouts (thread t of the warpgroup: warp w = t / 32, lane l = t % 32, quad row g = l / 4, q = l % 4):
//   D fragment of an m64nN accumulator (wgmma.cuh): float acc[N / 2],
//     acc[4 * n8 + 2 * h + j] = D[16 w + g + 8 h][8 n8 + 2 q + j]      (n8 < N / 8, h, j in {0, 1})
//   A fragment of one m64k16 step (wgmma_rs.cuh): uint32_t a[4], two bf16 each (low half first),
//     a[r] = { A[16 w + g + 8 (r % 2)][8 (r / 2) + 2 q + j] : j = 0, 1 }   (r = 0..3)
//   So the D fragment of P (64 x K) holds, for k16 step kk, exactly the elements of that step's A
//   fragment, in order: a[r] = bf16x2(acc[8 kk + 2 r], acc[8 kk + 2 r + 1]). P = softmax(Q Kᵀ) goes
//   from the first GEMM's accumulators into the second GEMM's A operand by rounding alone (the
//   static_asserts below check the index algebra for every thread, step and register).
//   The four threads of a quad (same g) hold one row's columns between them: a row reduction is a
//   thread-local reduction and two xor-shuffles (quad_max, quad_sum).
//
// Contract:
//   - wg::pack_a_fragments<K>(acc, a) rounds the m64nK accumulator fragment acc to bf16 and writes
//     the A fragments of its K / 16 k16 steps into a[K / 16][4] (round to nearest even).
//   - wg::quad_max(x) / wg::quad_sum(x): the max / sum of x over the four threads of the caller's
//     quad; every thread of the warp must call it (shuffles over the full warp mask).
//   - wg::pack_bf16x2(lo, hi): two floats rounded to bf16, lo in the low half.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace weft::wg {

namespace fragment {

struct Coord {
  int row, col;
};

// D[row][col] held by thread t at acc index i.
constexpr Coord d_coord(int t, int i) {
  const int w = t / 32, l = t % 32;
  const int n8 = i / 4, h = (i / 2) % 2, j = i % 2;
  return {16 * w + l / 4 + 8 * h, 8 * n8 + 2 * (l % 4) + j};
}

// A[row][col] (within one k16 step) held by thread t in register r, half j.
constexpr Coord a_coord(int t, int r, int j) {
  const int w = t / 32, l = t % 32;
  return {16 * w + l / 4 + 8 * (r % 2), 8 * (r / 2) + 2 * (l % 4) + j};
}

// pack_a_fragments' mapping: register r of step kk, half j, comes from acc[8 kk + 2 r + j]. True when
// that element is A's element of the step for every thread: D column 16 kk + c is A column c.
constexpr bool repack_is_identity(int k) {
  for (int t = 0; t < 128; ++t)
    for (int kk = 0; kk < k / 16; ++kk)
      for (int r = 0; r < 4; ++r)
        for (int j = 0; j < 2; ++j) {
          const Coord d = d_coord(t, 8 * kk + 2 * r + j);
          const Coord a = a_coord(t, r, j);
          if (d.row != a.row || d.col != 16 * kk + a.col) return false;
        }
  return true;
}
static_assert(repack_is_identity(64) && repack_is_identity(128) && repack_is_identity(160) && repack_is_identity(192) &&
                  repack_is_identity(256),
              "the D fragment of P is the A fragment of P·V register for register");

}  // namespace fragment

__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

template <int K>
__device__ __forceinline__ void pack_a_fragments(const float (&acc)[K / 2], uint32_t (&a)[K / 16][4]) {
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk) {
#pragma unroll
    for (int r = 0; r < 4; ++r) a[kk][r] = pack_bf16x2(acc[8 * kk + 2 * r], acc[8 * kk + 2 * r + 1]);
  }
}

__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}

__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

}  // namespace weft::wg
