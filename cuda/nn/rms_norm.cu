// rms_norm.cu — RMSNorm of each row, optionally after the residual add (pre-norm blocks: residual +=
// x, then normalize the sum). One CTA per row; the row stays in registers between the sum of squares
// and the scaling, so every byte is read once: kVecs 16-byte vectors per thread, the smallest count
// that fits the row in 1024 threads.
//
// Napkin, residual form: read x, residual and weight, write residual and out, 2 B each: 64 decode rows
// of 4096 move 2 MiB, 0.6 us at 3.3 TB/s (launch-bound); a 2048-token prefill shard of 1024 rows
// moves 32 MiB, ~10 us.
#include <cmath>

#include "nn.h"
#include "reduce.cuh"
#include "vec.cuh"

namespace weft::nn {

namespace {

template <int kVecs>
__global__ void rms_norm_kernel(const bf16* x, bf16* residual, const bf16* weight, bf16* out, int64_t dim,
                                float eps) {
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const int64_t vectors = dim / kVec;
  float v[kVecs][kVec];
  float sq = 0.0f;
#pragma unroll
  for (int j = 0; j < kVecs; ++j) {
    const int64_t c = (int64_t(j) * blockDim.x + threadIdx.x);
    if (c >= vectors) continue;
    load8(x + row * dim + c * kVec, v[j]);
    if (residual) {
      float r[kVec];
      load8(residual + row * dim + c * kVec, r);
#pragma unroll
      for (int i = 0; i < kVec; ++i) r[i] += v[j][i];
      store8(residual + row * dim + c * kVec, r);
      // The norm is of the sum as stored (bf16), as a model that adds in bf16 and then normalizes sees it.
#pragma unroll
      for (int i = 0; i < kVec; ++i) v[j][i] = __bfloat162float(__float2bfloat16_rn(r[i]));
    }
#pragma unroll
    for (int i = 0; i < kVec; ++i) sq += v[j][i] * v[j][i];
  }
  const float inv = rsqrtf(block::sum(sq, scratch) / float(dim) + eps);
#pragma unroll
  for (int j = 0; j < kVecs; ++j) {
    const int64_t c = (int64_t(j) * blockDim.x + threadIdx.x);
    if (c >= vectors) continue;
    float w[kVec];
    load8(weight + c * kVec, w);
#pragma unroll
    for (int i = 0; i < kVec; ++i) v[j][i] *= inv * w[i];
    store8(out + row * dim + c * kVec, v[j]);
  }
}

template <int kVecs>
cudaError_t launch(const WeftRmsNormParams& p, int threads) {
  rms_norm_kernel<kVecs><<<unsigned(p.rows), threads, 0, reinterpret_cast<cudaStream_t>(p.stream)>>>(
      reinterpret_cast<const bf16*>(p.x), reinterpret_cast<bf16*>(p.residual), reinterpret_cast<const bf16*>(p.weight),
      reinterpret_cast<bf16*>(p.out), p.dim, p.eps);
  return cudaGetLastError();
}

}  // namespace

cudaError_t rms_norm(const WeftRmsNormParams& p) {
  // Threads: whole warps (the reduction needs them), as few vectors each as 1024 threads allow.
  const int64_t vectors = p.dim / kVec;
  auto threads_for = [&](int per) { return int((((vectors + per - 1) / per) + 31) / 32 * 32); };
  if (threads_for(1) <= 1024) return launch<1>(p, threads_for(1));
  if (threads_for(2) <= 1024) return launch<2>(p, threads_for(2));
  if (threads_for(4) <= 1024) return launch<4>(p, threads_for(4));
  return launch<8>(p, threads_for(8));  // dim <= 65536, checked by the caller
}

}  // namespace weft::nn
