// reference.cu — the deliberately simple fp32 attention the tests check the engine against: one
// warp per query, two passes over its visible keys (the max, then the sums), each score a warp
// reduction of a fp32 dot product, expf / logf. No tensor cores, no tiling, no online rescaling:
// nothing it shares with the engine but the definition (problem.h).
#include <cuda_bf16.h>

#include <cmath>

#include "attention.h"

namespace weft::attn {

namespace {

constexpr int kMaxPerLane = 8;  // head dims up to 256

__device__ float warp_sum(float x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

__global__ void reference_kernel(Problem p, int32_t d, float scale, const __nv_bfloat16* q, const __nv_bfloat16* k,
                                 const __nv_bfloat16* v, float* out) {
  const int64_t warp = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  const int64_t per_pair = p.seqlen_q;
  if (warp >= int64_t(p.batch) * p.heads * per_pair) return;
  const int32_t i = int32_t(warp % per_pair);
  const int32_t h = int32_t((warp / per_pair) % p.heads);
  const int32_t b = int32_t(warp / per_pair / p.heads);
  int64_t q_start, k_start;
  int32_t len_q, len_k;
  if (p.cu_q != nullptr) {
    q_start = p.cu_q[b];
    len_q = p.cu_q[b + 1] - p.cu_q[b];
    k_start = p.cu_k[b];
    len_k = p.used_k != nullptr ? p.used_k[b] : p.cu_k[b + 1] - p.cu_k[b];
    // Offsets outside the tensors (the engine reports them): nothing is read or written, so the
    // output keeps what the caller filled it with (the tests: NaN).
    if (q_start < 0 || len_q < 0 || q_start + len_q > p.rows_q || k_start < 0 || len_k < 0 || k_start + len_k > p.rows_k) return;
  } else {
    q_start = int64_t(b) * p.seqlen_q;
    len_q = p.seqlen_q;
    k_start = int64_t(b) * p.seqlen_k;
    len_k = p.seqlen_k;
  }
  if (i >= len_q) return;
  const int32_t hk = h / (p.heads / p.kv_heads);
  const int per_lane = d / 32;
  float qv[kMaxPerLane];
  const __nv_bfloat16* qrow = q + (q_start + i) * int64_t(p.heads) * d + int64_t(h) * d;
  for (int e = 0; e < per_lane; ++e) qv[e] = __bfloat162float(qrow[lane + 32 * e]);
  // Visible keys: [0, last] (bottom-right causal alignment).
  const int32_t last = p.causal ? min(len_k - 1, i + (len_k - len_q)) : len_k - 1;
  const auto score = [&](int32_t j) {
    const __nv_bfloat16* krow = k + (k_start + j) * int64_t(p.kv_heads) * d + int64_t(hk) * d;
    float dot = 0.0f;
    for (int e = 0; e < per_lane; ++e) dot += qv[e] * __bfloat162float(krow[lane + 32 * e]);
    return warp_sum(dot) * scale;
  };
  float mx = -INFINITY;
  for (int32_t j = 0; j <= last; ++j) mx = fmaxf(mx, score(j));
  float sum = 0.0f;
  float acc[kMaxPerLane] = {};
  for (int32_t j = 0; j <= last; ++j) {
    const float e = expf(score(j) - mx);
    sum += e;
    const __nv_bfloat16* vrow = v + (k_start + j) * int64_t(p.kv_heads) * d + int64_t(hk) * d;
    for (int x = 0; x < per_lane; ++x) acc[x] += e * __bfloat162float(vrow[lane + 32 * x]);
  }
  float* orow = out + (q_start + i) * int64_t(p.heads) * d + int64_t(h) * d;
  for (int x = 0; x < per_lane; ++x) orow[lane + 32 * x] = sum > 0.0f ? acc[x] / sum : 0.0f;
  if (p.lse != nullptr && lane == 0) {
    const int64_t at = int64_t(h) * p.lse_head_stride + (p.cu_q != nullptr ? q_start : int64_t(b) * p.lse_batch_stride) + i;
    p.lse[at] = sum > 0.0f ? mx + logf(sum) : -INFINITY;
  }
}

}  // namespace

cudaError_t reference_attention(const Problem& problem, int32_t head_dim, const void* q, const void* k, const void* v,
                                float* out, cudaStream_t stream) {
  if (head_dim % 32 != 0 || head_dim / 32 > kMaxPerLane) return cudaErrorInvalidValue;
  // scale_log2 carries the scale: scale = scale_log2 / log2(e).
  const float scale = problem.scale_log2 / 1.4426950408889634f;
  const int64_t warps = int64_t(problem.batch) * problem.heads * problem.seqlen_q;
  const int threads = 256;
  const int64_t blocks = (warps * 32 + threads - 1) / threads;
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  reference_kernel<<<unsigned(blocks), threads, 0, stream>>>(problem, head_dim, scale, static_cast<const __nv_bfloat16*>(q),
                                                             static_cast<const __nv_bfloat16*>(k),
                                                             static_cast<const __nv_bfloat16*>(v), out);
  return cudaGetLastError();
}

}  // namespace weft::attn
