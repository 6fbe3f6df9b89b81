// rope.cu — rotary position embedding in place, rotate-half convention: in every head, element i
// (i < d/2) and element i + d/2 turn together by pos * theta^(-2i/d). One thread takes 8 such pairs:
// a 16-byte vector from each half of the head.
//
// Angles are fp32 products pos * inv_freq with inv_freq = theta^(-2i/d) in fp32 (what Hugging Face's
// Llama computes) and sincosf at full precision: pos * inv_freq reaches 1e5 rad in long contexts,
// where the fast __sincosf loses every digit.
//
// Napkin: q and k of 64 decode rows, 40 heads of 128 (32 q + 8 k): 640 KiB read and written, under
// 1 us; launch-bound.
#include <cmath>

#include "nn.h"
#include "vec.cuh"

namespace weft::nn {

namespace {

__global__ void rope_kernel(bf16* x, const int32_t* positions, int64_t rows, int64_t heads, int64_t head_dim,
                            int64_t row_stride, float log2_theta) {
  const int64_t half = head_dim / 2, groups = half / kVec, per_row = heads * groups, total = rows * per_row;
  for (int64_t v = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; v < total; v += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = v / per_row, h = (v % per_row) / groups, i0 = (v % groups) * kVec;
    const float pos = float(positions[r]);
    bf16* lo = x + r * row_stride + h * head_dim + i0;
    bf16* hi = lo + half;
    float a[kVec], b[kVec];
    load8(lo, a);
    load8(hi, b);
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      const float inv_freq = exp2f(-float(2 * (i0 + j)) / float(head_dim) * log2_theta);
      float s, c;
      sincosf(pos * inv_freq, &s, &c);
      const float x1 = a[j], x2 = b[j];
      a[j] = x1 * c - x2 * s;
      b[j] = x2 * c + x1 * s;
    }
    store8(lo, a);
    store8(hi, b);
  }
}

}  // namespace

cudaError_t rope(const WeftRopeParams& p) {
  constexpr int kThreads = 256;
  const uint64_t items = uint64_t(p.rows) * uint64_t(p.heads) * uint64_t(p.head_dim / 2 / kVec);
  rope_kernel<<<grid_for(items, kThreads), kThreads, 0, reinterpret_cast<cudaStream_t>(p.stream)>>>(
      reinterpret_cast<bf16*>(p.x), reinterpret_cast<const int32_t*>(p.positions), p.rows, p.heads, p.head_dim,
      p.row_stride, log2f(p.theta));
  return cudaGetLastError();
}

}  // namespace weft::nn
